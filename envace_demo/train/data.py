"""Training task sets shipped with the package.

``data/bank_drills.jsonl``: 24 single-call tasks on the ``bank`` environment, six
families (balance, history, deposit, withdraw, freeze, transfer) of four tasks
each; per family three are for training and one, with other accounts or amounts,
is held out. Checks are the environment's state after the call, or the call
itself for read-only tools. The held-out tasks resemble the training ones on
purpose: at demo scale (a 135M model, minutes of CPU) that is what training can
be expected to move.
"""

from __future__ import annotations

from pathlib import Path

from envace_demo.errors import TaskError
from envace_demo.tasks import Task, load_task_file

DATA_DIR = Path(__file__).resolve().parent / "data"


def drill_file(env: str) -> Path | None:
    path = DATA_DIR / f"{env}_drills.jsonl"
    return path if path.is_file() else None


def drill_tasks(env: str) -> list[Task]:
    """The drill tasks of ``env`` (splits ``train`` and ``heldout``)."""
    path = drill_file(env)
    if path is None:
        available = sorted(p.name.removesuffix("_drills.jsonl") for p in DATA_DIR.glob("*_drills.jsonl"))
        raise TaskError(
            f"no drill tasks for environment {env!r}; available: {', '.join(available) or 'none'}"
        )
    return load_task_file(path)
