"""Banners: the model's state, the header's model line, the showcase note, the time estimate."""

from __future__ import annotations

from envace_demo.budget import Speed
from envace_demo.ui.render.html import esc, status_html


def model_status_html(
    state: str,
    model: str,
    seconds: float,
    error: str | None,
    info: dict | None,
    note: str | None = None,
    speed: Speed | None = None,
) -> str:
    """The model banner. ``note``: a switch that failed (the working model stayed)."""
    if state == "loading":
        return status_html(f"loading model {model}… ({seconds:.0f} s)", "busy")
    if state == "failed":
        return status_html(f"model failed to load: {error}", "error")
    assert info is not None
    extra = f", {info['memory_mb']:.0f} MB" if info.get("memory_mb") else ""
    rate = f", {speed.decode:.0f} tokens/s" if speed is not None else ""
    text = f"model ready: {info['model_id']} on {info['device']} ({info['dtype']}{extra}{rate}), loaded in {seconds:.1f} s"
    if not trained(info):
        text += f". {UNTRAINED}"
    if note:
        return status_html(f"model switch failed: {note}. {text}", "warn")
    return status_html(text, "info")  # green is for a passed check only


UNTRAINED = "Untrained: a base model never trained to act, rehearse and commit; expect weak calls and rehearsals"


def trained(info: dict) -> bool:
    """Whether the model was trained for world rehearsal: an EnvACE release, or a base
    model with a fine-tuned adapter applied."""
    return bool(info.get("adapter")) or "envace" in str(info.get("model_id", "")).lower()


def header_model_html(state: str, model: str, info: dict | None, adapter: str | None) -> str:
    """The header's line naming the model that runs, and the adapter applied to it."""
    if state == "ready" and info is not None:
        name = f"<code>{esc(info['model_id'])}</code>"
    elif state == "loading":
        name = f"loading <code>{esc(model)}</code>…"
    else:
        name = "none (it failed to load: see below)"
    if adapter is None and info and info.get("adapter"):  # loaded with one (the embedded model's default)
        adapter = str(info["adapter"]).rstrip("/").rsplit("/", 1)[-1]
    on = f' · adapter: <code>{esc(adapter)}</code> <span class="ev-badge ev-warn">fine-tuned</span>' if adapter else " · no adapter"
    return f'<div class="ev-header-model">Model: {name}{on if state == "ready" else ""}</div>'


def showcase_html(model: str, command: str, budget: dict | None) -> str:
    made = ""
    if budget:
        made = f" (N={budget.get('n')}, {budget.get('max_steps')} steps, {budget.get('max_new_tokens')} new tokens)"
    return (
        '<div class="ev-showcase"><b>Recorded showcase</b>: a parallel-rehearsal run of this example made by '
        f"<code>{esc(model)}</code>{esc(made)} with <code>{esc(command)}</code>. Nothing has run yet: "
        "press Run to run it live on the loaded model.</div>"
    )


def estimate_html(
    speed: Speed | None,
    mode: str,
    n: int,
    max_steps: int,
    max_new_tokens: int,
    limit_seconds: float,
    reasoning: bool = True,
    think_tokens: int | None = None,
    executed: bool = True,
) -> str:
    """The time a run with these controls should take on the loaded model, and the reasoning
    budget within its new tokens; ``executed`` False: no environment runs the committed
    calls, which the line says first."""
    from envace_demo.budget import estimate_seconds

    note = ""
    if not executed and mode in ("parallel", "sequential"):
        note = f'<div class="ev-note">{esc(NOTHING_COMMITTED)}</div>'
    if speed is None:
        return f'<div class="ev-estimate">Estimate: known once the model has loaded and been timed.{note}</div>'
    seconds = estimate_seconds(speed, mode, n, max_steps, max_new_tokens, reasoning)
    over = " (longer than the limit: it will be cut)" if seconds > limit_seconds else ""
    budget = (
        f"; each generation thinks at most {think_tokens} of its {max_new_tokens} new tokens"
        if think_tokens
        else ""
    )
    return (
        f'<div class="ev-estimate" data-seconds="{seconds:.0f}">Estimate: about {seconds:.0f} s at '
        f"{speed.decode:.0f} tokens/s (time limit {limit_seconds:.0f} s){esc(over)}{esc(budget)}{note}</div>"
    )


NOTHING_COMMITTED = (
    "No environment: nothing will be committed. The N rehearsals run first and take their time, then the "
    "committed run's calls are only checked against the schema, never executed. Imagine shows the rehearsals "
    "alone; pick an environment (or manual) to commit for real."
)
