"""One supervised call: blocking work on a worker thread, watched by the engine's thread.

Generation and tool execution both run this way, so that Stop and the episode's time
limit work while a backend or a tool is busy, and one that hangs costs a bounded time.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Generator, Literal

# How often the engine's thread looks at the worker (and passes on streamed text).
POLL_S = 0.1

Reason = Literal["cancelled", "time_limit", "timeout"]


@dataclass
class Supervised:
    """How a supervised call ended: ``value`` when it returned, ``error`` when it raised,
    neither when it was given up on (``stopped`` then says why)."""

    value: Any = None
    error: BaseException | None = None
    returned: bool = False
    stopped: Reason | None = None  # the first limit that applied while it ran


def supervise(
    work: Callable[[], Any],
    *,
    cancel: threading.Event,
    deadline: float,
    limit_s: float | None = None,
    halt: threading.Event | None = None,
    grace_s: float = 0.0,
    name: str = "envace-call",
) -> Generator[None, None, Supervised]:
    """Run ``work()`` on a daemon thread; yield every ``POLL_S`` while it runs (the caller
    streams then) and return how it ended.

    When ``cancel`` is set, ``deadline`` (monotonic) passes or the call's own ``limit_s``
    runs out, ``halt`` is set (work that watches it stops early) and the call is given up
    on after ``grace_s``. A call given up on may still finish later on its thread."""
    box = Supervised()

    def run() -> None:
        try:
            box.value = work()
            box.returned = True
        except BaseException as err:  # surfaced in the caller's thread
            box.error = err

    worker = threading.Thread(target=run, name=name, daemon=True)
    worker.start()
    limit = time.monotonic() + limit_s if limit_s is not None else None
    halted_at: float | None = None
    while worker.is_alive():
        worker.join(POLL_S)
        if not worker.is_alive():
            break
        now = time.monotonic()
        if box.stopped is None:
            box.stopped = _limit_reached(cancel, deadline, limit, now)
        if box.stopped is not None:
            if halt is not None:
                halt.set()
            halted_at = halted_at or now
            if now - halted_at >= grace_s:
                break
        yield
    yield  # the caller passes on what the work reported last
    return box


def _limit_reached(cancel: threading.Event, deadline: float, limit: float | None, now: float) -> Reason | None:
    if cancel.is_set():
        return "cancelled"
    if now > deadline:
        return "time_limit"
    if limit is not None and now > limit:
        return "timeout"
    return None


def wait(call: Generator[None, None, Supervised]) -> Supervised:
    """Block until a supervised call ends (for callers with nothing to stream)."""
    while True:
        try:
            next(call)
        except StopIteration as done:
            return done.value
