"""Typed events a training run yields as it goes; the CLI and the UI only render them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal


@dataclass
class EvalResult:
    """Held-out success of one policy: without rehearsal and with N rehearsals."""

    tasks: int
    samples: int  # episodes per task and mode
    success_without: float | None  # fraction of episodes whose task check held (mode "none")
    success_with: float | None  # the same with rehearsal first (mode "parallel"); None if skipped
    score_without: float | None = None  # mean checklist score (partial credit)
    score_with: float | None = None
    episodes: list[dict] = field(default_factory=list)  # one per task x mode x sample

    def to_dict(self) -> dict:
        return {
            "tasks": self.tasks,
            "samples": self.samples,
            "success_without": self.success_without,
            "success_with": self.success_with,
            "score_without": self.score_without,
            "score_with": self.score_with,
            "episodes": self.episodes,
        }


@dataclass
class TrainResult:
    out_dir: Path
    adapter_dir: Path | None  # None if stopped before any step
    steps_done: int
    stopped: bool
    before: EvalResult | None
    after: EvalResult | None
    seconds: float

    def to_dict(self) -> dict:
        return {
            "out_dir": str(self.out_dir),
            "adapter_dir": str(self.adapter_dir) if self.adapter_dir else None,
            "steps_done": self.steps_done,
            "stopped": self.stopped,
            "before": self.before.to_dict() if self.before else None,
            "after": self.after.to_dict() if self.after else None,
            "seconds": round(self.seconds, 2),
        }


@dataclass
class TrainStarted:
    config: dict
    train_tasks: list[str]
    heldout_tasks: list[str]
    total_steps: int


@dataclass
class Progress:
    """Fine-grained progress for a progress bar: ``done`` of ``total`` in ``stage``."""

    stage: Literal["eval_before", "rollout", "update", "eval_after", "save"]
    done: int
    total: int
    step: int  # the training step (0 during the first evaluation)


@dataclass
class Evaluated:
    phase: Literal["before", "after"]
    result: EvalResult


@dataclass
class StepFinished:
    step: int  # 1-based
    total: int
    metrics: dict  # the row written to metrics.jsonl
    groups: list = field(
        default_factory=list
    )  # this process's rollout.Group records: trajectories, rows, scores


@dataclass
class TrainFinished:
    result: TrainResult


TrainEvent = TrainStarted | Progress | Evaluated | StepFinished | TrainFinished
