"""Rehearsal memory: what the imagined trajectories tried, predicted and reached,
condensed into a card for the UI and a text for the committed actor."""

from __future__ import annotations

import json
from typing import Any

from envace_demo.record import CallStep, Rehearsal, call_steps, error_code, is_error, rehearsal_failed

_MAX_RESULT_CHARS = 240


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _MAX_RESULT_CHARS else text[: _MAX_RESULT_CHARS - 1] + "…"


def summarize(rehearsals: list[Rehearsal]) -> dict:
    """The memory record: ``attempts`` (structured) and ``text`` (for the prompt)."""
    attempts = []
    for r in rehearsals:
        calls = [
            {
                "name": c.call.name,
                "arguments": c.call.arguments,
                "predicted": seen(c),
                "predicted_error": is_error(seen(c)) or bool(c.error),
                "certainty": c.certainty,
                "fetched": c.fetched,
                "invalid_arguments": c.validation_errors,
                "cut": c.rehearsal_cut,
            }
            for c in call_steps(r.turns)
        ]
        # In the order they happened: a turn's own error (it failed to parse) ends it. A call
        # cut by the time says so on its line, and the attempt in its heading.
        errors = [e for t in r.turns for e in [t.error, *(c.error for c in t.calls if not c.rehearsal_cut)] if e]
        attempts.append(
            {"index": r.index, "calls": calls, "errors": errors, "answer": r.final_answer, "ended": r.ended, "cut": r.cut}
        )
    return {"attempts": attempts, "text": render(attempts)}


def seen(step: CallStep) -> Any:
    """What the imagined run was told: the prediction, or the real result of a fetched read."""
    return step.real if step.fetched else step.rehearsed


def foresaw(memory: dict | None, attempt: int | None = None, sure: float | None = None) -> bool:
    """Whether a rehearsal (or only the one of index ``attempt``) foresaw something the
    committed run can act on: a call predicted to fail (with ``sure``, only one whose
    rehearser gave the failure at least that probability: ``CallStep.certainty``), or one
    whose arguments were invalid."""
    return any(
        (c.get("predicted_error") and not rehearsal_failed(c.get("predicted"))
         and (sure is None or (c.get("certainty") is not None and c["certainty"] >= sure)))
        or c.get("invalid_arguments")
        for a in (memory or {}).get("attempts", [])
        if attempt is None or a.get("index") == attempt
        for c in a.get("calls", [])
    )


def contradiction(step: CallStep, floor: float | None) -> str | None:
    """Why ``step``'s real response contradicts its rehearsal, or None: a failure where a
    success was rehearsed or the reverse, or a fidelity below ``floor`` (None: never)."""
    if floor is None or step.rehearsed is None or step.real is None:
        return None
    if is_error(step.real) != is_error(step.rehearsed):
        if is_error(step.real):
            return f"a success was rehearsed; the real call failed ({error_code(step.real)})"
        return "a failure was rehearsed; the real call succeeded"
    if step.fidelity is not None and step.fidelity < floor:
        return f"the real response scored {step.fidelity:.2f} against its rehearsal (below {floor:g})"
    return None


def _runs(calls: list[dict]) -> list[tuple[dict, int]]:
    """Consecutive identical calls with identical predictions, as (call, times): a small
    model repeats a call, and a memory that repeats it too teaches the repetition."""
    runs: list[tuple[dict, int]] = []
    for c in calls:
        if runs and runs[-1][0] == c:
            runs[-1] = (c, runs[-1][1] + 1)
        else:
            runs.append((c, 1))
    return runs


def render(attempts: list[dict], values: bool = True) -> str:
    """The memory as the committed actor reads it; without ``values`` each rehearsed call
    shows only its predicted outcome (success, or which error): which calls to make and
    which to avoid, and nothing a rehearsal invented to tell the user."""
    if not attempts:
        return ""
    lines = [
        "Rehearsal memory. Before acting for real you rehearsed this request privately; the tool "
        "results below were predicted, not real. They are not a plan to repeat: make only the calls "
        "the user's request needs, avoid predicted errors, and answer as soon as you have what was "
        "asked. Never change anything the user did not ask to change."
        + ("" if values else " Tell the user only what the real tool results say.")
    ]
    for a in attempts:
        cut = " (cut short: the rehearsal time ran out)" if a.get("cut") else ""
        lines.append(f"Attempt {a['index'] + 1}{cut}:")
        if not a["calls"]:
            lines.append("- made no tool call")
        for c, times in _runs(a["calls"]):
            args = json.dumps(c["arguments"], ensure_ascii=False)
            again = f" ({times} times in a row)" if times > 1 else ""
            if c.get("cut") and c["predicted"] is None:  # no prediction to show, nor an error
                lines.append(f"- called {c['name']} {args}{again} -> not rehearsed (the time ran out)")
                continue
            said = "real" if c.get("fetched") else "predicted"  # a read fetched for real is no prediction
            if values:
                mark = f" ({said} error)" if c["predicted_error"] else (" (real)" if c.get("fetched") else "")
                lines.append(f"- called {c['name']} {args}{again} -> {_short(c['predicted'])}{mark}")
            else:
                outcome = f"{said} error {error_code(c['predicted'])}" if c["predicted_error"] else f"{said} success"
                lines.append(f"- called {c['name']} {args}{again} -> {outcome}")
            if c["invalid_arguments"]:
                lines.append(f"  arguments invalid: {'; '.join(c['invalid_arguments'][:3])}")
        for e in a["errors"]:
            lines.append(f"- error: {e}")
        if a["answer"] and values:
            lines.append(f"- answer reached: {a['answer'][:_MAX_RESULT_CHARS]}")
    return "\n".join(lines)
