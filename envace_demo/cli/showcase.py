"""``showcase``: one recorded parallel-rehearsal run per example environment."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from envace_demo.cli import flags
from envace_demo.cli.episodes import _run_task
from envace_demo.engine import EpisodeConfig
from envace_demo.errors import TaskError
from envace_demo.settings import default_of
from envace_demo.tasks import env_tasks


def register(sub) -> None:
    p = flags.add_command(
        sub, "showcase", cmd_showcase, flags.MODEL,
        help="record one parallel-rehearsal run per example environment (the Playground shows them on opening)",
    )
    p.add_argument("--out", default="examples/showcase/", help="folder for the records (one <env>.json each)")
    p.add_argument("--env", action="append", help="only this example environment (repeatable; default: all)")
    p.add_argument(
        "--n", type=int, default=None,
        help="rehearsal budget N (default: fitted to the model's speed, as the Playground's slider is; "
        "steps, new tokens and the limit are fitted too)",
    )
    p.add_argument("--seed", type=int, default=default_of(flags.EpisodeFlags, "seed"))


RECORDING_SECONDS = 900.0


def cmd_showcase(args: argparse.Namespace) -> int:
    """Each example environment's first task (the Playground's default request), in
    parallel mode with the defaults fitted to this model on this machine, recorded."""
    from envace_demo.models.speed import fitted_settings, measure_speed
    from envace_demo import showcase
    from envace_demo.envs.registry import ENVIRONMENTS

    envs = args.env or list(ENVIRONMENTS)
    unknown = [e for e in envs if e not in ENVIRONMENTS]
    if unknown:
        raise TaskError(f"--env {unknown[0]}: no such example environment; choose from {', '.join(ENVIRONMENTS)}")
    settings = flags.settings_from(args)
    backend = flags.load_model(settings)
    settings, fitted, speed = fitted_settings(backend, settings)
    speed = speed or measure_speed(backend)  # recorded on the showcase either way
    # Parallel mode, the default sampling and the fitted N, as the Playground's Run has them.
    n = args.n if args.n is not None else (fitted.n if fitted is not None else default_of(EpisodeConfig, "n"))
    episode = flags.EpisodeFlags(mode="parallel", n=n, seed=args.seed)
    config = flags.episode_config(argparse.Namespace(**{**vars(args), **asdict(episode)}), settings, backend)
    # Nobody waits on a recording: a busy machine must not cut it short.
    config.episode_seconds = max(config.episode_seconds, RECORDING_SECONDS)
    budget = {"n": config.n, "max_steps": config.max_steps, "max_new_tokens": config.sampling.max_new_tokens,
              "episode_seconds": config.episode_seconds}
    print(f"{backend.info.model_id}: {speed.decode:.1f} tokens/s; {json.dumps(budget)}")
    for env in envs:
        task = env_tasks(env)[0]
        traj = _run_task(backend, task, config)
        path = showcase.save(
            showcase.Showcase(env, traj, showcase.COMMAND, budget=budget, speed=speed.to_dict()), Path(args.out)
        )
        print(f"{env}/{task.name}: ended {traj.ended}, success {traj.success}, {traj.seconds:.1f} s -> {path}")
    return 0

