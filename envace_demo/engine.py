"""The episode engine: act, rehearse, commit.

``Episode(...).run()`` is a generator of typed events (``envace_demo.events``);
the last one carries the finished ``Trajectory``. Modes:

- ``none``: act, execute for real, act ... final answer.
- ``parallel`` N: N imagined trajectories from the same start, advanced in
  lockstep (each round, the waiting generations of one role are one batched
  call), then one committed execution.
- ``sequential`` N: attempt k sees the memory of attempts 1..k-1, then commit.
- ``imagine``: N imagined trajectories and nothing real (schemas with no backend).

In a committed run every call is rehearsed first and then executed, so each step
carries its action, its rehearsed response and its real response.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Generator, Iterator

from jsonschema import Draft202012Validator

from envace_demo import memory as memory_mod
from envace_demo.calls import parse_action, parse_execution_result
from envace_demo.envs.base import Environment
from envace_demo.errors import ConfigError
from envace_demo.events import (
    EpisodeFinished,
    EpisodeStarted,
    Event,
    Generating,
    MemoryReady,
    RehearsalFinished,
    StepUpdated,
)
from envace_demo.fidelity import fidelity, mean_fidelity
from envace_demo.models.base import Backend, Constraint, Generation, Prompt, Sampling
from envace_demo.prompts import Conversation, Turn, actor_prompt, rehearser_messages, rehearser_prompt
from envace_demo.record import Action, Rehearsal, Step, ToolCall, Trajectory
from envace_demo.schemas import Tool, find_tool, validate_arguments
from envace_demo.tasks import Task, evaluate

MODES = ("none", "parallel", "sequential", "imagine")
# How an interrupted step names the reason the episode stopped.
_STOP_WORDS = {"time_limit": "the time limit came", "cancelled": "stopped"}
_STREAM_INTERVAL_S = 0.1
# A backend that ignores its cancel switch is abandoned this long after being told to stop.
_HALT_GRACE_S = 5.0

# Executes one committed call for real: (tool, arguments) -> JSON response.
Executor = Callable[[Tool, dict], Any]


@dataclass
class EpisodeConfig:
    mode: str = "parallel"
    n: int = 2
    sampling: Sampling = field(default_factory=Sampling)
    max_steps: int = 6
    episode_seconds: float = 600.0
    # One real call's limit. Above the MCP per-request timeout (30 s), whose own error is clearer.
    tool_seconds: float = 60.0
    constrained: bool = True
    # The first actor turn must call a tool: small models otherwise answer in prose.
    require_first_call: bool = False
    # Turns an exception's text into what the record may show (public mode hides server paths
    # and secrets); None shows it as is.
    redact: Callable[[str], str] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        if self.mode in ("parallel", "sequential", "imagine") and not 1 <= self.n <= 64:
            raise ConfigError(f"n must be between 1 and 64, not {self.n}")
        if not self.tool_seconds > 0:
            raise ConfigError(f"tool_seconds must be positive, not {self.tool_seconds}")

    @classmethod
    def for_backend(cls, backend: Backend, *, constrained: bool = True, require_first_call: bool | None = None,
                    **values: Any) -> "EpisodeConfig":
        """A config that asks of ``backend`` only what it can do: constrained decoding where it
        supports it; a required first call where it needs one, unless said otherwise."""
        first = backend.requires_first_call if require_first_call is None else require_first_call
        return cls(constrained=constrained and backend.supports_constraints, require_first_call=first, **values)


class _Stop(Exception):
    """Ends the episode early; ``reason`` goes into ``Trajectory.ended``."""

    def __init__(self, reason: str):
        self.reason = reason


@dataclass
class _Outcome:
    steps: list[Step]
    final_answer: str | None
    ended: str


@dataclass
class _Request:
    """A generation a trajectory waits for; it is sent back the ``n`` Generations."""

    prompt: Prompt
    n: int
    constraint: Constraint | None
    role: str
    where: str
    rindex: int | None


# A trajectory: yields events and requests, is sent each request's Generations.
_Run = Generator["Event | _Request", "list[Generation] | None", _Outcome]


class Episode:
    def __init__(
        self,
        backend: Backend,
        task: Task,
        config: EpisodeConfig,
        environment: Environment | None = None,
        executor: Executor | None = None,
        cancel: threading.Event | None = None,
    ):
        self.backend = backend
        self.task = task
        self.config = config
        self.environment = environment
        if executor is None and environment is not None:
            executor = lambda tool, args: environment.execute(tool.original_name, args)  # noqa: E731
        self.executor = executor
        self.cancel = cancel or threading.Event()
        self._halt = threading.Event()  # tells the backend to stop generating
        self._deadline = 0.0
        self._seed_offset = 0
        self._tool_names = {t.name for t in task.tools}
        self._constrained = config.constrained and backend.supports_constraints

    # ---- public -----------------------------------------------------------------

    def run(self) -> Iterator[Event]:
        cfg = self.config
        start = time.monotonic()
        self._deadline = start + cfg.episode_seconds
        traj = Trajectory(
            mode=cfg.mode,
            model=self.backend.info.to_dict(),
            tools=[t.to_dict() for t in self.task.tools],
            prompt=self.task.prompt,
            environment=self.task.env,
            task=self.task.name,
            n=cfg.n if cfg.mode != "none" else 0,
            seed=cfg.sampling.seed,
            sampling={k: v for k, v in vars(cfg.sampling).items()},
        )
        yield EpisodeStarted(traj)
        try:
            if cfg.mode in ("parallel", "sequential", "imagine"):
                yield from self._rehearse_all(traj)
            if cfg.mode == "imagine":
                last = traj.rehearsals[-1] if traj.rehearsals else None
                traj.final_answer = last.final_answer if last else None
                traj.ended = last.ended if last else "no_rehearsal"
            else:
                conversation = Conversation(self.task.prompt, memory=(traj.memory or {}).get("text") or None)
                outcome = yield from self._drive(
                    self._trajectory(conversation, where="commit", rindex=None, steps=traj.steps, commit=True)
                )
                traj.final_answer, traj.ended = outcome.final_answer, outcome.ended
        except _Stop as stop:
            traj.ended = stop.reason
        traj.seconds = time.monotonic() - start
        traj.fidelity = mean_fidelity([s.fidelity for s in traj.steps])
        if self.environment is not None:
            traj.final_state = self.environment.state()
        if cfg.mode != "imagine":
            verdict = evaluate(self.task, traj.committed_calls(), traj.final_answer, traj.final_state)
            if verdict is not None:
                traj.success, traj.check_reasons = verdict.success, verdict.reasons
        yield EpisodeFinished(traj)

    # ---- rehearsal ----------------------------------------------------------------

    def _rehearse_all(self, traj: Trajectory) -> Generator[Event, None, None]:
        cfg = self.config
        if cfg.mode == "sequential":  # attempt k needs the memory of 1..k-1: one at a time
            for k in range(cfg.n):
                rehearsal = Rehearsal(index=k)
                traj.rehearsals.append(rehearsal)
                mem = memory_mod.summarize(traj.rehearsals[:-1])
                conversation = Conversation(self.task.prompt, memory=(mem or {}).get("text") or None)
                try:
                    outcome = yield from self._drive(
                        self._trajectory(conversation, where="rehearsal", rindex=k, steps=rehearsal.steps, commit=False)
                    )
                    rehearsal.final_answer, rehearsal.ended = outcome.final_answer, outcome.ended
                except _Stop as stop:
                    rehearsal.ended = stop.reason
                    yield RehearsalFinished(rehearsal)
                    raise
                yield RehearsalFinished(rehearsal)
        else:
            yield from self._lockstep(traj)
        traj.memory = memory_mod.summarize(traj.rehearsals)
        yield MemoryReady(traj.memory)

    def _lockstep(self, traj: Trajectory) -> Generator[Event, None, None]:
        """The N independent imagined trajectories advance together: each runs until it
        waits for a generation, then the waiting requests of one role go to the backend
        as one batch (the first actor turn, the same prompt N times, shares one prefill).
        N trajectories then cost about one, as long as batching is cheap."""
        runs: dict[int, tuple[Rehearsal, _Run]] = {}
        for k in range(self.config.n):
            rehearsal = Rehearsal(index=k)
            traj.rehearsals.append(rehearsal)
            run = self._trajectory(
                Conversation(self.task.prompt), where="rehearsal", rindex=k, steps=rehearsal.steps, commit=False
            )
            runs[k] = (rehearsal, run)
        waiting: dict[int, _Request] = {}
        try:
            for k in list(runs):
                yield from self._advance(k, runs, waiting, None)
            while waiting:
                batch = _next_batch(waiting)
                replies = yield from self._run_batch([waiting.pop(k) for k in batch])
                for k, gens in zip(batch, replies):
                    yield from self._advance(k, runs, waiting, gens)
        except _Stop as stop:
            for rehearsal, run in runs.values():  # the ones still running end with the episode
                yield from _unwind(run, stop)
                rehearsal.ended = stop.reason
                yield RehearsalFinished(rehearsal)
            raise

    def _advance(
        self, k: int, runs: dict, waiting: dict[int, _Request], reply: list[Generation] | None
    ) -> Generator[Event, None, None]:
        """Run trajectory ``k`` (sent ``reply``) until it waits for a generation or ends."""
        rehearsal, run = runs[k]
        while True:
            try:
                item = run.send(reply)
            except StopIteration as done:
                outcome: _Outcome = done.value
                rehearsal.final_answer, rehearsal.ended = outcome.final_answer, outcome.ended
                del runs[k]
                yield RehearsalFinished(rehearsal)
                return
            reply = None
            if isinstance(item, _Request):
                waiting[k] = item
                return
            yield item

    def _drive(self, run: _Run) -> Generator[Event, None, _Outcome]:
        """Run one trajectory on its own: each generation it waits for is one backend call."""
        reply: list[Generation] | None = None
        try:
            while True:
                try:
                    item = run.send(reply)
                except StopIteration as done:
                    return done.value
                reply = None
                if isinstance(item, _Request):
                    try:
                        (reply,) = yield from self._run_batch([item])
                    except _Stop as stop:
                        yield from _unwind(run, stop)
                        raise
                else:
                    yield item
        finally:
            run.close()

    # ---- one trajectory (imagined or committed) -----------------------------------------

    def _trajectory(
        self,
        conversation: Conversation,
        where: str,
        rindex: int | None,
        steps: list[Step],
        commit: bool,
    ) -> _Run:
        cfg = self.config
        real_results: list[tuple[ToolCall, Any]] = []  # few-shot entries for the rehearser
        rehearse = cfg.mode != "none"
        for turn_index in range(cfg.max_steps):
            require = cfg.require_first_call and turn_index == 0
            prompt = actor_prompt(self.backend, conversation, self.task.tools)
            (gen,) = yield from self._act(conversation, where, rindex, require=require, prompt=prompt)
            action = parse_action(
                gen.text, self._tool_names, require_call=require, cut=gen.finish_reason == "length"
            )
            step = self._new_step(steps, action, gen, prompt)
            if action.error:
                step.error = f"{action.error}: {action.error_message}"
                yield StepUpdated(where, rindex, step, "acted")
                return _Outcome(steps, None, "parse_error")
            if not action.calls:
                yield StepUpdated(where, rindex, step, "acted")
                if gen.finish_reason == "length":
                    step.error = "the answer hit the new-token limit"
                    return _Outcome(steps, action.content, "max_new_tokens")
                return _Outcome(steps, action.content, "answer")
            turn = Turn(action)
            for ci, call in enumerate(action.calls):
                if ci > 0:
                    step = self._new_step(steps, action, None, prompt)
                step.call, step.call_index = call, ci
                tool = find_tool(self.task.tools, call.name)
                step.validation_errors = check_arguments(tool, call.arguments) if tool else []
                step.valid = tool is not None and not step.validation_errors
                yield StepUpdated(where, rindex, step, "acted")
                try:
                    if rehearse:
                        yield from self._rehearse_step(step, tool, conversation, real_results, where, rindex)
                        yield StepUpdated(where, rindex, step, "rehearsed")
                    if commit and self.executor is not None:
                        self._execute(step, tool)
                        yield StepUpdated(where, rindex, step, "executed")
                        self._check_limits()  # Stop or the time limit during the call
                except _Stop as stop:
                    # The record says why this call has no rehearsed or real response.
                    missing = "rehearsal" if rehearse and step.rehearsed is None else "real call"
                    if step.error is None and (missing == "rehearsal" or (commit and step.real is None)):
                        step.error = f"{_STOP_WORDS.get(stop.reason, stop.reason)} before the {missing}"
                        yield StepUpdated(where, rindex, step, "acted")
                    raise
                if commit and self.executor is not None:
                    real_results.append((call, step.real))
                    turn.results.append((call, step.real))
                    if step.error:
                        conversation.turns.append(turn)
                        return _Outcome(steps, None, "environment_error")
                else:
                    turn.results.append((call, step.rehearsed))
            conversation.turns.append(turn)
            if commit and self.executor is None:
                # Nothing to commit against: the calls stand as the answer (BFCL style).
                return _Outcome(steps, None, "no_environment")
        return _Outcome(steps, None, "max_steps")

    def _new_step(self, steps: list[Step], action: Action, gen: Generation | None, prompt: Prompt) -> Step:
        step = Step(index=len(steps), action=action, prompts={"actor": prompt.shown()})
        if gen is not None:
            step.act_seconds = round(gen.seconds, 3)
            step.act_tokens = gen.new_tokens
            step.prompt_tokens = gen.prompt_tokens
        steps.append(step)
        return step

    # ---- phases ---------------------------------------------------------------------

    def _act(
        self,
        conversation: Conversation,
        where: str,
        rindex: int | None,
        n: int = 1,
        require: bool = False,
        prompt: Prompt | None = None,
    ) -> Generator[_Request, list[Generation], list[Generation]]:
        prompt = prompt or actor_prompt(self.backend, conversation, self.task.tools)
        constraint = (
            Constraint(role="actor", tools=tuple(self.task.tools), require_call=require) if self._constrained else None
        )
        return (yield _Request(prompt, n, constraint, "actor", where, rindex))

    def _rehearse_step(
        self,
        step: Step,
        tool: Tool | None,
        conversation: Conversation,
        real_results: list[tuple[ToolCall, Any]],
        where: str,
        rindex: int | None,
    ) -> Generator[_Request, list[Generation], None]:
        assert step.call is not None
        decided = validation_error(step.call, tool, step.validation_errors)
        if decided is not None:
            # Validation is certain here: the engine writes the contract's error itself and
            # the model is not asked (it could only guess what the engine already knows).
            step.rehearsed = decided
            step.rehearsal_text = None
            return
        messages = rehearser_messages(
            self.task.tools, real_results, conversation, step.action.text, step.call, tool
        )
        prompt = rehearser_prompt(self.backend, messages)
        step.prompts["rehearser"] = prompt.shown()
        constraint = (
            Constraint(role="rehearser", response_schema=tool.response if tool else None)
            if self._constrained
            else None
        )
        (gen,) = yield _Request(prompt, 1, constraint, "rehearser", where, rindex)
        step.rehearsal_text = gen.text
        step.rehearse_seconds = round(gen.seconds, 3)
        step.rehearse_tokens = gen.new_tokens
        result, problem = parse_execution_result(gen.text)
        if problem:
            # The actor still needs a tool message; it sees the failure as an error object.
            step.rehearsed = {"error": {"code": "REHEARSAL_FAILED", "message": problem}}
        else:
            step.rehearsed = result

    def _execute(self, step: Step, tool: Tool | None) -> None:
        assert step.call is not None and self.executor is not None
        started = time.monotonic()
        if tool is None:
            step.real = {"error": {"code": "TOOL_NOT_AVAILABLE", "message": f"no tool named {step.call.name!r}"}}
        else:
            step.real, step.error = self._call_tool(tool, step.call.arguments)
        step.execute_seconds = round(time.monotonic() - started, 3)
        if step.rehearsed is not None and not _rehearsal_failed(step.rehearsed):
            step.fidelity = fidelity(step.rehearsed, step.real)

    def _call_tool(self, tool: Tool, arguments: dict) -> tuple[Any, str | None]:
        """(real response, step error). The call runs on a worker thread so that a tool that
        hangs costs at most ``tool_seconds`` (or what is left of the episode), and Stop works
        meanwhile. A call given up on may still finish later on its thread."""
        assert self.executor is not None
        box: dict[str, Any] = {}

        def work() -> None:
            try:
                box["result"] = self.executor(tool, arguments)  # type: ignore[misc]
            except Exception as err:  # a failing backend must not take the app down
                box["error"] = err

        worker = threading.Thread(target=work, name="envace-execute", daemon=True)
        worker.start()
        limit = time.monotonic() + self.config.tool_seconds
        while worker.is_alive():
            worker.join(_STREAM_INTERVAL_S)
            if worker.is_alive() and (self.cancel.is_set() or time.monotonic() > min(limit, self._deadline)):
                break
        if "result" in box:
            return box["result"], None
        if "error" in box:
            message = self._shown(str(box["error"]) or type(box["error"]).__name__)
            return _failure("ENVIRONMENT_FAILURE", message), f"the environment failed: {message}"
        if self.cancel.is_set():
            return _failure("CANCELLED", "stopped while the tool was running"), "stopped during the real call"
        if time.monotonic() > self._deadline:
            return _failure("TIME_LIMIT", "the episode's time ran out during the call"), "time limit during the real call"
        message = f"no response within {self.config.tool_seconds:g} s"
        return _failure("TOOL_TIMEOUT", message), f"the environment did not answer: {message}"

    def _shown(self, text: str) -> str:
        return self.config.redact(text) if self.config.redact is not None else text

    # ---- generation with streaming, cancellation and the wall-clock limit ----------------------

    def _sampling(self) -> Sampling:
        s = self.config.sampling
        if s.seed is None:
            return s
        self._seed_offset += 1  # distinct yet reproducible seeds for each generation
        return replace(s, seed=s.seed + self._seed_offset - 1)

    def _run_batch(self, requests: list[_Request]) -> Generator[Event, None, list[list[Generation]]]:
        """One backend call for ``requests``, streaming as it goes; each request's Generations.

        One row: ``generate``. More: ``generate_many``, one row per sample (rows of one
        prompt share its prefill)."""
        self._check_limits()
        sampling = self._sampling()
        updates: queue.Queue = queue.Queue()
        box: dict[str, Any] = {}
        rows = [(i, j) for i, request in enumerate(requests) for j in range(request.n)]

        def work() -> None:
            on_token = lambda row, text: updates.put((row, text))  # noqa: E731
            try:
                if len(rows) == 1:
                    box["result"] = [
                        self.backend.generate(
                            requests[0].prompt, sampling, requests[0].constraint, on_token=on_token, cancel=self._halt
                        )
                    ]
                else:
                    box["result"] = self.backend.generate_many(
                        [requests[i].prompt for i, _ in rows],
                        sampling,
                        [requests[i].constraint for i, _ in rows],
                        on_token=on_token,
                        cancel=self._halt,
                    )
            except BaseException as err:  # surfaced below, in the engine's thread
                box["error"] = err

        worker = threading.Thread(target=work, name="envace-generate", daemon=True)
        worker.start()
        latest: dict[int, str] = {}
        halted_at: float | None = None
        while worker.is_alive():
            worker.join(_STREAM_INTERVAL_S)
            if self.cancel.is_set() or time.monotonic() > self._deadline:
                self._halt.set()
                halted_at = halted_at or time.monotonic()
                if time.monotonic() - halted_at > _HALT_GRACE_S:
                    break  # the backend ignores its switch: give up on it, keep what was shown
            while not updates.empty():
                row, text = updates.get_nowait()
                latest[row] = text
            for row, text in latest.items():
                if row < len(rows):
                    request, sample = requests[rows[row][0]], rows[row][1]
                    yield Generating(request.role, request.where, request.rindex, sample, text)  # type: ignore[arg-type]
            latest.clear()
        if "error" in box:
            err = box["error"]
            raise _Stop(f"model_error: {self._shown(str(err))}") from err
        self._check_limits()
        if "result" not in box:  # abandoned above
            raise _Stop("cancelled" if self.cancel.is_set() else "time_limit")
        gens: list[Generation] = box["result"]
        if any(g.finish_reason == "cancelled" for g in gens):
            raise _Stop("cancelled" if self.cancel.is_set() else "time_limit")
        if len(gens) != len(rows):
            raise _Stop(f"model_error: the backend returned {len(gens)} generations for {len(rows)} rows")
        replies: list[list[Generation]] = [[] for _ in requests]
        for (i, _), gen in zip(rows, gens):
            replies[i].append(gen)
        return replies

    def _check_limits(self) -> None:
        if self.cancel.is_set():
            raise _Stop("cancelled")
        if time.monotonic() > self._deadline:
            raise _Stop("time_limit")


def _unwind(run: _Run, stop: _Stop) -> Generator[Event, None, None]:
    """Tell a waiting trajectory that the episode stopped, so that the step it was on can
    record why it has no response; pass on what it reports, then close it."""
    try:
        item = run.throw(stop)
        while not isinstance(item, _Request):
            yield item
            item = run.send(None)
    except (_Stop, StopIteration):
        pass
    finally:
        run.close()


def _next_batch(waiting: dict[int, _Request]) -> list[int]:
    """The trajectories to serve next: those waiting for the role most of them wait for
    (ties: the role of the lowest index). Serving the larger group first lets the rest
    catch up, so the groups keep merging back into full batches."""
    counts: dict[str, int] = {}
    for request in waiting.values():
        counts[request.role] = counts.get(request.role, 0) + 1
    first = waiting[min(waiting)].role
    role = max(counts, key=lambda r: (counts[r], r == first))
    return sorted(k for k, request in waiting.items() if request.role == role)


def check_arguments(tool: Tool, arguments: dict) -> list[str]:
    """The call's schema violations: ``validate_arguments`` plus the declared ``format``s
    (jsonschema only annotates formats unless asked to check them). This is what the
    validation badge shows."""
    errors = validate_arguments(tool, arguments)
    if errors or not isinstance(arguments, dict):
        return errors
    checker = Draft202012Validator(tool.parameters, format_checker=Draft202012Validator.FORMAT_CHECKER)
    return [
        f"{'/'.join(str(p) for p in err.absolute_path) or 'arguments'}: {err.message}"
        for err in checker.iter_errors(arguments)
        if err.validator == "format"
    ]


def validation_error(call: ToolCall, tool: Tool | None, errors: list[str]) -> dict | None:
    """The rehearsal contract's error object (method doc §3) when the engine's own checks
    already decide the call: its tool is not in the whitelist (``TOOL_NOT_AVAILABLE``) or
    its arguments break the input schema (``INVALID_PARAMETERS``, one ``details.errors``
    entry per violation). None when the call passes: only then is the model asked.
    (A call whose format is broken never gets here: the parser ends the turn first.)"""
    if tool is None:
        return {
            "error_tool_call": {
                "code": "TOOL_NOT_AVAILABLE",
                "message": f"{call.name!r} is not in the candidate tool whitelist",
            }
        }
    if errors:
        noun = "violation" if len(errors) == 1 else "violations"
        return {
            "error_tool_call": {
                "code": "INVALID_PARAMETERS",
                "message": f"{call.name}: {len(errors)} input schema {noun}",
                "details": {"errors": list(errors)},
            }
        }
    return None


def _failure(code: str, message: str) -> dict:
    return {"error": {"code": code, "message": message}}


def _rehearsal_failed(value: Any) -> bool:
    err = value.get("error") if isinstance(value, dict) else None
    return isinstance(err, dict) and err.get("code") == "REHEARSAL_FAILED"


def run_episode(
    backend: Backend,
    task: Task,
    config: EpisodeConfig,
    environment: Environment | None = None,
    cancel: threading.Event | None = None,
) -> Trajectory:
    """Run to the end and return the record (no streaming)."""
    for event in Episode(backend, task, config, environment, cancel=cancel).run():
        if isinstance(event, EpisodeFinished):
            return event.trajectory
    raise AssertionError("the engine always ends with EpisodeFinished")
