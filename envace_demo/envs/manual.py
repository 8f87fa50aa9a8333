"""The manual environment: a person types each tool's real response.

For schemas with nothing behind them: the agent still commits, and the response
it gets is whatever the user types (in the UI, through the API, or on the
command line), so the step has a rehearsed and a real response like any other.

``execute`` runs in the engine's thread and blocks until :meth:`respond` is
called from another thread (a UI event, an API request), or from the
``on_request`` callback in the same thread (the CLI reads stdin there). It waits
at most ``timeout`` seconds and stops waiting when ``cancel`` is set or
:meth:`abort` is called; both raise, which the engine records as an
``environment_error`` step.
"""

from __future__ import annotations

import copy
import json
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from envace_demo.envs.base import Environment
from envace_demo.errors import EnvaceError
from envace_demo.schemas import Tool

DEFAULT_TIMEOUT = 600.0
_POLL_S = 0.1


class ResponseError(EnvaceError):
    """A typed response cannot be used (not JSON, or no call is waiting)."""


class ManualAbort(EnvaceError):
    """Nobody answered: the wait timed out, was cancelled or aborted."""


@dataclass(frozen=True)
class PendingCall:
    """A committed call waiting for its real response."""

    id: int
    name: str
    arguments: dict

    def to_dict(self) -> dict:
        return {"id": self.id, "name": self.name, "arguments": copy.deepcopy(self.arguments)}


def parse_response(text: str) -> Any:
    """A typed response: JSON text; a bare scalar becomes ``{"result": value}``
    (tool responses are objects or arrays)."""
    try:
        value = json.loads(text)
    except ValueError as err:
        raise ResponseError(f"response: not valid JSON ({err})") from None
    return value if isinstance(value, (dict, list)) else {"result": value}


class ManualEnvironment(Environment):
    """``tools``: the schemas the agent may call. ``on_request(call)``: told when a
    call starts waiting (it may answer at once with :meth:`respond`)."""

    name = "manual"
    description = "You type the real response of each tool call"

    def __init__(
        self,
        tools: list[Tool],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        on_request: Callable[[PendingCall], None] | None = None,
        cancel: threading.Event | None = None,
    ):
        self._tools = list(tools)
        self.timeout = timeout
        self.on_request = on_request
        self.cancel = cancel or threading.Event()
        self._lock = threading.Lock()
        self._pending: PendingCall | None = None
        self._answers: queue.Queue = queue.Queue()
        self._next_id = 1
        self._log: list[dict] = []

    # ---- Environment --------------------------------------------------------------------

    def tools(self) -> list[Tool]:
        return list(self._tools)

    def execute(self, name: str, arguments: dict[str, Any]) -> Any:
        with self._lock:
            call = PendingCall(self._next_id, name, copy.deepcopy(arguments))
            self._next_id += 1
            self._answers = queue.Queue()  # a stale answer to an earlier call must not leak in
            self._pending = call
        try:
            if self.on_request is not None:
                self.on_request(call)
            response = self._wait(call)
        finally:
            with self._lock:
                self._pending = None
        self._log.append({"name": name, "arguments": copy.deepcopy(arguments), "response": copy.deepcopy(response)})
        return response

    def reset(self) -> None:
        self.abort("the environment was reset")
        self._log = []

    def state(self) -> dict[str, Any]:
        """The calls answered so far, with what was typed."""
        return {"calls": copy.deepcopy(self._log)}

    # ---- the other side: whoever types ----------------------------------------------------

    def pending(self) -> PendingCall | None:
        """The call waiting for a response, if any."""
        return self._pending

    def respond(self, response: Any, call_id: int | None = None) -> None:
        """Answer the waiting call. ``response``: JSON text (see :func:`parse_response`)
        or a JSON value. ``call_id``: when given, must be the waiting call's id, so a
        late answer cannot land on the next call."""
        value = parse_response(response) if isinstance(response, str) else response
        try:
            json.dumps(value)
        except (TypeError, ValueError) as err:
            raise ResponseError(f"response: not JSON-serializable ({err})") from None
        with self._lock:
            call = self._pending
            if call is None:
                raise ResponseError("no tool call is waiting for a response")
            if call_id is not None and call_id != call.id:
                raise ResponseError(f"call {call_id} is no longer waiting (call {call.id} is)")
            self._answers.put(("answer", value))

    def abort(self, reason: str = "aborted") -> None:
        """Stop the wait of the pending call, if any; the episode ends with an error step."""
        with self._lock:
            if self._pending is not None:
                self._answers.put(("abort", reason))

    # ---- internals --------------------------------------------------------------------------

    def _wait(self, call: PendingCall) -> Any:
        deadline = time.monotonic() + self.timeout
        answers = self._answers
        while True:
            if self.cancel.is_set():
                raise ManualAbort(f"{call.name}: cancelled while waiting for its response")
            left = deadline - time.monotonic()
            if left <= 0:
                raise ManualAbort(f"{call.name}: no response within {self.timeout:g} s")
            try:
                kind, value = answers.get(timeout=min(_POLL_S, left))
            except queue.Empty:
                continue
            if kind == "abort":
                raise ManualAbort(f"{call.name}: {value}")
            return value
