"""The live view of an episode: what it has shown so far, built from its events alone."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from envace_demo.events import (
    EpisodeFinished,
    EpisodeStarted,
    Event,
    Generating,
    MemoryReady,
    RehearsalFinished,
    TurnUpdated,
    UserTurnStarted,
)
from envace_demo.record import Rehearsal, Trajectory, Turn, call_steps, rows
from envace_demo.ui.render.html import ended_text, seconds_text

LIVE_CHARS = 1200  # streaming text shown: the tail, enough to follow along


@dataclass
class LiveView:
    """What an episode has shown so far, built from its events alone.

    It does not rely on the engine mutating shared objects, so it works as well when
    the events were pickled across processes (ZeroGPU).
    """

    trajectory: Trajectory | None = None
    # (where, rehearsal index) -> latest streaming text.
    live: dict[tuple[str, int | None], Generating] = field(default_factory=dict)
    finished: bool = False
    started: float = 0.0  # time.monotonic() at EpisodeStarted
    user_turn: int = 0  # the user message being answered (UserTurnStarted)
    # A follow-up's conversation so far: shown from the start (its episode's first record
    # holds none of it where the events were pickled).
    before: Trajectory | None = None

    def apply(self, event: Event) -> None:
        if isinstance(event, EpisodeStarted):
            self.trajectory = event.trajectory
            self.started = time.monotonic()
            if self.before is not None and not self.trajectory.turns:
                earlier = Trajectory.from_dict(self.before.to_dict())
                self.trajectory.turns, self.trajectory.rehearsals = earlier.turns, earlier.rehearsals
                self.trajectory.answers = earlier.answers
        elif isinstance(event, UserTurnStarted):
            self.user_turn = event.index
        elif isinstance(event, EpisodeFinished):
            self.trajectory, self.finished = event.trajectory, True
            self.live.clear()
        elif self.trajectory is None:
            raise ValueError(f"{type(event).__name__} before EpisodeStarted")
        elif isinstance(event, Generating):
            target = None if event.where == "commit" else (event.rehearsal or 0)
            self.live[(event.where, target)] = event
        elif isinstance(event, TurnUpdated):
            turns = (
                self.trajectory.turns
                if event.where == "commit"
                else self._rehearsal(event.rehearsal or 0).turns
            )
            _place(turns, event.turn.index, event.turn)
            self.live.clear()
        elif isinstance(event, RehearsalFinished):
            _place(self.trajectory.rehearsals, event.rehearsal.index, event.rehearsal)
            self.live.clear()
        elif isinstance(event, MemoryReady):
            self.trajectory.memory = event.memory
            self.live.clear()

    def _rehearsal(self, index: int) -> Rehearsal:
        assert self.trajectory is not None
        while len(self.trajectory.rehearsals) <= index:
            self.trajectory.rehearsals.append(Rehearsal(index=len(self.trajectory.rehearsals)))
        return self.trajectory.rehearsals[index]

    def live_for(self, where: str, rehearsal: int | None) -> Generating | None:
        return self.live.get((where, rehearsal))

    def tokens(self) -> int:
        """New tokens of every finished generation so far (imagined and committed)."""
        traj = self.trajectory
        if traj is None:
            return 0
        return sum(t.tokens() for t in [*traj.turns, *(t for r in traj.rehearsals for t in r.turns)])

    def tokens_per_second(self, now: float | None = None) -> float | None:
        """Tokens generated per second of the episode so far; None before the first one."""
        elapsed = (time.monotonic() if now is None else now) - self.started
        tokens = self.tokens()
        return tokens / elapsed if tokens and elapsed > 0 else None


def _place(items: list, index: int, item: Any) -> None:
    if index < len(items):
        items[index] = item
    else:
        items.append(item)


def progress_text(view: LiveView, now: float | None = None) -> str:
    """One line saying what the episode is doing now, with its time and live speed."""
    traj = view.trajectory
    if traj is None:
        return "starting…"
    if view.finished:
        return f"finished: {ended_text(traj.ended)} in {seconds_text(traj.seconds)}"
    elapsed = (time.monotonic() if now is None else now) - view.started
    speed = view.tokens_per_second(now)
    clock = f" · {seconds_text(elapsed)}" + (f" · {speed:.1f} tokens/s" if speed is not None else "")
    return _doing(view, traj) + clock


def _doing(view: LiveView, traj: Trajectory) -> str:
    if view.live:
        (where, target), gen = next(iter(view.live.items()))
        who = "actor is choosing a call" if gen.role == "actor" else "rehearser is predicting the response"
        if where == "commit":
            return f"committed run, step {row_count(traj.turns) + (gen.role == 'actor')}: {who}…"
        many = f" (all {len(view.live)} at once)" if len(view.live) > 1 else ""
        k = (target or 0) % traj.n if traj.n else target or 0  # counted within the user message
        return f"rehearsal {k + 1} of {traj.n}{many}: {who}…"
    if traj.memory is not None or traj.mode == "none":
        return "committed run: executing…"
    return "rehearsing…"


def row_count(turns: list[Turn]) -> int:
    """The steps shown so far: one per call, and one per turn without calls."""
    return sum(1 for _ in rows(turns))


def pending_rehearsal(view: LiveView, name: str, arguments: dict) -> Any:
    """The rehearsed response of the committed call ``name(arguments)`` still waiting for
    its real one (the manual environment starts the typed response from it), or None."""
    traj = view.trajectory
    for step in reversed(call_steps(traj.turns) if traj else []):
        if step.real is None and step.call.name == name and step.call.arguments == arguments:
            return step.rehearsed
    return None


def showcase_view(traj: Trajectory) -> LiveView:
    """A finished record as a view, rendered like a run that just ended."""
    return LiveView(trajectory=traj, finished=True)
