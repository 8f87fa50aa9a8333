"""One metrics.jsonl row per training step: per-role keys ``name/role``, then step-wide ones."""

from __future__ import annotations

import statistics

from envace_demo.train.config import TrainConfig
from envace_demo.train.rollout import ROLES, Group, Row


def step_metrics(groups: list[Group], rows: list[Row], losses: dict, cfg: TrainConfig, acc) -> dict:
    """One metrics.jsonl row: per-role keys ``name/role``, then step-wide ones."""
    from accelerate.utils import gather_object

    local = {
        "rows": [(r.role, r.reward, r.advantage, len(r.completion_ids)) for r in rows],
        "scores": [(s.value, s.success) for g in groups for s in g.scores.values()],
        "calls": _call_counts(groups),
        "stats": losses["stats"],
    }
    parts = gather_object([local]) if acc.num_processes > 1 else [local]

    def mean(values: list[float]) -> float | None:
        return round(statistics.fmean(values), 4) if values else None

    def std(values: list[float]) -> float | None:
        return round(statistics.pstdev(values), 4) if values else None

    all_rows = [row for p in parts for row in p["rows"]]
    out: dict = {}
    for role in ROLES:
        mine = [r for r in all_rows if r[0] == role]
        out[f"reward/{role}"] = mean([r[1] for r in mine])
        out[f"advantage_std/{role}"] = std([r[2] for r in mine])
        out[f"gen_len/{role}"] = mean([r[3] for r in mine])
        out[f"rows/{role}"] = len(mine)
        loss = [v for p in parts for v in p["stats"][role]["loss"]]
        out[f"loss/{role}"] = mean(loss) if loss else 0.0
        out[f"clip_ratio/{role}"] = mean([v for p in parts for v in p["stats"][role]["clipped"]])
        if cfg.beta > 0:
            out[f"kl/{role}"] = mean([v for p in parts for v in p["stats"][role]["kl"]])
    scores = [s for p in parts for s in p["scores"]]
    out["score"] = mean([s[0] for s in scores])
    out["success"] = mean([float(s[1]) for s in scores])
    valid = sum(p["calls"][0] for p in parts)
    attempted = sum(p["calls"][1] for p in parts)
    out["valid_call_rate"] = round(valid / attempted, 4) if attempted else None
    out["grad_norm"] = round(losses["grad_norm"], 6)
    out["lr"] = cfg.lr
    return out


def _call_counts(groups: list[Group]) -> tuple[int, int]:
    """(schema-valid calls, calls + parse errors) over the actor turns of the rollouts."""
    valid = attempted = 0
    for group in groups:
        for rehearsal in group.rehearsals:
            for turn in rehearsal.turns:
                attempted += len(turn.calls) + (turn.action.error is not None)
                valid += sum(1 for step in turn.calls if step.valid)
    return valid, attempted
