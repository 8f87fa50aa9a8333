"""Compare's metrics table: one row per metric, one column per side."""

from __future__ import annotations

from typing import Any

from envace_demo.ui.render.html import fidelity_text, yes_no


METRIC_ROWS = (
    ("success", "success"),
    ("real_calls", "real tool calls"),
    ("real_errors", "real errors hit"),
    ("real_writes", "real writes"),
    ("unrequested_writes", "writes not asked for"),
    ("tokens", "tokens"),
    ("seconds", "wall time (s)"),
    ("fidelity", "mean fidelity"),
    ("ended", "ended"),
)


def metrics_table(by_side: dict[str, dict]) -> tuple[list[str], list[list[Any]]]:
    """Headers and rows for the Compare table: one row per metric, one column per side."""
    sides = list(by_side)
    rows = []
    for key, label in METRIC_ROWS:
        row: list[Any] = [label]
        for side in sides:
            row.append(_cell(key, by_side[side].get(key)))
        rows.append(row)
    return ["metric", *sides], rows


def _cell(key: str, value: Any) -> Any:
    """One format per kind of value across tables: yes/no, fidelity 0.00, seconds 0.0."""
    if isinstance(value, bool) or (value is None and key == "success"):
        return yes_no(value)
    if key == "fidelity":
        return fidelity_text(value)
    if key == "seconds" and isinstance(value, (int, float)):
        return round(float(value), 1)
    return "—" if value is None else value
