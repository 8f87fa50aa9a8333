"""Commit and hold: what a committed call reads first, the hold of a call whose rehearsal
foresaw a failure, and the real call itself, supervised."""

from __future__ import annotations

import re
import threading
import time
from functools import partial
from typing import Any, Callable

from envace_demo.context import read_context
from envace_demo.facts import breaks_rule
from envace_demo.envs.base import Environment
from envace_demo.record import CallStep, ToolCall, Trajectory, call_steps, is_error, rehearsal_failed
from envace_demo.schemas import Tool
from envace_demo.supervise import supervise, wait
from envace_demo.writes import read_only, unrequested_write

# Executes one committed call for real: (tool, arguments) -> JSON response.
Executor = Callable[[Tool, dict], Any]


class Committer:
    """The real side of committed calls, against ``environment`` or through ``executor``."""

    def __init__(
        self,
        environment: Environment | None,
        executor: Executor | None,
        cancel: threading.Event,
        check: dict | None,
        hold_predicted_failures: bool,
        tool_seconds: float,
        shown: Callable[[str], str],
        hold_certainty: float | None = None,
    ):
        self.environment = environment
        self.executor = executor
        self.cancel = cancel
        self.check = check  # the task's check: says which requests are read-only
        self.hold_predicted_failures = hold_predicted_failures
        self.tool_seconds = tool_seconds
        self.shown = shown
        self.hold_certainty = hold_certainty

    def read_context(self, step: CallStep, tool: Tool | None) -> list[tuple[ToolCall, Any]]:
        """The real reads that show what ``step``'s call depends on (the environment names
        them), made before it is rehearsed; recorded on the step."""
        if self.environment is None or tool is None or not step.valid:
            return []
        try:
            reads = self.environment.context_reads(tool.original_name, step.call.arguments)
            pairs = read_context(reads, self.environment.execute)
        except Exception:  # noqa: BLE001 - a context is a help, never a reason to fail the run
            return []
        step.context = [{"call": c.to_dict(), "result": r} for c, r in pairs]
        return pairs

    def writes(self, tool: Tool | None) -> bool | None:
        """Whether ``tool`` changes state, as the environment declares; None: unknown."""
        if self.environment is None or tool is None:
            return None
        return self.environment.writes(tool.original_name)

    def additive(self, tool: Tool | None) -> bool:
        """Whether ``tool`` only adds to the state, as the environment declares (``Environment.additive``)."""
        return self.environment is not None and tool is not None and self.environment.additive(tool.original_name)

    def quoting(self, tool: Tool) -> tuple[str, ...]:
        """The arguments of ``tool`` that quote the user's words, as the environment declares them."""
        return () if self.environment is None else tuple(self.environment.quoting(tool.original_name))

    def hold(self, step: CallStep, held: set[str], tool: Tool | None = None, unasked: bool = False) -> bool:
        """Whether ``step`` is held: its rehearsal predicted a failure, surely enough
        (``hold_certainty``; at any certainty where nobody asked for the write, ``unasked``, or
        where the facts stated from real reads show a rule it breaks, ``CallStep.ruled``),
        the call may change state (a read's real result costs nothing and is what the answer
        needs), and the same call was not held before in this run."""
        if not self.hold_predicted_failures or not is_error(step.rehearsed) or rehearsal_failed(step.rehearsed):
            return False
        if self.writes(tool) is False:
            return False
        if contradicts_call(step.rehearsed, step.call):
            step.self_contradicted = True
            return False
        step.ruled = breaks_rule(step.stated_facts)
        sure = unasked or self.hold_certainty is None or step.certainty is None or step.ruled
        if not sure and step.certainty < self.hold_certainty:
            step.unsure = True
            return False
        key = step.call.key()
        if key in held:
            return False
        held.add(key)
        step.held = True
        return True

    def execute(self, step: CallStep, tool: Tool | None, deadline: float) -> None:
        """The real call (at most ``tool_seconds``, and never past ``deadline``), recorded on the step."""
        assert self.executor is not None
        started = time.monotonic()
        if tool is None:
            step.real = failure("TOOL_NOT_AVAILABLE", f"no tool named {step.call.name!r}")
        else:
            call = partial(self.executor, tool, step.call.arguments)
            step.real, step.error = real_call(call, self.cancel, deadline, self.tool_seconds, self.shown)
            self._mark_write(step, tool)
        step.execute_seconds = round(time.monotonic() - started, 3)

    def fetch(self, step: CallStep, tool: Tool | None, deadline: float) -> None:
        """An imagined run's read, made for real (``CallStep.fetched``)."""
        self.execute(step, tool, deadline)
        step.fetched = True

    def _mark_write(self, step: CallStep, tool: Tool) -> None:
        """Whether the real call went to a tool that writes, and whether the request asked
        for one (where the task's check says what it asks: a typed request has none)."""
        if self.environment is None:
            return
        step.write = self.environment.writes(tool.original_name)
        if self.check is not None:
            step.unrequested_write = unrequested_write(step.write, step.real, read_only(self.check))


def real_call(
    call: Callable[[], Any], cancel: threading.Event, deadline: float, tool_seconds: float, shown: Callable[[str], str]
) -> tuple[Any, str | None]:
    """(real response, step error). The call runs supervised: a tool that hangs costs at
    most ``tool_seconds`` (or what is left of the episode), and Stop works meanwhile."""
    done = wait(supervise(call, cancel=cancel, deadline=deadline, limit_s=tool_seconds, name="envace-execute"))
    if done.returned:
        return done.value, None
    if done.error is not None:  # a failing backend must not take the app down
        message = shown(str(done.error) or type(done.error).__name__)
        return failure("ENVIRONMENT_FAILURE", message), f"the environment failed: {message}"
    if done.stopped == "cancelled":
        return failure("CANCELLED", "stopped while the tool was running"), "stopped during the real call"
    if done.stopped == "time_limit":
        return failure("TIME_LIMIT", "the episode's time ran out during the call"), "time limit during the real call"
    message = f"no response within {tool_seconds:g} s"
    return failure("TOOL_TIMEOUT", message), f"the environment did not answer: {message}"


# "pass name=value" (or set, use) in an error message: what it asks the call to pass.
_ASKED = re.compile(r"\b(?:pass|set|use)\s+([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(true|false|-?[0-9]+(?:\.[0-9]+)?)\b",
                    re.IGNORECASE)


def asked(rehearsed: Any) -> list[tuple[str, Any, str]]:
    """What a foreseen failure's message asks the call to pass: (name, value, the rest of its
    clause: "to replace it")."""
    err = rehearsed.get("error") if isinstance(rehearsed, dict) else None
    message = err.get("message") if isinstance(err, dict) else None
    if not isinstance(message, str):
        return []
    out = []
    for m in _ASKED.finditer(message):
        raw = m.group(2)
        value = raw.lower() == "true" if raw.lower() in ("true", "false") else float(raw)
        out.append((m.group(1), value, re.split(r"[;.!?\n]", message[m.end():])[0]))
    return out


def contradicts_call(rehearsed: Any, call: ToolCall) -> bool:
    """Whether a foreseen failure's message asks for an argument value the call already
    passes: the embedded rehearser foresaw "ALREADY_EXISTS ... pass overwrite=true to replace
    it" for a write that passed overwrite true (0.97 sure), a prediction its own call answers."""
    for name, value, _ in asked(rehearsed):
        given = call.arguments.get(name)
        if isinstance(given, (bool, int, float)) and isinstance(given, bool) == isinstance(value, bool) and given == value:
            return True
    return False


def failure(code: str, message: str) -> dict:
    return {"error": {"code": code, "message": message}}


def known_reads(traj: Trajectory, limit: int = 8) -> list[tuple[ToolCall, Any]]:
    """The committed run's real (call, result) pairs made before its first write (they
    describe the state every fresh episode of the environment starts in), without repeats:
    few-shot for the same visitor's later episodes (``EpisodeConfig.known_results``)."""
    out: list[tuple[ToolCall, Any]] = []
    for step in call_steps(traj.turns):
        if step.write is not False:  # a write, or a tool whose writing is unknown: stop here
            break
        if step.real is None or step.error is not None or any(c == step.call for c, _ in out):
            continue
        out.append((step.call, step.real))
    return out[:limit]
