"""Episodes on the shared model: one, both ways (Compare), or over a suite of tasks.

No gradio here. ``_episode_on_gpu`` and ``_compare_on_gpu`` are the only functions that
touch the GPU; on ZeroGPU they run under ``spaces.GPU``, which runs them in a forked worker
process, so they take only picklable arguments and find the model through ``bind``. Each
asks for the seconds of its own budget (the episode's limit, both sides' for Compare, plus
a margin); on ZeroGPU an episode's limit is first fitted into what one call may hold. A
remote backend (openai) never asks for a GPU.

Stop reaches the worker through a flag in shared memory (``SharedCancel``), made at import
so that the forked workers inherit it.

A Playground conversation keeps its built-in environment between episodes (``Session``):
``kept_environment`` opens it here, each episode gets it as an argument, and a forked
worker, which changed only its own copy, sends that copy back before the episode's end
(``_Kept``) to take the session's place.
"""

from __future__ import annotations

import contextvars
import multiprocessing
import queue
import threading
import uuid
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Iterator

from envace_demo.engine import Episode, EpisodeConfig
from envace_demo.envs.base import Environment
from envace_demo.envs.manual import ManualEnvironment, PendingCall
from envace_demo.envs.registry import ENVIRONMENTS, create, open_environment
from envace_demo.errors import ConfigError, ModelError
from envace_demo.events import EpisodeFinished, Event
from envace_demo.record import Trajectory
from envace_demo.tasks import Task
from envace_demo.models.adapters import without_adapter
from envace_demo.models.hardware import GPU_MARGIN_SECONDS
from envace_demo.ui import bfcl_entries
from envace_demo.ui import gpu as gpu_mod
from envace_demo.ui.gpu import gpu
from envace_demo.ui.holder import ModelHolder
from envace_demo.ui.inputs import MANUAL
from envace_demo.ui.options import UIOptions
from envace_demo.ui.session import Conversation

_holder: ModelHolder | None = None
_options: UIOptions = UIOptions()


def bind(holder: ModelHolder, options: UIOptions | None = None) -> None:
    """Make ``holder`` the process's model (one per process: the model is shared by design)
    and ``options`` its limits (which MCP servers the operator configured)."""
    global _holder, _options
    _holder = holder
    _options = options or UIOptions()


def _open_environment(task: Task, token: str | None = None):
    """A fresh environment for the task: a built-in, a connection to a configured MCP
    server, or the manual environment its caller registered under ``token``."""
    if not task.env:
        return None
    if task.env == MANUAL:
        manual = _manuals.get(token) if token else None
        if manual is None:
            raise ConfigError("environment manual: its responses are typed in the Playground")
        return manual
    return open_environment(task.env, dict(_options.mcp_servers), _options.mcp_timeout)


def kept_environment(task: Task) -> Environment | None:
    """A fresh environment a conversation keeps between its episodes: a built-in one or a
    BFCL entry's backends in their initial state (in memory: they pickle to a GPU worker and
    back); None for the rest (an MCP connection, the manual environment, none), which the
    runner opens per episode."""
    if task.env in ENVIRONMENTS:
        return create(task.env)
    return open_environment(task.env) if bfcl_entries.is_entry(task.env) else None


@dataclass
class _Kept:
    """The environment as an episode of a conversation left it, sent from where it ran just
    before the episode's end (a forked GPU worker changed its own copy)."""

    environment: Environment


# Cancel switches by token: a token pickles, a threading.Event does not (ZeroGPU pickles
# the arguments of a GPU call). In a forked ZeroGPU worker the table is a stale copy: the
# shared flag below carries Stop there.
_cancels: dict[str, threading.Event] = {}
# The manual environment of a run, by the same token: whoever types reaches it through the
# session, the engine through this table (in a forked ZeroGPU worker it is missing; public
# mode, which a Space runs in, offers no manual environment).
_manuals: dict[str, ManualEnvironment] = {}

# One byte per running episode, in memory shared with the processes forked after import.
CANCEL_SLOTS = 128
_flags = multiprocessing.RawArray("b", CANCEL_SLOTS)
_free_slots = list(range(CANCEL_SLOTS))
_slots_lock = threading.Lock()


class SharedCancel:
    """A cancel switch that a forked GPU worker sees: ``is_set`` reads the shared flag."""

    def __init__(self, slot: int, local: threading.Event | None = None):
        self.slot, self.local = slot, local

    def is_set(self) -> bool:
        return bool(_flags[self.slot]) or (self.local is not None and self.local.is_set())

    def set(self) -> None:
        _flags[self.slot] = 1


class _Mirror:
    """While a run lasts, ``cancel`` (set by Stop in this process) is copied into a slot."""

    def __init__(self, cancel: threading.Event):
        with _slots_lock:
            if not _free_slots:
                raise ConfigError(f"more than {CANCEL_SLOTS} runs at once")
            self.slot = _free_slots.pop()
        _flags[self.slot] = 0
        self._cancel, self._done = cancel, threading.Event()
        threading.Thread(target=self._watch, name="envace-cancel", daemon=True).start()

    def _watch(self) -> None:
        while not self._done.is_set():
            if self._cancel.wait(0.1):
                _flags[self.slot] = 1
                return

    def close(self) -> None:
        self._done.set()
        with _slots_lock:
            _free_slots.append(self.slot)


def _cancel_for(token: str | None, slot: int | None):
    local = _cancels.get(token) if token else None
    return SharedCancel(slot, local) if slot is not None else local


def _uses_gpu() -> bool:
    """A local model asks for a GPU; a remote one (backend openai) never does."""
    return _holder is None or _holder.settings.backend == "transformers"


def _episode_seconds(
    task: Task,
    config: EpisodeConfig,
    cancel_token: str | None = None,
    cancel_slot: int | None = None,
    environment: Environment | None = None,
    previous: Trajectory | None = None,
) -> int:
    # The episode stops itself at episode_seconds; the margin covers moving data to the GPU.
    return int(config.episode_seconds) + GPU_MARGIN_SECONDS


def _compare_seconds(
    task: Task, configs: dict[str, EpisodeConfig], cancel_token: str | None = None, cancel_slot: int | None = None
) -> int:
    return int(sum(c.episode_seconds for c in configs.values())) + GPU_MARGIN_SECONDS


def _episode(
    task: Task,
    config: EpisodeConfig,
    cancel_token: str | None = None,
    cancel_slot: int | None = None,
    environment: Environment | None = None,
    previous: Trajectory | None = None,
) -> Iterator[Event | _Kept]:
    """One episode; against ``environment`` where a conversation keeps one (left open, and
    sent back before the end), else against one opened for it; ``previous``: the
    conversation so far."""
    if _holder is None:
        raise ModelError("no model is bound to the runner")
    backend = _holder.wait(timeout=0.0)
    if config.base_weights:
        backend = without_adapter(backend)
    kept = environment is not None
    if not kept:
        environment = _open_environment(task, cancel_token)
    try:
        if environment is not None and not task.tools:
            task = replace(task, tools=environment.tools())  # an MCP server brings its own
        cancel = _cancel_for(cancel_token, cancel_slot)
        for event in Episode(backend, task, config, environment, cancel=cancel, previous=previous).run():
            if kept and isinstance(event, EpisodeFinished):
                yield _Kept(environment)
            yield event
    finally:
        # The manual one belongs to its caller, a kept one to its conversation.
        if not kept and environment is not None and task.env != MANUAL:
            environment.close()


def _compare(
    task: Task, configs: dict[str, EpisodeConfig], cancel_token: str | None = None, cancel_slot: int | None = None
) -> Iterator[tuple[str, Event]]:
    """Both sides of Compare in one call (one GPU call on ZeroGPU: one quota check)."""
    cancel = _cancel_for(cancel_token, cancel_slot)
    for side, config in configs.items():
        if cancel is not None and cancel.is_set():
            return
        for event in _episode(task, config, cancel_token, cancel_slot):
            yield side, event


_episode_on_gpu = gpu(_episode_seconds)(_episode)
_compare_on_gpu = gpu(_compare_seconds)(_compare)


def fitted_to_call(config: EpisodeConfig, share: int = 1) -> EpisodeConfig:
    """``config`` with a limit one GPU call holds (on ZeroGPU: its ``share`` of it)."""
    limit = gpu_mod.call_episode_seconds()
    if limit is None or not _uses_gpu():
        return config
    return replace(config, episode_seconds=min(config.episode_seconds, limit / share))


def _run_on_gpu(plain, on_gpu, duration, *args) -> Iterator:
    """``on_gpu(*args)`` (``plain`` for a remote backend), spaces' refusals explained."""
    if not _uses_gpu():
        yield from plain(*args)
        return
    with gpu_mod.explained_refusals(gpu_mod.bounded(duration(*args))):
        yield from on_gpu(*args)


def episode_events(
    task: Task,
    config: EpisodeConfig,
    cancel: threading.Event | None = None,
    manual: ManualEnvironment | None = None,
    conversation: Conversation | None = None,
) -> Iterator[Event]:
    """The engine's events for one episode against a fresh environment (if the task has
    one), against ``manual`` for a task of the manual environment, or, in a
    ``conversation`` that keeps one, against its environment, going on from its record
    so far (a follow-up); the environment as the episode left it is the conversation's."""
    config = fitted_to_call(config)
    environment = conversation.environment if conversation is not None else None
    previous = conversation.trajectory if conversation is not None else None
    with _registered(cancel, manual) as (token, slot):
        args = (task, config, token, slot, environment, previous)
        for item in _run_on_gpu(_episode, _episode_on_gpu, _episode_seconds, *args):
            if isinstance(item, _Kept):
                conversation.environment = item.environment  # the same object, unless it ran elsewhere
                continue
            yield item


@contextmanager
def _registered(cancel: threading.Event | None, manual: ManualEnvironment | None = None) -> Iterator[tuple]:
    """(token, shared cancel slot) of a run while it lasts: its cancel switch and manual
    environment reachable by a token (what a GPU call can pickle), Stop mirrored into a slot
    a forked GPU worker sees; both released when the run ends."""
    token, mirror = None, None
    if cancel is not None or manual is not None:
        token = uuid.uuid4().hex
        if cancel is not None:
            _cancels[token] = cancel
            mirror = _Mirror(cancel)
        if manual is not None:
            _manuals[token] = manual
    try:
        yield token, (mirror.slot if mirror is not None else None)
    finally:
        if mirror is not None:
            mirror.close()
        if token is not None:
            _cancels.pop(token, None)
            _manuals.pop(token, None)


def carrying_context(fn: Callable) -> Callable:
    """``fn``, run wherever it is called (a thread pool's worker) in a copy of the calling
    thread's context: the visitor's gradio request, by which ZeroGPU charges the right
    visitor's quota, reaches the suite's episodes."""
    context = contextvars.copy_context()

    def run(*args, **kwargs):
        return context.copy().run(fn, *args, **kwargs)

    return run


def manual_environment(
    task: Task,
    config: EpisodeConfig,
    timeout: float,
    cancel: threading.Event | None = None,
    on_request: Callable[[PendingCall], None] | None = None,
) -> tuple[ManualEnvironment, EpisodeConfig]:
    """The manual environment of ``task`` and the config to run it with: a person answers
    each call, so a call may wait ``timeout`` seconds instead of a tool's limit."""
    manual = ManualEnvironment(task.tools, timeout=timeout, cancel=cancel, on_request=on_request)
    return manual, replace(config, tool_seconds=timeout)


_DONE = object()


def with_idle_ticks(events: Iterator[Event], every: float = 0.2) -> Iterator[Event | None]:
    """``events``, drawn on a worker thread, with a None whenever ``every`` seconds pass
    without one: the caller may update the page while the engine blocks (a manual call
    waiting for the response that this very page has to send)."""
    box: queue.Queue = queue.Queue()

    def pump() -> None:
        try:
            for event in events:
                box.put(event)
        except BaseException as err:  # re-raised in the caller's thread
            box.put(err)
        finally:
            box.put(_DONE)

    threading.Thread(target=pump, name="envace-manual-run", daemon=True).start()
    while True:
        try:
            item = box.get(timeout=every)
        except queue.Empty:
            yield None
            continue
        if item is _DONE:
            return
        if isinstance(item, BaseException):
            raise item
        yield item


def run_to_end(
    task: Task,
    config: EpisodeConfig,
    cancel: threading.Event | None = None,
    manual: ManualEnvironment | None = None,
) -> Trajectory:
    for event in episode_events(task, config, cancel, manual):
        if isinstance(event, EpisodeFinished):
            return event.trajectory
    raise AssertionError("the engine always ends with EpisodeFinished")


# ---- Compare: the same task without and with rehearsal ---------------------------------


def compare_events(
    task: Task, configs: dict[str, EpisodeConfig], cancel: threading.Event | None = None
) -> Iterator[tuple[str, Event]]:
    """(side, event) for each side in turn, both in one GPU call; sides are the keys of
    ``configs``. On ZeroGPU each side gets an equal share of what that call holds."""
    configs = {side: fitted_to_call(config, share=len(configs)) for side, config in configs.items()}
    with _registered(cancel) as (token, slot):
        yield from _run_on_gpu(_compare, _compare_on_gpu, _compare_seconds, task, configs, token, slot)


def metrics(traj: Trajectory) -> dict:
    """The Compare table's numbers for one trajectory."""
    totals = traj.totals()
    return {
        "success": traj.success,
        "real_calls": totals["real_calls"],
        "real_errors": totals["real_errors"],
        "tokens": totals["tokens"],
        "seconds": totals["seconds"],
        "fidelity": None if traj.fidelity is None else round(traj.fidelity, 3),
        "ended": traj.ended,
    }
