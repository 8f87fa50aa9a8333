"""Plotly figures for the Compare suite, from suite rows (plain dicts). No gradio."""

from __future__ import annotations

from collections import defaultdict
from statistics import mean

import plotly.graph_objects as go

# One colour per mode, the same in every chart.
COLORS = {"none": "#94a3b8", "parallel": "#6366f1", "sequential": "#0ea5e9"}
_LAYOUT = dict(template="plotly_white", height=300, margin=dict(l=40, r=10, t=40, b=40), showlegend=False)


def _by_mode(rows: list[dict]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        groups[row["mode"]].append(row)
    return dict(groups)


def _color(mode: str) -> str:
    return COLORS.get(mode, "#64748b")


def success_rate(rows: list[dict]) -> go.Figure:
    """Share of judged tasks that succeeded, per mode (tasks with no check are left out)."""
    modes, rates, labels = [], [], []
    for mode, group in _by_mode(rows).items():
        judged = [r for r in group if r["success"] is not None]
        modes.append(mode)
        rate = sum(1 for r in judged if r["success"]) / len(judged) if judged else 0.0
        rates.append(rate)
        labels.append(f"{rate:.0%} of {len(judged)}")
    fig = go.Figure(
        go.Bar(
            x=modes,
            y=rates,
            text=labels,
            textposition="outside",
            cliponaxis=False,
            marker_color=[_color(m) for m in modes],
        )
    )
    fig.update_layout(
        title="Success rate by mode",
        xaxis_title="mode",
        yaxis=dict(range=[0, 1.15], tickformat=".0%", title="tasks succeeded"),
        **_LAYOUT,
    )
    return fig


def real_errors(rows: list[dict]) -> go.Figure:
    """Real tool errors hit, summed over the suite, per mode."""
    groups = _by_mode(rows)
    modes = list(groups)
    totals = [sum(r["real_errors"] for r in groups[m]) for m in modes]
    fig = go.Figure(
        go.Bar(
            x=modes,
            y=totals,
            text=totals,
            textposition="outside",
            cliponaxis=False,
            marker_color=[_color(m) for m in modes],
        )
    )
    fig.update_layout(title="Real errors hit by mode", xaxis_title="mode", yaxis_title="real errors (all tasks)", **_LAYOUT)
    return fig


def fidelity_distribution(rows: list[dict]) -> go.Figure:
    """Per-step fidelity (rehearsed vs real) of the modes that rehearse."""
    fig = go.Figure()
    for mode, group in _by_mode(rows).items():
        values = [f for r in group for f in r.get("step_fidelities", [])]
        if values:
            fig.add_trace(
                go.Histogram(
                    x=values, name=mode, marker_color=_color(mode), xbins=dict(start=0, end=1.0001, size=0.1)
                )
            )
    fig.update_layout(
        title="Fidelity of rehearsed responses",
        barmode="overlay",
        xaxis=dict(range=[0, 1], title="fidelity (rehearsed vs real)"),
        yaxis_title="committed steps",
        **_LAYOUT,
    )
    if not fig.data:
        fig.add_annotation(
            text="no rehearsed step was executed", showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper"
        )
    return fig


def latency(rows: list[dict]) -> go.Figure:
    """Wall time per task, per mode."""
    fig = go.Figure()
    for mode, group in _by_mode(rows).items():
        secs = [r["seconds"] for r in group]
        fig.add_trace(
            go.Box(
                y=secs, name=f"{mode} (mean {mean(secs):.1f} s)", marker_color=_color(mode), boxpoints="all"
            )
        )
    fig.update_layout(title="Wall time per task", xaxis_title="mode", yaxis_title="seconds", **_LAYOUT)
    return fig


def suite_figures(rows: list[dict]) -> tuple[go.Figure, go.Figure, go.Figure, go.Figure]:
    return success_rate(rows), real_errors(rows), fidelity_distribution(rows), latency(rows)
