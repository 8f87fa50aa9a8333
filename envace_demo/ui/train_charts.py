"""Plotly curves of a training run, from its metrics.jsonl rows (plain dicts). No gradio.

One panel per quantity; a line per role where the trainer reports the quantity per
role (keys ``name/role``), one line otherwise.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

ROLE_COLORS = {"actor": "#6366f1", "rehearser": "#f59e0b"}
STEP_COLOR = "#0f766e"
TITLE = "Training curves"
# (metric name, panel title, y-axis title). Quantities that move from step to step: the
# GRPO loss is left out, it is near zero by construction (advantages are centred per
# group and the ratio is 1 on the first pass). KL appears only in runs with beta > 0.
PANELS = (
    ("reward", "reward per role", "reward"),
    ("success", "task success of the rollouts", "success rate"),
    ("advantage_std", "advantage spread", "std"),
    ("grad_norm", "gradient norm (how far a step moves)", "norm"),
    ("kl", "KL to the base model", "KL"),
    ("valid_call_rate", "valid-call rate", "rate"),
    ("gen_len", "generation length", "tokens"),
)


def _series(rows: list[dict], name: str) -> dict[str, tuple[list[int], list[float]]]:
    """label -> (steps, values) of ``name``: per role (``name/role``) or step-wide (``name``)."""
    out: dict[str, tuple[list[int], list[float]]] = {}
    for i, row in enumerate(rows, 1):
        step = int(row.get("step", i))
        for key, value in row.items():
            if value is None or not isinstance(value, (int, float)):
                continue
            if key == name:
                label = "all rows"
            elif key.startswith(name + "/"):
                label = key.split("/", 1)[1]
            else:
                continue
            steps, values = out.setdefault(label, ([], []))
            steps.append(step)
            values.append(float(value))
    return out


def training_curves(rows: list[dict], total_steps: int | None = None) -> go.Figure:
    """The run's curves so far; an empty grid with a note before the first step."""
    panels = [panel for panel in PANELS if panel[0] != "kl" or _series(rows, "kl")]
    cols = 3
    nrows = -(-len(panels) // cols)
    fig = make_subplots(rows=nrows, cols=cols, subplot_titles=[t for _, t, _ in panels], vertical_spacing=0.22)
    shown: set[str] = set()
    for index, (name, _, unit) in enumerate(panels):
        r, c = index // cols + 1, index % cols + 1
        fig.update_yaxes(title_text=unit, row=r, col=c)
        fig.update_xaxes(title_text="step", row=r, col=c)
        for label, (steps, values) in _series(rows, name).items():
            color = ROLE_COLORS.get(label, STEP_COLOR)
            fig.add_trace(
                go.Scatter(
                    x=steps,
                    y=values,
                    mode="lines+markers",
                    name=label,
                    legendgroup=label,
                    showlegend=label not in shown,
                    line=dict(color=color),
                ),
                row=r,
                col=c,
            )
            shown.add(label)
        if name in ("valid_call_rate", "success"):
            fig.update_yaxes(range=[0, 1.05], tickformat=".0%", row=r, col=c)
    if total_steps:
        fig.update_xaxes(range=[0.5, total_steps + 0.5], dtick=max(1, total_steps // 8))
    fig.update_layout(
        title=TITLE,
        template="plotly_white",
        height=260 * nrows + 60,
        margin=dict(l=40, r=10, t=90, b=40),
        legend=dict(orientation="h", y=0.99, yanchor="top", x=1, xanchor="right", yref="container"),
    )
    if not rows:
        fig.add_annotation(
            text="curves appear after the first step", showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper"
        )
    return fig
