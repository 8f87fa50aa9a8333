"""Typed events the episode engine yields as it goes; UIs only render them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from envace_demo.record import Rehearsal, Trajectory, Turn

Where = Literal["rehearsal", "commit", "repair"]
Phase = Literal["acted", "rehearsed", "held", "executed"]


@dataclass
class EpisodeStarted:
    trajectory: Trajectory  # tools, mode and model filled in; nothing run yet


@dataclass
class Generating:
    """Text streaming out of the model (the latest text of one generation)."""

    role: Literal["actor", "rehearser"]
    where: Where
    rehearsal: int | None  # index of the imagined trajectory, None in the committed run
    text: str


@dataclass
class TurnUpdated:
    """A turn was acted, then each of its calls rehearsed, then executed (the same turn
    object each time, its calls so far included)."""

    where: Where
    rehearsal: int | None
    turn: Turn
    call: int | None  # the position in ``turn.calls`` of the call this is about; None: the turn itself
    phase: Phase


@dataclass
class UserTurnStarted:
    """The user's next message in a conversation: what follows answers it."""

    index: int  # its position among the user turns (the first is 0, never announced)
    text: str


@dataclass
class RehearsalFinished:
    rehearsal: Rehearsal


@dataclass
class MemoryReady:
    memory: dict


@dataclass
class EpisodeFinished:
    trajectory: Trajectory


Event = (
    EpisodeStarted | Generating | TurnUpdated | UserTurnStarted | RehearsalFinished | MemoryReady | EpisodeFinished
)
