"""Episodes on the shared model: one, both ways (Compare), or over a suite of tasks.

No gradio here. ``_episode_on_gpu`` is the only function that touches the GPU; on
ZeroGPU it runs under ``spaces.GPU``, which may run it in another process, so it
takes only picklable arguments and finds the model through ``bind``.
"""

from __future__ import annotations

import queue
import threading
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Iterator

from envace_demo.engine import Episode, EpisodeConfig
from envace_demo.envs.manual import ManualEnvironment, PendingCall
from envace_demo.envs.registry import open_environment
from envace_demo.errors import ConfigError, ModelError
from envace_demo.events import EpisodeFinished, Event
from envace_demo.record import Trajectory
from envace_demo.tasks import Task
from envace_demo.ui.gpu import gpu
from envace_demo.ui.holder import ModelHolder
from envace_demo.ui.inputs import MANUAL
from envace_demo.ui.options import UIOptions

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


# Cancel switches by token: a token pickles, a threading.Event does not (ZeroGPU pickles
# the arguments of a GPU call). In a forked ZeroGPU worker Stop is not seen there: the
# episode's time limit ends it.
_cancels: dict[str, threading.Event] = {}
# The manual environment of a run, by the same token: whoever types reaches it through the
# session, the engine through this table (in a forked ZeroGPU worker it is missing; public
# mode, which a Space runs in, offers no manual environment).
_manuals: dict[str, ManualEnvironment] = {}


def _gpu_seconds(task: Task, config: EpisodeConfig, cancel_token: str | None = None) -> int:
    # The episode stops itself at episode_seconds; the margin covers moving data to the GPU.
    return int(config.episode_seconds) + 15


@gpu(_gpu_seconds)
def _episode_on_gpu(task: Task, config: EpisodeConfig, cancel_token: str | None = None) -> Iterator[Event]:
    if _holder is None:
        raise ModelError("no model is bound to the runner")
    backend = _holder.wait(timeout=0.0)
    environment = _open_environment(task, cancel_token)
    try:
        if environment is not None and not task.tools:
            task = replace(task, tools=environment.tools())  # an MCP server brings its own
        cancel = _cancels.get(cancel_token) if cancel_token else None
        yield from Episode(backend, task, config, environment, cancel=cancel).run()
    finally:
        if environment is not None and task.env != MANUAL:  # the manual one belongs to its caller
            environment.close()


def episode_events(
    task: Task,
    config: EpisodeConfig,
    cancel: threading.Event | None = None,
    manual: ManualEnvironment | None = None,
) -> Iterator[Event]:
    """The engine's events for one episode against a fresh environment (if the task has
    one), or against ``manual`` for a task of the manual environment."""
    token = None
    if cancel is not None or manual is not None:
        token = uuid.uuid4().hex
        if cancel is not None:
            _cancels[token] = cancel
        if manual is not None:
            _manuals[token] = manual
    try:
        yield from _episode_on_gpu(task, config, token)
    finally:
        if token is not None:
            _cancels.pop(token, None)
            _manuals.pop(token, None)


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
    """(side, event) for each side in turn; sides are the keys of ``configs``."""
    for side, config in configs.items():
        if cancel is not None and cancel.is_set():
            return
        for event in episode_events(task, config, cancel):
            yield side, event


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
