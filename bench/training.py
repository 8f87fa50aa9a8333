"""grpo_step_s: one role-wise GRPO LoRA step with group 4 (rollouts + scoring + update).

Runs the project's own ``Trainer`` on the bank tasks with no held-out evaluation;
the first step pays one-off costs (grammar compilation, optimizer state), so the
figure is the median of the steps after it. On CPU the step is the one the app's
Fine-tune tab runs there (``TrainConfig.cpu_recipe()``: LoRA on the last 4 layers,
64 new tokens); elsewhere the default configuration.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path


def step_config(backend, steps: int, group_size: int = 4):
    from envace_demo.train.config import TrainConfig

    return TrainConfig.for_device(
        backend.info.device, steps=steps, group_size=group_size, prompts_per_step=1, eval_rehearsals=0
    ).fitted_to(backend)


def grpo_step_seconds(backend, steps: int = 3, group_size: int = 4) -> dict:
    from envace_demo.tasks import env_tasks
    from envace_demo.train.events import StepFinished
    from envace_demo.train.trainer import Trainer

    config = step_config(backend, steps, group_size)
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
        "lora_layers": config.lora_layers,
        "update_seconds": [round(s - r, 2) for s, r in zip(seconds, rollout) if r is not None],
    }
