"""The engine's batcher: one backend call for a batch of requests, supervised and streamed.

Three limits end a call early: Stop and the episode's deadline end the episode; a phase's
cutoff (the rehearsals' share of the time) ends that phase, as a ``Stop`` of its own reason
that the engine catches and goes on from; a request's own deadline (a committed call's
rehearsal, which must leave time for the real call) ends only that generation, returned cut.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Generator

from envace_demo.events import Event, Generating
from envace_demo.facts import stated_tokens
from envace_demo.models.base import Backend, Generation, Sampling
from envace_demo.scheduler import Request, Stop
from envace_demo.supervise import Supervised, supervise


# A generation ended by its request's own deadline: nothing of it is kept.
CUT = "cut"


@dataclass(frozen=True)
class Cutoff:
    """A phase's end inside the episode: past ``at`` (monotonic), a call raises ``Stop(reason)``."""

    at: float
    reason: str


class BatchGenerator:
    """Sends requests to ``backend.generate_many``, one row each, and passes on the text
    as it streams. Stop (``cancel``) and the episode's ``deadline`` end the call: the
    backend is told through its cancel switch and abandoned ``grace_s`` later if it
    ignores it. Every failure is a ``Stop`` whose reason goes into the record."""

    def __init__(
        self,
        backend: Backend,
        sampling: Sampling,
        cancel: threading.Event,
        deadline: float,
        grace_s: float,
        shown: Callable[[str], str],
    ):
        self.backend = backend
        self.sampling = sampling
        self.cancel = cancel
        self.deadline = deadline
        self.grace_s = grace_s
        self.shown = shown
        self.halt = threading.Event()  # tells the backend to stop generating (one per call)
        self.cutoff: Cutoff | None = None  # the running phase's end, where it has one
        self._seed_offsets: dict[tuple[str, str], int] = {}

    def __call__(self, requests: list[Request]) -> Generator[Event, None, list[Generation]]:
        self.check_limits()
        own = min((r.deadline for r in requests if r.deadline is not None), default=None)
        if own is not None and time.monotonic() > own:
            return [_cut(0.0) for _ in requests]
        sampling = self._next_sampling(requests)
        stated = max((stated_tokens(r.constraint.think_lead) for r in requests if r.constraint), default=0)
        if stated:  # facts the engine states are not the rehearser's budget (facts.py)
            sampling = replace(sampling, max_new_tokens=sampling.max_new_tokens + stated)
        asked, index = self._distinct(requests)
        updates: queue.Queue = queue.Queue()
        halt = self.halt = threading.Event()  # a call halted by a cutoff leaves the next one free to run
        started = time.monotonic()
        call = supervise(
            lambda: self.backend.generate_many(
                [r.prompt for r in asked],
                sampling,
                [r.constraint for r in asked],
                on_token=lambda row, text: updates.put((row, text)),
                cancel=halt,
            ),
            cancel=self.cancel,
            deadline=min(t for t in (self.deadline, own, self.cutoff and self.cutoff.at) if t is not None),
            halt=halt,
            grace_s=self.grace_s,
            name="envace-generate",
        )
        done: Supervised = yield from _streamed(call, updates, requests, index)
        if done.error is not None:
            raise Stop(f"model_error: {self.shown(str(done.error))}") from done.error
        self.check_limits()
        halted = not done.returned or any(g.finish_reason == "cancelled" for g in done.value)
        if halted:  # given up on after the grace, or stopped through the halt switch
            if own is not None and time.monotonic() > own:  # only this generation's own time ran out
                return [_cut(time.monotonic() - started) for _ in requests]
            raise Stop("cancelled" if self.cancel.is_set() else "time_limit")
        gens: list[Generation] = done.value
        if len(gens) != len(asked):
            raise Stop(f"model_error: the backend returned {len(gens)} generations for {len(asked)} requests")
        return [replace(gens[k]) for k in index]

    def _distinct(self, requests: list[Request]) -> tuple[list[Request], list[int]]:
        """The requests to send, and for each request the position of its generation among
        them: a greedy rehearser asked the same question twice (two imagined runs that made
        the same call from the same state) would answer the same twice, so it is asked once."""
        if self.sampling.for_role("rehearser").temperature != 0:
            return requests, list(range(len(requests)))
        asked: list[Request] = []
        seen: dict[tuple, int] = {}
        index = []
        for r in requests:
            key = (r.prompt.shown(), repr(r.constraint)) if r.role == "rehearser" else None
            if key is None or key not in seen:
                if key is not None:
                    seen[key] = len(asked)
                index.append(len(asked))
                asked.append(r)
            else:
                index.append(seen[key])
        return asked, index

    def check_limits(self) -> None:
        """Stop when the episode is cancelled or out of time, or the running phase is."""
        if self.cancel.is_set():
            raise Stop("cancelled")
        now = time.monotonic()
        if now > self.deadline:
            raise Stop("time_limit")
        if self.cutoff is not None and now > self.cutoff.at:
            raise Stop(self.cutoff.reason)

    def _next_sampling(self, requests: list[Request]) -> Sampling:
        """Distinct yet reproducible seeds for each generation, in one stream per phase and
        role: the committed actor's k-th generation has the seed it has in an episode
        without rehearsal, whatever the rehearsals drew before it, so a committed run that
        reads nothing from them acts as that episode does, token for token."""
        s = self.sampling
        if requests and requests[0].temperature is not None:
            s = replace(s, temperature=requests[0].temperature)
        if s.seed is None:
            return s
        if requests and requests[0].aligned is not None:  # row 0: the committed actor's k-th seed, not drawn
            return replace(s, seed=s.seed + self._seed_offsets.get(COMMITTED_ACTOR, 0) + requests[0].aligned)
        phase = "commit" if all(r.where == "commit" for r in requests) else "rehearsal"
        stream = (phase, requests[0].role if requests else "actor")
        offset = self._seed_offsets.get(stream, 0)
        self._seed_offsets[stream] = offset + 1
        return replace(s, seed=s.seed + SEED_STREAMS.get(stream, 0) + offset)

    def redraw_committed_seed(self) -> None:
        """The committed actor's last generation is drawn again: with the seed it had."""
        self._seed_offsets[COMMITTED_ACTOR] = max(0, self._seed_offsets.get(COMMITTED_ACTOR, 0) - 1)

    def skip_committed_seed(self) -> None:
        """The committed actor took an aligned imagined action as its own: its seed is spent."""
        self._seed_offsets[COMMITTED_ACTOR] = self._seed_offsets.get(COMMITTED_ACTOR, 0) + 1


# Where each stream's seeds start, past the base seed; the committed actor's at the base, as
# in an episode without rehearsal. Far apart: no two streams meet within an episode.
COMMITTED_ACTOR = ("commit", "actor")
SEED_STREAMS = {COMMITTED_ACTOR: 0, ("commit", "rehearser"): 10_007, ("rehearsal", "actor"): 20_011,
                ("rehearsal", "rehearser"): 30_011}


def _cut(seconds: float) -> Generation:
    return Generation("", 0, 0, seconds, CUT)  # type: ignore[arg-type]


def _streamed(
    call: Generator, updates: queue.Queue, requests: list[Request], index: list[int]
) -> Generator[Event, None, Any]:
    """Pass on a supervised generation's latest text of each row at every poll, to every
    request that row answers (``index``: request -> row)."""
    while True:
        try:
            next(call)
        except StopIteration as done:
            return done.value
        latest: dict[int, str] = {}
        while not updates.empty():
            row, text = updates.get_nowait()
            latest[row] = text
        for row, text in latest.items():
            for r in (r for r, k in zip(requests, index) if k == row):
                yield Generating(r.role, r.where, r.rindex, text)  # type: ignore[arg-type]
