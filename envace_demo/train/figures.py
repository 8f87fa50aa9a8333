"""Held-out figures of one model from an ``eval --out DIR`` run (``results.jsonl``), per
mode: success, episodes that end with an answer, the model's own rehearsal fidelity,
real writes on tasks that ask only to read, and episode seconds.

    python -m envace_demo.train.figures DIR [DIR ...]

Fidelity counts the committed calls the model itself rehearsed (``rehearsal_text`` set)
and that ran for real; steps the engine wrote (``validation.decided_by``) are counted
apart. A task asks only to read when its check has no ``state`` condition; a write is a
real call that changed the environment's state (the final state differs from a fresh
environment's).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from envace_demo.envs.registry import create
from envace_demo.record import Trajectory, call_steps
from envace_demo.validation import decided_by

RESULTS = "results.jsonl"


def _mean(values: list[float]) -> float | None:
    return round(statistics.fmean(values), 3) if values else None


def read_only(check: dict | None) -> bool:
    return not (check or {}).get("state")


def figures(rows: list[dict], checks: dict[str, dict]) -> dict[str, dict]:
    """``rows``: results.jsonl records; ``checks``: task name -> its check."""
    by_mode: dict[str, list[dict]] = {}
    for row in rows:
        by_mode.setdefault(row["mode"], []).append(row)
    out = {}
    for mode, mine in sorted(by_mode.items()):
        success, answered, seconds, fidelity, decided, writes, reads = [], [], [], [], 0, 0, 0
        for row in mine:
            traj = Trajectory.from_dict(row["trajectory"])
            success.append(1.0 if traj.success else 0.0)
            answered.append(1.0 if traj.ended == "answer" else 0.0)
            seconds.append(traj.seconds)
            for step in call_steps(traj.turns):
                if decided_by(step) is not None:
                    decided += 1
                elif step.rehearsal_text is not None and step.fidelity is not None:
                    fidelity.append(step.fidelity)
            if read_only(checks.get(traj.task or "")) and traj.environment:
                reads += 1
                writes += traj.final_state != create(traj.environment).state()
        out[mode] = {
            "episodes": len(mine),
            "success": _mean(success),
            "answered": _mean(answered),
            "model_fidelity": _mean(fidelity),
            "model_rehearsed_steps": len(fidelity),
            "engine_written_steps": decided,
            "read_only_episodes": reads,
            "read_only_episodes_with_a_write": writes,
            "episode_seconds": _mean(seconds),
        }
    return out


def load(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (Path(run_dir) / RESULTS).read_text(encoding="utf-8").splitlines() if line]


def main(argv: list[str]) -> int:
    from envace_demo.tasks import env_tasks

    checks = {t.name: t.check for env in ("bank", "files", "library") for t in env_tasks(env)}
    for run_dir in argv:
        print(json.dumps({"run": run_dir, **figures(load(Path(run_dir)), checks)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
