"""The paper's BFCL v4 multi-turn figures, and this run's beside them.

BFCL scores multi-turn as the unweighted mean of its categories' accuracies (base,
miss_func, miss_param, long_context: 200 entries each); ours is computed the same way over
the categories a run has, from the eval summary's per-category success means.
"""

from __future__ import annotations

from typing import Any

SOURCE = "EnvACE paper, test-time rehearsal table"
BENCHMARK = "BFCL v4 multi-turn"
# (model, mode) -> accuracy in percent, BFCL v4 multi-turn overall.
PAPER_FIGURES: dict[tuple[str, str], float] = {
    ("EnvACE-8B", "none"): 41.9,
    ("EnvACE-8B", "parallel"): 43.9,
    ("EnvACE-8B", "sequential"): 42.3,
    ("Qwen3-8B", "parallel"): 41.4,
    ("Qwen3-8B", "sequential"): 38.8,
}
PAPER_MODELS = ("EnvACE-8B", "Qwen3-8B")
MODES = ("none", "parallel", "sequential")
CATEGORY_PREFIX = "multi_turn_"


def ours(summary: dict) -> dict[str, dict[str, Any]]:
    """mode -> {"accuracy": mean of the categories' success rates in percent (None when a
    category has no judged episode), "categories": {category: percent}, "episodes": n}
    over the summary's BFCL multi-turn categories (``multi_turn_*``)."""
    out: dict[str, dict[str, Any]] = {}
    for row in summary.get("rows", []):
        category = row.get("category", "")
        if not isinstance(category, str) or not category.startswith(CATEGORY_PREFIX):
            continue
        stat = row.get("success") or {}
        mode = out.setdefault(row["mode"], {"categories": {}, "episodes": 0})
        mode["categories"][category] = None if stat.get("mean") is None else 100.0 * stat["mean"]
        mode["episodes"] += int(stat.get("n") or 0)
    for mode in out.values():
        values = list(mode["categories"].values())
        mode["accuracy"] = sum(values) / len(values) if values and None not in values else None
    return out


def _cell(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def comparison_markdown(summary: dict, model: str = "this run") -> str:
    """"Ours vs paper" for report.md: one row per mode, ours beside the paper's two models;
    "" when the summary has no BFCL multi-turn category."""
    mine = ours(summary)
    if not mine:
        return ""
    categories = sorted({c for m in mine.values() for c in m["categories"]})
    head = f"| mode | {model} | judged | " + " | ".join(f"paper {m}" for m in PAPER_MODELS) + " |"
    lines = [
        f"## {BENCHMARK}: ours vs the paper",
        "",
        f"Accuracy (%), the mean of the categories' success rates ({', '.join(categories)}), as BFCL "
        f"averages its multi-turn categories; judged by BFCL's own checker. Paper: {SOURCE}.",
        "",
        head,
        "|" + "---|" * (3 + len(PAPER_MODELS)),
    ]
    for mode in [m for m in MODES if m in mine or any((p, m) in PAPER_FIGURES for p in PAPER_MODELS)]:
        row = mine.get(mode, {})
        paper = " | ".join(_cell(PAPER_FIGURES.get((p, mode))) for p in PAPER_MODELS)
        lines.append(f"| {mode} | {_cell(row.get('accuracy'))} | {row.get('episodes', 0)} | {paper} |")
    if len(categories) < 4:
        lines += ["", f"Only {len(categories)} of BFCL's 4 multi-turn categories ran: not the paper's full score."]
    return "\n".join(lines) + "\n"
