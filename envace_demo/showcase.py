"""Recorded showcases: one full parallel-rehearsal run per example environment.

The Playground shows the showcase of the chosen example as soon as the page opens,
before anything runs, so a visitor sees world rehearsal at work at once. Each record
is made by this engine (``python -m envace_demo showcase``) and names the model that
made it; on a GPU machine the same command records the 8B model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envace_demo.errors import TaskError
from envace_demo.record import Trajectory, TrajectoryError, load_trajectory
from envace_demo.settings import PROJECT_ROOT

FOLDER = PROJECT_ROOT / "examples" / "showcase"
COMMAND = "python -m envace_demo showcase --out examples/showcase/"
FORMAT = 1


@dataclass
class Showcase:
    """A recorded episode and how it was made."""

    env: str
    trajectory: Trajectory
    command: str  # the command that made it
    budget: dict | None = None  # the defaults it ran with (budget.Budget.to_dict())
    speed: dict | None = None  # the model's measured speed on the recording machine

    @property
    def model(self) -> str:
        return str(self.trajectory.model.get("model_id", "unknown model"))

    def to_dict(self) -> dict:
        return {
            "format": FORMAT,
            "env": self.env,
            "model": self.model,
            "command": self.command,
            "budget": self.budget,
            "speed": self.speed,
            "trajectory": _portable(self.trajectory.to_dict()),
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "showcase") -> "Showcase":
        if not isinstance(data, dict) or data.get("format") != FORMAT or "trajectory" not in data:
            raise TaskError(f"{where}: not a showcase record of format {FORMAT}; record it again with: {COMMAND}")
        try:
            trajectory = load_trajectory(data["trajectory"])
        except TrajectoryError as err:
            raise TaskError(f"{where}: its trajectory is invalid ({err}); record it again with: {COMMAND}") from None
        return cls(
            env=str(data.get("env", "")),
            trajectory=trajectory,
            command=str(data.get("command", COMMAND)),
            budget=data.get("budget"),
            speed=data.get("speed"),
        )


def _portable(trajectory: dict) -> dict:
    """``trajectory`` with the model's folders inside the project written relative to it: a
    record kept in the repository names no place on the machine that made it."""
    model = dict(trajectory.get("model") or {})
    for key in ("adapter", "rehearser_adapter"):
        value = model.get(key)
        if isinstance(value, str) and Path(value).is_absolute() and Path(value).is_relative_to(PROJECT_ROOT):
            model[key] = Path(value).relative_to(PROJECT_ROOT).as_posix()
    return {**trajectory, "model": model}


def path_for(env: str, folder: Path = FOLDER) -> Path:
    return Path(folder) / f"{env}.json"


def save(showcase: Showcase, folder: Path) -> Path:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = path_for(showcase.env, folder)
    path.write_text(json.dumps(showcase.to_dict(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def load(env: str, folder: Path = FOLDER) -> Showcase | None:
    """The showcase of ``env``; None when none was recorded, TaskError when it is broken."""
    path = path_for(env, folder)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as err:
        raise TaskError(f"{path.name}: cannot read ({err.strerror})") from None
    try:
        data = json.loads(text)
    except ValueError as err:
        raise TaskError(f"{path.name}: not JSON ({err}); record it again with: {COMMAND}") from None
    return Showcase.from_dict(data, path.name)
