"""Held-out evaluation: committed episodes against the real environment.

Each held-out task runs ``samples`` times without rehearsal (mode ``none``) and,
unless ``rehearsals`` is 0, with N rehearsals first (mode ``parallel``). Seeds
depend only on (task, sample), so the evaluation before training and the one
after it see the same random draws: the difference is the policy.
"""

from __future__ import annotations

import statistics
import threading
from collections.abc import Callable, Iterator

from envace_demo.engine import run_episode
from envace_demo.models.base import Backend, Sampling
from envace_demo.tasks import Task
from envace_demo.train.config import TrainConfig
from envace_demo.train.events import EvalResult
from envace_demo.train.rewards import score_episode
from envace_demo.train.rollout import episode_config


def eval_jobs(tasks: list[Task], config: TrainConfig) -> list[tuple[int, str, int]]:
    """(task index, mode, sample) for every episode of an evaluation."""
    modes = ["none"] + (["parallel"] if config.eval_rehearsals > 0 else [])
    return [(t, mode, s) for t in range(len(tasks)) for mode in modes for s in range(config.eval_samples)]


def run_jobs(
    backend: Backend,
    tasks: list[Task],
    jobs: list[tuple[int, str, int]],
    config: TrainConfig,
    cancel: threading.Event | None = None,
) -> Iterator[dict]:
    """Run the episodes of ``jobs``; yield one record each."""
    from envace_demo.envs.registry import create

    for t, mode, sample in jobs:
        task = tasks[t]
        seed = 7919 * (config.seed + 1) + 104729 * t + sample  # the same draws before and after
        card = Sampling()  # the model card's top-p and top-k
        rehearsals = max(1, config.eval_rehearsals)
        cfg = episode_config(config, rehearsals, seed, mode, config.eval_temperature, top_p=card.top_p, top_k=card.top_k)
        env = create(task.env) if task.env else None
        traj = run_episode(backend, task, cfg, environment=env, cancel=cancel)
        score = score_episode(task, traj.committed_calls(), traj.final_answer, traj.final_state)
        yield {
            "task": task.name,
            "mode": mode,
            "sample": sample,
            "success": bool(traj.success),
            "score": round(score.value, 4),
            "calls": [c.to_dict() for c in traj.committed_calls()],
            "ended": traj.ended,
            "reasons": traj.check_reasons,
        }


def summarize(tasks: int, samples: int, episodes: list[dict]) -> EvalResult:
    def mean(mode: str, key: str) -> float | None:
        values = [float(e[key]) for e in episodes if e["mode"] == mode]
        return round(statistics.fmean(values), 4) if values else None

    return EvalResult(
        tasks=tasks,
        samples=samples,
        success_without=mean("none", "success"),
        success_with=mean("parallel", "success"),
        score_without=mean("none", "score"),
        score_with=mean("parallel", "score"),
        episodes=sorted(episodes, key=lambda e: (e["task"], e["mode"], e["sample"])),
    )


def evaluate_policy(
    backend: Backend,
    tasks: list[Task],
    config: TrainConfig,
    cancel: threading.Event | None = None,
    on_episode: Callable[[int, int], None] | None = None,
) -> EvalResult:
    """Evaluate ``backend`` on ``tasks`` in one process (see the trainer for several)."""
    jobs = eval_jobs(tasks, config)
    episodes = []
    for done, record in enumerate(run_jobs(backend, tasks, jobs, config, cancel), 1):
        episodes.append(record)
        if on_episode:
            on_episode(done, len(jobs))
    return summarize(len(tasks), config.eval_samples, episodes)
