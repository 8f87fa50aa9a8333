"""The table's charts (plotly) and the report files: summary.json, report.md and one
HTML file per chart beside it. Each chart has one title and both axis titles."""

from __future__ import annotations

import json
from pathlib import Path

import plotly.graph_objects as go

from envace_demo.evaluation.table import CHANGES_NOTE, INTERVAL, OVERALL, RATES, changes_table, markdown_table

COLORS = {"none": "#94a3b8", "parallel": "#6366f1", "sequential": "#0ea5e9"}
_LAYOUT = dict(template="plotly_white", height=340, margin=dict(l=60, r=10, t=50, b=60), legend_title_text="mode")
_LABELS = {"validity": "valid calls", "success": "task success / BFCL match", "tokens": "tokens per episode",
           "seconds": "seconds per episode"}


def _scale(metric: str) -> float:
    return 100.0 if metric in RATES else 1.0


def _error_bars(stats: list[dict | None], scale: float) -> dict:
    """Asymmetric error bars from the intervals (none where there is no interval)."""
    plus, minus = [], []
    for s in stats:
        if s and s["mean"] is not None and s["ci"]:
            plus.append(scale * (s["ci"][1] - s["mean"]))
            minus.append(scale * (s["mean"] - s["ci"][0]))
        else:
            plus.append(0.0)
            minus.append(0.0)
    return dict(type="data", symmetric=False, array=plus, arrayminus=minus)


def _empty(fig: go.Figure, text: str) -> go.Figure:
    fig.add_annotation(text=text, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    return fig


def metric_by_category(summary: dict, metric: str) -> go.Figure:
    """The metric's mean per category, one bar per mode, with its interval."""
    scale = _scale(metric)
    cats = summary["categories"] + ([OVERALL] if len(summary["categories"]) > 1 else [])
    fig = go.Figure()
    for mode in summary["modes"]:
        stats = [next((r[metric] for r in summary["rows"] if r["category"] == c and r["mode"] == mode), None)
                 for c in cats]
        ys = [scale * s["mean"] if s and s["mean"] is not None else None for s in stats]
        fig.add_trace(go.Bar(name=mode, x=cats, y=ys, marker_color=COLORS.get(mode, "#64748b"),
                             error_y=_error_bars(stats, scale)))
    unit = " (%)" if metric in RATES else ""
    fig.update_layout(title=f"{_LABELS[metric].capitalize()} by category and mode", barmode="group",
                      xaxis_title="category", yaxis_title=f"{_LABELS[metric]}{unit}", **_LAYOUT)
    if metric in RATES:
        fig.update_yaxes(range=[0, 105])
    if not any(t.y and any(v is not None for v in t.y) for t in fig.data):
        _empty(fig, "no episode has this metric (e.g. tasks with no check)")
    return fig


def difference(summary: dict, metric: str = "success") -> go.Figure:
    """Each rehearsal mode's paired difference to the baseline, per category, with its interval."""
    scale = _scale(metric)
    cats = summary["categories"] + ([OVERALL] if len(summary["categories"]) > 1 else [])
    fig = go.Figure()
    for mode in summary["modes"]:
        if mode == summary["baseline"]:
            continue
        stats = [next(((r.get("diff") or {}).get(metric) for r in summary["rows"]
                       if r["category"] == c and r["mode"] == mode), None) for c in cats]
        ys = [scale * s["mean"] if s and s["mean"] is not None else None for s in stats]
        fig.add_trace(go.Scatter(name=mode, x=cats, y=ys, mode="markers", marker=dict(size=11),
                                 marker_color=COLORS.get(mode, "#64748b"), error_y=_error_bars(stats, scale)))
    fig.add_hline(y=0, line_dash="dot", line_color="#64748b")
    unit = " (percentage points)" if metric in RATES else ""
    fig.update_layout(title=f"{_LABELS[metric].capitalize()}: difference to no rehearsal",
                      xaxis_title="category", yaxis_title=f"with − without rehearsal{unit}", **_LAYOUT)
    if not fig.data:
        _empty(fig, f"add mode {summary['baseline']!r} to compare against it")
    return fig


def cost(summary: dict) -> go.Figure:
    """Tokens and seconds per episode, per mode, over all categories."""
    overall = OVERALL if len(summary["categories"]) > 1 else summary["categories"][0] if summary["categories"] else None
    rows = {r["mode"]: r for r in summary["rows"] if r["category"] == overall}
    modes = [m for m in summary["modes"] if m in rows]
    fig = go.Figure()
    fig.add_trace(go.Bar(name="tokens", x=modes, y=[rows[m]["tokens"]["mean"] for m in modes],
                         marker_color=[COLORS.get(m, "#64748b") for m in modes], showlegend=False))
    fig.update_layout(title="Cost: generated tokens per episode by mode", xaxis_title="mode",
                      yaxis_title="tokens per episode (mean)", **_LAYOUT)
    return fig


def figures(summary: dict) -> dict[str, go.Figure]:
    """name -> figure, in the order the report and the app show them."""
    return {
        "success": metric_by_category(summary, "success"),
        "success_difference": difference(summary, "success"),
        "validity": metric_by_category(summary, "validity"),
        "tokens": cost(summary),
    }


def _paper_section(summary: dict, meta: dict) -> list[str]:
    """The paper's BFCL v4 multi-turn figures beside ours, where the run holds such entries."""
    from envace_demo.bfcl_multi.paper import comparison_markdown

    text = comparison_markdown(summary, meta.get("model", "this run"))
    return [text, ""] if text else []


def write_report(out_dir: Path, summary: dict, meta: dict) -> Path:
    """summary.json, report.md and charts/*.html (plotly.js once, beside them, so the
    files open offline). Returns the path of report.md."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "summary.json").write_text(json.dumps({**summary, "run": meta}, indent=2), encoding="utf-8")
    charts = out_dir / "charts"
    charts.mkdir(exist_ok=True)
    links = []
    for name, fig in figures(summary).items():
        fig.write_html(charts / f"{name}.html", include_plotlyjs="directory", full_html=True)
        links.append(f"- [{fig.layout.title.text}](charts/{name}.html)")
    settings = ", ".join(f"{k}={v}" for k, v in sorted(meta.items()) if k != "command")
    text = [
        "# Rehearsal versus no rehearsal",
        "",
        f"Command: `{meta.get('command', '')}`" if meta.get("command") else "",
        "",
        f"Settings: {settings}.",
        "",
        f"{summary['episodes']} episodes, {summary['errors']} ended in a server error (left out of the metrics).",
        f"Δ: difference to `{summary['baseline']}` on the same task and seed; brackets: {INTERVAL}.",
        "Rates are means over episodes (an `overall` row pools every episode).",
        "",
        markdown_table(summary),
        "",
        "## What rehearsal changed",
        "",
        CHANGES_NOTE,
        "",
        changes_table(summary),
        "",
        *_paper_section(summary, meta),
        "## Charts",
        "",
        *links,
        "",
    ]
    path = out_dir / "report.md"
    path.write_text("\n".join(text), encoding="utf-8")
    return path
