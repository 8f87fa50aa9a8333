"""Episode records and the table built from them.

One record per episode (task × mode × seed), plain JSON. The table has one row per
(category, mode) plus an ``overall`` row per mode: the mean of each metric over the
episodes that have it, and for every mode but the baseline the paired difference to
the baseline (same task, same seed) with a bootstrap confidence interval.

Metrics, per episode:

- ``validity``: committed calls valid against their schema, over calls attempted
  (valid or not, plus unparseable actions); none when the episode made no attempt.
- ``success``: the task's check (BFCL records: the calls match the ground truth as
  BFCL's AST checker judges them); none when the task has no check.
- ``fidelity``: mean fidelity of rehearsed versus real responses; only where a call
  was both rehearsed and executed for real (never in mode ``none``, never without an
  environment).
- ``tokens``: every generated token (rehearsals included); ``seconds``: wall time.
- ``real_calls``, ``real_errors``, ``held_calls`` (committed calls not executed because
  their rehearsal foresaw a failure), ``checked_calls`` (held, then run for real once the
  run found no other path), ``trusted_calls`` (held and never run: the rehearser was sure
  of the failure), ``repaired_calls`` (steps of another path the rehearsal found for a held
  call: ``engine/repair.py``), ``context_reads`` (real reads made for the
  rehearser): counts from the record's totals.
- ``outcome_right`` (share of calls whose rehearsed outcome, success or which error, was
  right), ``error_right`` (the same, as error or not: ``fidelity.error_right``), ``knowable`` and ``unknowable`` (mean share of real values the rehearsal got
  right, among those its context made knowable and among the rest): the fidelity's parts,
  means over the episode's call steps that have them.

Per (category, mode) the table also counts ``ungrounded_answers`` (episodes whose answer
carries values only rehearsals had), and for every mode but the baseline pairs each
episode with the baseline's of the same task and seed (``divergence``): how many it
helped, hurt or left the same, and the kind of their first divergence
(``divergence.first_divergence``), from the rows alone (``call_outcomes``).

Episodes that ended in an error of the model server (``error`` set) count in
``errors`` and in no metric, and their pairs are dropped from the differences.
"""

from __future__ import annotations

import json
import re
from typing import Any

from envace_demo.baselines import baseline_parts
from envace_demo.evaluation.divergence import KINDS, VERDICTS, call_outcomes, first_divergence, verdict_of
from envace_demo.fidelity import Context as FidelityContext, error_right
from envace_demo.record import Trajectory, call_steps
from envace_demo.schemas import Tool, find_tool

METRICS = ("validity", "success", "fidelity", "tokens", "seconds")
# What rehearsal changed, per episode: counts of the committed run, and the fidelity's parts.
PARTS = (
    "real_calls", "real_errors", "held_calls", "checked_calls", "trusted_calls", "unsure_calls", "repaired_calls",
    "context_reads", "outcome_right", "error_right", "knowable", "unknowable",
)
# The same parts for two rehearsers with no model, on the same calls and contexts as the
# model's (``envace_demo.baselines``): what knowing only the schema, or echoing, scores.
BASELINE_PARTS = ("schema_only_outcome", "schema_only_knowable", "echo_outcome", "echo_knowable")
PARTS = PARTS + BASELINE_PARTS
RATES = ("validity", "success", "fidelity", "outcome_right", "error_right", "knowable", "unknowable", *BASELINE_PARTS)
OVERALL = "overall"
BASELINE = "none"
RESAMPLES = 2000
CONFIDENCE = 0.95
INTERVAL = (
    f"{CONFIDENCE:.0%} paired bootstrap (percentile, {RESAMPLES} resamples) over the task × seed pairs "
    "that both modes completed"
)

_ID_SUFFIX = re.compile(r"_\d+(?:-\d+)*$")


def category_of(record: Any, file_stem: str) -> str:
    """A BFCL record's category (its ``category`` field, else its id without the
    number: ``simple_12`` -> ``simple``); a project task's environment; else the file's
    name."""
    if isinstance(record, dict):
        if {"question", "function"} <= set(record):
            if isinstance(record.get("category"), str) and record["category"]:
                return record["category"]
            rid = str(record.get("id", ""))
            stripped = _ID_SUFFIX.sub("", rid)
            if stripped and stripped != rid:
                return stripped
        elif isinstance(record.get("env"), str):
            return record["env"]
    return file_stem


def episode_record(
    task_id: str, category: str, mode: str, seed: int, traj: Trajectory | None, error: str | None = None
) -> dict:
    """The JSON line of one episode. ``traj`` None: the episode could not run (``error``)."""
    rec: dict[str, Any] = {"task_id": task_id, "category": category, "mode": mode, "seed": seed}
    if traj is None:
        return {**rec, "task": task_id.split(":", 1)[-1], "error": error or "unknown error", "ended": "error",
                "success": None, "validity": None, "fidelity": None, "tokens": 0, "seconds": 0.0,
                "calls": 0, "valid_calls": 0, "parse_errors": 0, **{k: None for k in PARTS}}
    tool_steps = call_steps(traj.turns)
    parse_errors = sum(1 for t in traj.turns if t.action.error is not None)
    valid = sum(1 for s in tool_steps if s.valid)
    attempted = len(tool_steps) + parse_errors
    totals = traj.totals()
    if error is None and traj.ended.startswith("model_error"):
        error = traj.ended  # the server failed for good (after its retries): not a model's mistake
    return {
        **rec,
        "task": traj.task,
        "error": error,
        "ended": traj.ended,
        "success": traj.success,
        "reasons": traj.check_reasons,
        "validity": round(valid / attempted, 4) if attempted else None,
        "calls": len(tool_steps),
        "valid_calls": valid,
        "parse_errors": parse_errors,
        "fidelity": traj.fidelity,
        "tokens": totals["tokens"],
        "seconds": round(traj.seconds, 3),
        "committed_calls": [c.to_dict() for c in traj.committed_calls()],
        # What pairing with the baseline needs (``divergence``), without the trajectory.
        "call_outcomes": call_outcomes(traj),
        "final_answer": traj.final_answer,
        "ungrounded": list(traj.ungrounded),
        "withdrawn_answers": sum(1 for t in traj.turns if t.withdrawn),
        **{k: totals[k] for k in ("real_calls", "real_errors", "held_calls", "checked_calls", "trusted_calls",
                                     "unsure_calls", "repaired_calls", "context_reads")},
        **_fidelity_parts(tool_steps),
        **_baseline_parts(traj, tool_steps),
        "trajectory": traj.to_dict(),
    }


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def _baseline_parts(traj: Trajectory, steps: list) -> dict:
    """The baselines' outcome and knowable values over the calls the model's rehearsal was
    scored on, each shown what the model's rehearser was: the arguments, the real results
    before it, the reads made for it, the tool's description."""
    scored = [s for s in steps if s.outcome_right is not None]
    if not scored:
        return {k: None for k in BASELINE_PARTS}
    tools = [Tool.from_dict(t) for t in traj.tools]
    seen: dict[int, list] = {}
    earlier: list = []
    for s in steps:
        seen[id(s)] = list(earlier)
        if s.real is not None:
            earlier.append(s.real)

    def context_of(step) -> FidelityContext:
        tool = find_tool(tools, step.call.name)
        return FidelityContext(
            arguments=step.call.arguments,
            known=tuple([*seen.get(id(step), []), *(x.get("result") for x in step.context)]),
            description=json.dumps(tool.to_openai(), ensure_ascii=False) if tool else "",
        )

    parts = baseline_parts(scored, context_of, tools)
    out = {}
    for name, key in (("schema-only", "schema_only"), ("echo", "echo")):
        out[f"{key}_outcome"] = parts[name]["outcome"]
        out[f"{key}_knowable"] = parts[name]["knowable"]
    return out


def _fidelity_parts(steps: list) -> dict:
    """The episode's means of the fidelity's parts over the call steps that have them."""
    return {
        "outcome_right": _mean([float(s.outcome_right) for s in steps if s.outcome_right is not None]),
        "error_right": _mean([float(error_right(s.rehearsed, s.real)) for s in steps
                              if s.outcome_right is not None and s.real is not None]),
        "knowable": _mean([s.knowable for s in steps if s.knowable is not None]),
        "unknowable": _mean([s.unknowable for s in steps if s.unknowable is not None]),
    }


def _value(rec: dict, metric: str) -> float | None:
    v = rec.get(metric)
    if v is None or rec.get("error"):
        return None
    return float(v)


def _bootstrap(values: list[float], seed: int) -> tuple[float, float] | None:
    """Percentile interval of the mean; None below two values (no spread to resample)."""
    if len(values) < 2:
        return None
    import numpy as np

    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(RESAMPLES, len(data)))].mean(axis=1)
    tail = (1 - CONFIDENCE) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail])
    return float(lo), float(hi)


def _stat(values: list[float], seed: int) -> dict:
    if not values:
        return {"mean": None, "n": 0, "ci": None}
    ci = _bootstrap(values, seed)
    return {"mean": sum(values) / len(values), "n": len(values), "ci": list(ci) if ci else None}


def _pairable(rec: dict) -> dict | Trajectory | None:
    """What ``first_divergence`` reads of a row: the row itself (it has ``call_outcomes``),
    else the trajectory it carries (rows written before), else None."""
    if isinstance(rec.get("call_outcomes"), list):
        return rec
    if isinstance(rec.get("trajectory"), dict):
        try:
            return Trajectory.from_dict(rec["trajectory"])
        except Exception:  # a row from another version: no divergence, the rest still counts
            return None
    return None


def _divergences(mine: list[dict], base: dict) -> dict:
    """Each episode of ``mine`` against the baseline's of the same task and seed: the
    verdicts (from success) of every pair without an error, and the kinds of first
    divergence of those whose calls are recorded (``unread``: pairs whose are not)."""
    out: dict[str, Any] = {"pairs": 0, **{v: 0 for v in VERDICTS}, "kinds": {k: 0 for k in KINDS}, "unread": 0}
    for r in mine:
        other = base.get((r["task_id"], r["seed"]))
        if other is None or r.get("error") or other.get("error"):
            continue
        out["pairs"] += 1
        without, with_ = _pairable(other), _pairable(r)
        if without is None or with_ is None:
            out[verdict_of(other.get("success"), r.get("success"))] += 1
            out["unread"] += 1
            continue
        d = first_divergence(without, with_)
        out[d.verdict] += 1
        out["kinds"][d.kind] += 1
    return out


def summarize(records: list[dict], modes: list[str] | None = None, baseline: str = BASELINE, seed: int = 0) -> dict:
    """The table: ``rows`` of (category, mode) with each metric's mean, count and
    interval (``METRICS`` and ``PARTS``), ``errors``, ``ungrounded_answers``, and for every
    mode but ``baseline`` ``diff`` (metric -> paired difference to ``baseline``) and
    ``divergence`` (helped / hurt / same and the kinds of first divergence over the pairs).
    Deterministic for the same records (the bootstrap's generator is seeded)."""
    modes = modes or sorted({r["mode"] for r in records}, key=lambda m: (m != baseline, m))
    categories = sorted({r["category"] for r in records})
    groups = [(c, [r for r in records if r["category"] == c]) for c in categories]
    if len(categories) != 1:
        groups.append((OVERALL, list(records)))
    rows = []
    for g, (category, recs) in enumerate(groups):
        by_mode = {m: [r for r in recs if r["mode"] == m] for m in modes}
        base = {(r["task_id"], r["seed"]): r for r in by_mode.get(baseline, [])}
        for mi, mode in enumerate(modes):
            mine = by_mode[mode]
            row: dict[str, Any] = {
                "category": category,
                "mode": mode,
                "episodes": len(mine),
                "errors": sum(1 for r in mine if r.get("error")),
                "tasks": len({r["task_id"] for r in mine}),
            }
            for k, metric in enumerate(METRICS + PARTS):
                row[metric] = _stat([v for r in mine if (v := _value(r, metric)) is not None], seed + 7919 * (g * 31 + mi * 7 + k))
            row["ungrounded_answers"] = sum(1 for r in mine if not r.get("error") and r.get("ungrounded"))
            if mode != baseline and base:
                row["divergence"] = _divergences(mine, base)
                row["diff"] = {}
                for k, metric in enumerate(METRICS + PARTS):
                    pairs = []
                    for r in mine:
                        other = base.get((r["task_id"], r["seed"]))
                        a, b = _value(r, metric), _value(other, metric) if other else None
                        if a is not None and b is not None:
                            pairs.append(a - b)
                    row["diff"][metric] = _stat(pairs, seed + 104729 * (g * 31 + mi * 7 + k))
            rows.append(row)
    return {
        "modes": modes,
        "baseline": baseline,
        "interval": INTERVAL,
        "categories": categories,
        "episodes": len(records),
        "errors": sum(1 for r in records if r.get("error")),
        "rows": rows,
    }


# ---- text ---------------------------------------------------------------------------------


def _fmt(metric: str, stat: dict | None) -> str:
    if not stat or stat["mean"] is None:
        return "—"
    v = stat["mean"]
    if metric in RATES:
        return f"{100 * v:.1f}%"
    if metric == "tokens":
        return f"{v:.0f}"
    return f"{v:.1f}"


def _fmt_diff(metric: str, stat: dict | None) -> str:
    if not stat or stat["mean"] is None:
        return "—"
    scale, unit, digits = (100, " pts", 1) if metric in RATES else (1, "", 0 if metric == "tokens" else 1)
    text = f"{scale * stat['mean']:+.{digits}f}{unit}"
    if stat["ci"]:
        lo, hi = (scale * x for x in stat["ci"])
        text += f" [{lo:+.{digits}f}, {hi:+.{digits}f}]"
    return text


TABLE_COLUMNS = [
    "category", "mode", "episodes", "errors",
    "valid calls", "Δ valid", "success", "Δ success", "fidelity", "tokens", "Δ tokens", "seconds", "Δ seconds",
]


def table_rows(summary: dict) -> list[list[Any]]:
    """The table as display rows, in ``TABLE_COLUMNS`` order (Δ: to the baseline, with
    its interval in brackets)."""
    out = []
    for row in summary["rows"]:
        diff = row.get("diff") or {}
        out.append([
            row["category"], row["mode"], row["episodes"], row["errors"],
            _fmt("validity", row["validity"]), _fmt_diff("validity", diff.get("validity")),
            _fmt("success", row["success"]), _fmt_diff("success", diff.get("success")),
            _fmt("fidelity", row["fidelity"]),
            _fmt("tokens", row["tokens"]), _fmt_diff("tokens", diff.get("tokens")),
            _fmt("seconds", row["seconds"]), _fmt_diff("seconds", diff.get("seconds")),
        ])
    return out


def markdown_table(summary: dict) -> str:
    lines = ["| " + " | ".join(TABLE_COLUMNS) + " |", "|" + "---|" * len(TABLE_COLUMNS)]
    for cells in table_rows(summary):
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


# ---- what rehearsal changed -----------------------------------------------------------------

CHANGE_COLUMNS = [
    "category", "mode", "real calls", "real errors", "held / checked / trusted / unsure / repaired calls",
    "ungrounded answers",
    "outcome right", "knowable right", "unknowable right", "schema-only: outcome / knowable",
    "echo: outcome / knowable", "helped / hurt / same", "first divergence",
]
_KIND_LABELS = {k: k.replace("_", " ") for k in KINDS}


def _fmt_count(stat: dict | None) -> str:
    return "—" if not stat or stat["mean"] is None else f"{stat['mean']:.2f}"


def divergence_text(div: dict | None) -> tuple[str, str]:
    """(helped / hurt / same, the kinds of first divergence) of a row's ``divergence``."""
    if not div or not div["pairs"]:
        return "—", "—"
    verdicts = f"{div['helped']} / {div['hurt']} / {div['same']}"
    kinds = ", ".join(f"{_KIND_LABELS[k]} {n}" for k, n in div["kinds"].items() if n) or "—"
    if div.get("unread"):
        kinds += f" ({div['unread']} pair{'s' if div['unread'] != 1 else ''} without call records)"
    return verdicts, kinds


def changes_line(summary: dict) -> str | None:
    """One line of what rehearsal changed over every pair with ``none`` (the overall row of
    each rehearsing mode), or None without pairs."""
    parts = []
    for row in summary["rows"]:
        if row["category"] != OVERALL and len({r["category"] for r in summary["rows"]}) > 1:
            continue
        div = row.get("divergence")
        if not div or not div["pairs"]:
            continue
        _, kinds = divergence_text(div)
        parts.append(f"{row['mode']}: helped {div['helped']}, hurt {div['hurt']}, same {div['same']} of "
                     f"{div['pairs']} pairs with none (first divergence: {kinds})")
    return "What rehearsal changed: " + "; ".join(parts) if parts else None


def change_rows(summary: dict) -> list[list[Any]]:
    """What rehearsal changed, per (category, mode), in ``CHANGE_COLUMNS`` order: the real
    calls, real errors and held calls per episode, the answers with ungrounded values, the
    fidelity's parts, and the pairs with the baseline."""
    out = []
    for row in summary["rows"]:
        done = row["episodes"] - row["errors"]
        verdicts, kinds = divergence_text(row.get("divergence"))
        out.append([
            row["category"], row["mode"],
            _fmt_count(row.get("real_calls")), _fmt_count(row.get("real_errors")),
            f'{_fmt_count(row.get("held_calls"))} / {_fmt_count(row.get("checked_calls"))} / '
            f'{_fmt_count(row.get("trusted_calls"))} / {_fmt_count(row.get("unsure_calls"))} / '
            f'{_fmt_count(row.get("repaired_calls"))}',
            f"{row.get('ungrounded_answers', 0)} of {done}",
            _outcome_cell(row), _fmt("knowable", row.get("knowable")),
            _fmt("unknowable", row.get("unknowable")),
            f'{_fmt("schema_only_outcome", row.get("schema_only_outcome"))} / '
            f'{_fmt("schema_only_knowable", row.get("schema_only_knowable"))}',
            f'{_fmt("echo_outcome", row.get("echo_outcome"))} / {_fmt("echo_knowable", row.get("echo_knowable"))}',
            verdicts, kinds,
        ])
    return out


def _outcome_cell(row: dict) -> str:
    """The outcome right (which error), then as error or not, where there is one."""
    cell = _fmt("outcome_right", row.get("outcome_right"))
    if not row.get("error_right") or row["error_right"].get("mean") is None:
        return cell
    return f'{cell} (error or not {_fmt("error_right", row.get("error_right"))})'


def changes_table(summary: dict) -> str:
    """``change_rows`` as Markdown."""
    lines = ["| " + " | ".join(CHANGE_COLUMNS) + " |", "|" + "---|" * len(CHANGE_COLUMNS)]
    for cells in change_rows(summary):
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


CHANGES_NOTE = (
    "Per episode: real calls, real errors, held calls (not executed: the rehearsal foresaw a failure) and "
    "checked calls (held, then run for real: the run found no other path; trusted: held and never run, the "
    "rehearser sure of the failure, `EpisodeConfig.trust_certainty`; unsure: foreseen below "
    "`EpisodeConfig.hold_certainty`, so not held and run at once; repaired: steps of another path the "
    "rehearsal found for a held call, `EpisodeConfig.repair_candidates`); "
    "ungrounded answers: episodes whose answer carries values only rehearsals had; outcome right: the share "
    "of calls whose rehearsed outcome (success, or which error) was right; knowable / unknowable right: the "
    "share of real values the rehearsal got right among those its context made knowable and among the rest; "
    "schema-only and echo: the same figures for a rehearser that knows only the tool's schema, and one that "
    "echoes the arguments, on the same calls. "
    "helped / hurt / same: pairs with `none` on the same task and seed where only rehearsal succeeded, only "
    "`none` did, or neither or both; first divergence: where the two runs first parted."
)
