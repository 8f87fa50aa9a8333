"""Driving trajectories: one on its own, or several in lockstep over one batcher.

A trajectory is a generator: it yields events (passed on as they come) and ``Request``s
(a generation it waits for), is sent each request's ``Generation`` and returns its
``Outcome``. The batcher turns a list of requests into one backend call; the scheduler
decides which waiting requests go together. ``Stop`` ends the episode early: every
trajectory still running is told (so the step it was on can say why it has no
response), then closed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generator, Iterable

from envace_demo.models.base import Constraint, Generation, Prompt


class Stop(Exception):
    """Ends the episode early; ``reason`` goes into the record's ``ended``."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class Outcome:
    """How one trajectory ended: its answer (if any) and why it ended."""

    final_answer: str | None
    ended: str


@dataclass
class Request:
    """A generation a trajectory waits for. ``prompt`` is opaque here: the backend reads it."""

    prompt: Prompt
    constraint: Constraint | None
    role: str  # "actor" or "rehearser": requests of one role are batched together
    where: str
    rindex: int | None
    # Past this (monotonic), the generation is cut and returned as such (finish_reason
    # "cut"); the episode goes on. None: only the episode's and the phase's limits apply.
    deadline: float | None = None
    # The lead imagined run's k-th action: drawn with the seed the committed actor's k-th
    # action will have (``generation.BatchGenerator``), so the committed run may take it.
    aligned: int | None = None
    # Drawn at this temperature instead of the episode's (a search for calls it rarely makes).
    temperature: float | None = None


Run = Generator[Any, "Generation | None", Outcome]
# One backend call for the requests: streams events, returns one Generation per request.
Batcher = Callable[[list[Request]], Generator[Any, None, list[Generation]]]
# Called when trajectory k ends (or is stopped): the events that report it.
OnEnd = Callable[[int, Outcome], Iterable[Any]]


def drive(run: Run, batch: Batcher) -> Generator[Any, None, Outcome]:
    """Run one trajectory on its own: each generation it waits for is one backend call."""
    reply: Generation | None = None
    try:
        while True:
            try:
                item = run.send(reply)
            except StopIteration as done:
                return done.value
            reply = None
            if isinstance(item, Request):
                try:
                    (reply,) = yield from batch([item])
                except Stop as stop:
                    yield from unwind(run, stop)
                    raise
            else:
                yield item
    finally:
        run.close()


def lockstep(runs: dict[int, Run], batch: Batcher, on_end: OnEnd) -> Generator[Any, None, None]:
    """Advance the trajectories together: each runs until it waits for a generation, then
    the waiting requests of one role go to ``batch`` as one call (one prompt of one role
    is one shape of work, which a backend decodes together). N trajectories then cost
    about one, as long as batching is cheap. On ``Stop`` every trajectory still running is unwound and
    ended with the stop's reason, then the stop goes on."""
    runs = dict(runs)
    waiting: dict[int, Request] = {}
    try:
        for k in list(runs):
            yield from _advance(k, runs, waiting, None, on_end)
        while waiting:
            keys = next_batch(waiting)
            replies = yield from batch([waiting.pop(k) for k in keys])
            for k, gen in zip(keys, replies):
                yield from _advance(k, runs, waiting, gen, on_end)
    except Stop as stop:
        for k, run in runs.items():  # the ones still running end with the episode
            yield from unwind(run, stop)
            yield from on_end(k, Outcome(None, stop.reason))
        raise


def _advance(
    k: int, runs: dict[int, Run], waiting: dict[int, Request], reply: Generation | None, on_end: OnEnd
) -> Generator[Any, None, None]:
    """Run trajectory ``k`` (sent ``reply``) until it waits for a generation or ends."""
    run = runs[k]
    while True:
        try:
            item = run.send(reply)
        except StopIteration as done:
            del runs[k]
            yield from on_end(k, done.value)
            return
        reply = None
        if isinstance(item, Request):
            waiting[k] = item
            return
        yield item


def unwind(run: Run, stop: Stop) -> Generator[Any, None, None]:
    """Tell a waiting trajectory that the episode stopped, so that the step it was on can
    record why it has no response; pass on what it reports, then close it."""
    try:
        item = run.throw(stop)
        while not isinstance(item, Request):
            yield item
            item = run.send(None)
    except (Stop, StopIteration):
        pass
    finally:
        run.close()


def next_batch(waiting: dict[int, Request]) -> list[int]:
    """The trajectories to serve next: those waiting for the role most of them wait for
    (ties: the role of the lowest index). Serving the larger group first lets the rest
    catch up, so the groups keep merging back into full batches."""
    counts: dict[str, int] = {}
    for request in waiting.values():
        counts[request.role] = counts.get(request.role, 0) + 1
    first = waiting[min(waiting)].role
    role = max(counts, key=lambda r: (counts[r], r == first))
    return sorted(k for k, request in waiting.items() if request.role == role)
