"""World rehearsal as a user meets it: the embedded model over the example environments.

Every task of the three example environments (``--quick``: a subset), each seed, run twice
with the default Playground settings: once with parallel rehearsal (the Playground's
default mode) and once without. From the records:

- ``cpu_episode_p50_s`` / ``cpu_episode_p95_s``: wall-clock seconds of the parallel episodes.
- ``parallel_none_episode_ratio``: the median parallel episode's seconds over the median
  episode's without rehearsal, same tasks and seeds, one run.
- ``rehearsal_valid_rate``: of the responses the model rehearsed, the share that is one
  ``<execution_result>`` holding a value of the tool's declared response shape. Errors the
  engine wrote itself are counted apart: ``decided_by_validation`` (a call that failed
  validation) and ``repeated_failures`` (a call that already failed for real, with nothing
  succeeding since: the engine says the same failure, ``validation.repeated_failure``).
- ``mean_fidelity``: the mean fidelity of the committed steps of the parallel episodes
  (details: ``mean_fidelity_model``, the same over the steps the model rehearsed).
- ``placeholder_copies``: call arguments or model-rehearsed values that hold placeholder
  text of the prompt they were generated from (``prompts.find_placeholders``), both modes.
- ``success_none`` / ``success_parallel``: the share of episodes whose task check passed.
- ``unrequested_writes``: committed calls of a state-changing tool on a read-only task
  (one whose check inspects no state), parallel episodes.

The arithmetic (``episode_stats``, ``aggregate``, ``percentile``) is pure and tested;
``run`` drives the model.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from jsonschema import Draft202012Validator

from envace_demo.calls import parse_execution_result
from envace_demo.models.grammar import domain_error_schema
from envace_demo.prompts import copies_placeholder, find_placeholders
from envace_demo.record import CallStep, Trajectory, Turn, call_steps
from envace_demo.validation import decided_by
from envace_demo.writes import read_only, unrequested_write

ENVIRONMENTS = ("bank", "files", "library")
SEEDS = (0, 1, 2)
# --quick: one state-changing task per environment (the ones rehearsal is for), one seed.
QUICK_TASKS = {
    "bank": ("deposit-cash",),
    "files": ("create-shopping-list",),
    "library": ("hold-by-id",),
}
QUICK_SEEDS = (0,)


def percentile(values: list[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100) by linear interpolation between order statistics
    (numpy's default); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _turns(traj: Trajectory) -> Iterable[Turn]:
    for rehearsal in traj.rehearsals:
        yield from rehearsal.turns
    yield from traj.turns


def rehearsal_valid(step: CallStep, response_schema: dict | None) -> bool:
    """Whether the model's rehearsal of ``step`` is one ``<execution_result>`` whose value fits
    the declared response (when none is declared: any non-empty object or array), or is a
    tool's domain failure (``{"error": {"code", "message"}}``: tools fail, and the engine
    lets the model say again a failure it saw for real)."""
    value, problem = parse_execution_result(step.rehearsal_text or "")
    if problem:
        return False
    if response_schema is None or Draft202012Validator(response_schema).is_valid(value):
        return True
    return Draft202012Validator(domain_error_schema()).is_valid(value)


@dataclass
class EpisodeStats:
    """What one episode adds to the keys."""

    seconds: float
    success: bool | None
    rehearsed: int = 0  # responses the model rehearsed
    rehearsed_valid: int = 0
    decided: int = 0  # call-level errors written by the engine's validation
    repeated: int = 0  # real failures the engine said again (validation.repeated_failure)
    fidelities: list[float] = field(default_factory=list)  # committed steps
    model_fidelities: list[float] = field(default_factory=list)  # those the model rehearsed
    placeholder_copies: list[str] = field(default_factory=list)
    unrequested_writes: list[str] = field(default_factory=list)


def episode_stats(traj: Trajectory, responses: dict[str, dict | None], writes: frozenset[str],
                  is_read_only: bool) -> EpisodeStats:
    """``responses``: tool name -> declared response schema; ``writes``: the names of the
    tools that change state."""
    stats = EpisodeStats(seconds=traj.seconds, success=traj.success)
    for turn, step in ((t, c) for t in _turns(traj) for c in t.calls):
        placeholders: set[str] = set()
        for prompt in (turn.actor_prompt, step.rehearser_prompt):
            placeholders |= find_placeholders(prompt or "")
        stats.placeholder_copies += copies_placeholder(step.call.arguments, placeholders)
        if step.rehearsal_text is not None:  # the model rehearsed it
            stats.rehearsed += 1
            stats.rehearsed_valid += rehearsal_valid(step, responses.get(step.call.name))
            stats.placeholder_copies += copies_placeholder(step.rehearsed, placeholders)
        else:
            writer = decided_by(step)
            stats.decided += writer == "validation"
            stats.repeated += writer == "repeated_failure"
    for step in call_steps(traj.turns):  # committed
        if step.fidelity is not None:
            stats.fidelities.append(step.fidelity)
            if step.rehearsal_text is not None:
                stats.model_fidelities.append(step.fidelity)
        if unrequested_write(step.call.name in writes, step.real, is_read_only):
            stats.unrequested_writes.append(step.call.name)
    return stats


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def _success_rate(stats: list[EpisodeStats]) -> float | None:
    judged = [s.success for s in stats if s.success is not None]
    return _rate(sum(judged), len(judged))


def aggregate(parallel: list[EpisodeStats], none: list[EpisodeStats]) -> tuple[dict, dict]:
    """(figures, details) of the keys from the episodes of each mode."""
    seconds = [s.seconds for s in parallel]
    rehearsed = sum(s.rehearsed for s in parallel + none)
    fidelities = [f for s in parallel for f in s.fidelities]
    model_fidelities = [f for s in parallel for f in s.model_fidelities]
    p50, p95 = percentile(seconds, 50), percentile(seconds, 95)
    none_p50 = percentile([s.seconds for s in none], 50)
    figures = {
        "cpu_episode_p50_s": None if p50 is None else round(p50, 1),
        "cpu_episode_p95_s": None if p95 is None else round(p95, 1),
        # What rehearsal costs: the median parallel episode over the median one without.
        "parallel_none_episode_ratio": round(p50 / none_p50, 2) if p50 is not None and none_p50 else None,
        "rehearsal_valid_rate": _rate(sum(s.rehearsed_valid for s in parallel + none), rehearsed),
        "mean_fidelity": _mean(fidelities),
        "placeholder_copies": sum(len(s.placeholder_copies) for s in parallel + none),
        "success_none": _success_rate(none),
        "success_parallel": _success_rate(parallel),
        "unrequested_writes": sum(len(s.unrequested_writes) for s in parallel),
    }
    details = {
        "episodes": {"parallel": len(parallel), "none": len(none)},
        "rehearsed_by_model": rehearsed,
        "decided_by_validation": sum(s.decided for s in parallel + none),
        "repeated_failures": sum(s.repeated for s in parallel + none),
        "mean_fidelity_model": _mean(model_fidelities),
        "committed_steps_rehearsed_by_model": len(model_fidelities),
        "committed_steps_with_fidelity": len(fidelities),
        "unrequested_writes_none": sum(len(s.unrequested_writes) for s in none),
        "placeholder_examples": [c for s in parallel + none for c in s.placeholder_copies][:5],
    }
    return figures, details


def stats_from_row(row: dict) -> EpisodeStats:
    """An episode's stats back from its logged row (``run`` logs one per episode), so that an
    interrupted run's episodes can still be aggregated."""
    return EpisodeStats(
        seconds=row["seconds"], success=row["success"], rehearsed=row["rehearsed"],
        rehearsed_valid=row["valid"], decided=row["decided"], repeated=row.get("repeated", 0),
        fidelities=list(row["fidelities"]), model_fidelities=list(row.get("model_fidelities", row["fidelities"])),
        placeholder_copies=list(row["placeholder_copies"]), unrequested_writes=list(row["unrequested_writes"]),
    )


def aggregate_rows(rows: list[dict]) -> tuple[dict, dict]:
    by_mode = {"parallel": [], "none": []}
    for row in rows:
        by_mode[row["mode"]].append(stats_from_row(row))
    return aggregate(by_mode["parallel"], by_mode["none"])


def tasks_for(quick: bool) -> list:
    from envace_demo.tasks import env_tasks

    tasks = []
    for env in ENVIRONMENTS:
        for task in env_tasks(env):
            if not quick or task.name in QUICK_TASKS[env]:
                tasks.append(task)
    return tasks


def run(backend, quick: bool, config_for: Callable[[str, int], Any], log: Callable[[str], None] = print,
        seeds: tuple[int, ...] | None = None) -> tuple[dict, dict]:
    """Run every task × seed in both modes; ``config_for(mode, seed)`` gives the
    EpisodeConfig (the Playground's defaults)."""
    from envace_demo.engine import run_episode
    from envace_demo.envs.registry import create

    seeds = seeds or (QUICK_SEEDS if quick else SEEDS)
    stats: dict[str, list[EpisodeStats]] = {"parallel": [], "none": []}
    rows = []
    for task in tasks_for(quick):
        environment = create(task.env)
        responses = {t.name: t.response for t in environment.tools()}
        writes = environment.state_changing
        for seed in seeds:
            for mode in ("parallel", "none"):
                environment.reset()
                traj = run_episode(backend, task, config_for(mode, seed), environment)
                one = episode_stats(traj, responses, writes, read_only(task.check))
                stats[mode].append(one)
                rows.append({"env": task.env, "task": task.name, "seed": seed, "mode": mode,
                             "seconds": round(traj.seconds, 1), "ended": traj.ended, "success": traj.success,
                             "fidelity": traj.fidelity, "rehearsed": one.rehearsed,
                             "valid": one.rehearsed_valid,
                             "decided": one.decided, "repeated": one.repeated,
                             "copies": len(one.placeholder_copies), "model_fidelities": one.model_fidelities,
                             "unrequested_writes": one.unrequested_writes,
                             "fidelities": one.fidelities, "placeholder_copies": one.placeholder_copies,
                             "calls": [f"{c.name} {c.arguments}" for c in traj.committed_calls()]})
                log("row " + json.dumps(rows[-1], ensure_ascii=False, default=str))
                log(f"{task.env}/{task.name} seed {seed} {mode}: {traj.seconds:.0f} s, {traj.ended}, "
                    f"success {traj.success}, rehearsed {one.rehearsed_valid}/{one.rehearsed} valid, "
                    f"fidelity {traj.fidelity}, writes {one.unrequested_writes}")
    figures, details = aggregate(stats["parallel"], stats["none"])
    details.update({"seeds": list(seeds), "tasks": len(tasks_for(quick)), "rows": rows})
    return figures, details
