"""grpo_step_s: one role-wise GRPO LoRA step with group 4 (rollouts + scoring + update).

Runs the project's own ``Trainer`` on the bank tasks with no held-out evaluation;
the first step pays one-off costs (grammar compilation, optimizer state), so the
figure is the median of the steps after it.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path


def grpo_step_seconds(backend, steps: int = 3, group_size: int = 4) -> dict:
    from envace_demo.tasks import env_tasks
    from envace_demo.train.config import TrainConfig
    from envace_demo.train.events import StepFinished
    from envace_demo.train.trainer import Trainer

    config = TrainConfig(steps=steps, group_size=group_size, prompts_per_step=1, eval_rehearsals=0,
                         constrained=backend.supports_constraints)
    seconds, rollout = [], []
    with tempfile.TemporaryDirectory(prefix="envace-bench-grpo-") as out:
        trainer = Trainer(backend, env_tasks("bank"), [], config, Path(out), copy_model=True)
        for event in trainer.run():
            if isinstance(event, StepFinished):
                seconds.append(event.metrics["seconds"])
                rollout.append(event.metrics.get("rollout_seconds"))
    later = seconds[1:] or seconds
    return {
        "seconds": statistics.median(later),
        "per_step": seconds,
        "rollout_seconds": rollout,
        "group_size": group_size,
        "max_new_tokens": config.max_new_tokens,
        "max_turns": config.max_turns,
    }
