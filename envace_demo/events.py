"""Typed events the episode engine yields as it goes; UIs only render them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from envace_demo.record import Rehearsal, Step, Trajectory

Where = Literal["rehearsal", "commit"]
Phase = Literal["acted", "rehearsed", "executed"]


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
class StepUpdated:
    """A step was acted, then rehearsed, then executed (the same object each time)."""

    where: Where
    rehearsal: int | None
    step: Step
    phase: Phase


@dataclass
class RehearsalFinished:
    rehearsal: Rehearsal


@dataclass
class MemoryReady:
    memory: dict


@dataclass
class EpisodeFinished:
    trajectory: Trajectory


Event = EpisodeStarted | Generating | StepUpdated | RehearsalFinished | MemoryReady | EpisodeFinished
