"""The Model tab: what is loaded, loading another one, and the method in brief."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, get_args

import gradio as gr

from envace_demo.errors import EnvaceError
from envace_demo.plan import FLAVOR_NAMES, describe, plan
from envace_demo.models.hardware import DEFAULT_GPU_MODEL, EMBEDDED, ENVACE_SMALL, QWEN3_SMALL
from envace_demo.settings import Quantization
from envace_demo.ui import render
from envace_demo.ui.common import AppContext

QUANTIZATIONS = list(get_args(Quantization))


def model_choices(current: str | None, small_model: str) -> list[str]:
    """The models offered by name (any hub id or local path may be typed too): the small
    CPU ones, the Qwen3-family ones the 8B's template and tokens fit, and the EnvACE models."""
    choices = [EMBEDDED, small_model, *QWEN3_SMALL, ENVACE_SMALL, DEFAULT_GPU_MODEL]
    if current and current not in choices:
        choices.insert(0, current)
    return choices

# Restated from the paper (arXiv 2608.06197), sections "test-time rehearsal" and "results".
METHOD_MD = """
### EnvACE in brief

One policy plays **two roles** with the same weights. As the **actor** it reads the
conversation and the tool schemas, reasons in `<think>`, then emits `<tool_call>` blocks
or a final answer. As the **rehearser** it is prompted as the environment: given the
tools, the real results seen so far, the conversation and the actor's latest message, it
first validates the call (format, tool name, arguments) and then predicts the tool's
response inside `<execution_result>`. Training (role-wise GRPO) rewards only task
success and never queries a real tool: every response the actor sees during training is
its own rehearsal, so the model learns how its environment behaves.

At test time that world model lets the agent **rehearse before it acts**:

- **parallel**: N imagined trajectories from the same start (actor and rehearser
  alternating, nothing real), condensed into a rehearsal memory;
- **sequential**: attempt k sees what attempts 1..k-1 tried and revises;
- then **one committed execution** against the real environment, guided by the memory
  (here withdrawn once a real response contradicts its rehearsal).

This demo rehearses every committed call too, so each step shows the predicted and the
real response side by side, with a fidelity score.

#### Test-time rehearsal (paper, success %)

| rehearsal | τ²-Bench | BFCL multi-turn | overall |
|---|---|---|---|
| none | 31.4 | 41.9 | 36.7 |
| parallel | 38.0 | 43.9 | 40.9 |
| sequential | 34.8 | 42.3 | 38.5 |

With the base policy (Qwen3-8B, not trained to rehearse) the same procedure changed the
overall score by +0.1 (parallel) and −1.8 (sequential): rehearsal pays only when the
model's world model is worth rehearsing with.

#### Headline results (paper)

| model | BFCL v4 | τ²-Bench | VitaBench | overall |
|---|---|---|---|---|
| Qwen3-8B | 44.04 | 30.0 | 11.4 | 28.48 |
| AWM-14B | 47.32 | 30.7 | 19.6 | 32.54 |
| EnvScaler-8B | 47.07 | 32.9 | 15.8 | 31.92 |
| **EnvACE-8B** | 46.04 | **36.7** | 16.0 | **32.91** |

EnvACE-8B also reaches a TF1 of 46.78 on FinMCP-Bench.

Source: *EnvACE: Internalizing Environment Dynamics via World Rehearsal for Agentic
Reinforcement Learning*, arXiv [2608.06197](https://arxiv.org/abs/2608.06197) (2026);
model [`Team-ACE/EnvACE-Qwen3-8B`](https://huggingface.co/Team-ACE/EnvACE-Qwen3-8B).
The numbers are the paper's, not measured by this demo.
"""


ADAPTER_CHOICES = [("the shipped demo-cpu adapter", "demo-cpu"), ("none: the base weights", "none")]


def serves_shipped(ctx: AppContext) -> bool:
    """Whether the settings serve the shipped adapter (the embedded model's default)."""
    from envace_demo.models.embedded import shipped_adapter
    from envace_demo.models.loader import adapter_for

    folder = adapter_for(ctx.settings.model or EMBEDDED, ctx.settings.adapter)
    return folder is not None and folder == shipped_adapter()


def switch_adapter(ctx: AppContext, choice: str) -> str:
    """Serve the loaded local model with ``choice`` (``"demo-cpu"`` or ``"none"``); the
    status line to show. Only these two: a visitor never names a folder on the server."""
    from envace_demo.models.loader import adapter_for
    from envace_demo.train.adapter import apply_adapter, has_adapter, remove_adapter

    if not ctx.options.allow_model_switch:
        raise gr.Error("switching the adapter is off in public mode: the model is shared by every visitor")
    if choice not in dict((v, k) for k, v in ADAPTER_CHOICES):
        return render.status_html(f"adapter: expected demo-cpu or none, got {choice!r}", "error")
    try:
        backend = ctx.holder.wait(timeout=0.0)
        folder = adapter_for(EMBEDDED, choice)
        if folder is None:
            if has_adapter(backend):
                remove_adapter(backend)
            ctx.holder.set_adapter(None)
        else:
            apply_adapter(backend, folder)
            ctx.holder.set_adapter(choice)
    except EnvaceError as err:
        return render.status_html(ctx.options.redact(str(err)), "error")
    return render.status_html(f"now serving {backend.info.model_id}: the Playground and Compare use it", "info")


def model_info(ctx: AppContext) -> dict:
    st = ctx.holder.status()
    info = dict(st.info or {})
    info.update({"state": st.state, "requested": st.model, "load_seconds": round(st.seconds, 1)})
    if st.error:
        info["error"] = st.error
    if st.plan is not None:  # the hardware plan the run defaults follow
        info["plan"] = st.plan.to_dict()
    return ctx.options.redact(info)


PLAN_MODELS = (DEFAULT_GPU_MODEL, ENVACE_SMALL, EMBEDDED)


def plan_markdown(flavor: str, model: str, gpu_size: str = "auto") -> str:
    """``python -m envace_demo plan --hardware FLAVOR --model MODEL``, as the tab shows it."""
    try:
        text = describe(plan(flavor, model, gpu_size=gpu_size))
    except EnvaceError as err:
        return f"*{err}*"
    size = f" --gpu-size {gpu_size}" if gpu_size != "auto" else ""
    return f"```text\n{text}\n```\n`python -m envace_demo plan --hardware {flavor} --model {model}{size}`"


def this_plan_markdown(ctx: AppContext) -> str:
    st = ctx.holder.status()
    if st.plan is not None:
        return plan_markdown(st.plan.hardware, st.plan.model, ctx.settings.gpu_size if st.plan.gpu_size else "auto")
    if st.state == "loading":
        return "*the plan follows once the model is loaded*"
    return (
        "*no hardware plan here (a CPU, or a card or model the plan does not know): "
        "the run defaults are fitted to the measured speed*"
    )


@dataclass
class ModelTab:
    """The tab's components: the loaded model, loading another, the adapter, the plans."""

    info: gr.JSON
    model: gr.Dropdown
    quant: gr.Dropdown
    load: gr.Button
    load_status: gr.HTML
    adapter: gr.Radio
    apply: gr.Button
    adapter_status: gr.HTML
    here: gr.Markdown
    flavor: gr.Dropdown
    planned_model: gr.Dropdown
    other: gr.Markdown


def _load_controls(ctx: AppContext) -> tuple[gr.Dropdown, gr.Dropdown, gr.Button, gr.HTML]:
    """(model, quantization, Load, its status)."""
    gr.Markdown("### Load or switch")
    allowed = ctx.options.allow_model_switch
    model = gr.Dropdown(
        model_choices(ctx.settings.model, ctx.settings.small_model),
        value=ctx.settings.model or EMBEDDED,
        allow_custom_value=True,
        label="model (pick one, or type a hub id or local path)",
        interactive=allowed,
    )
    quant = gr.Dropdown(
        QUANTIZATIONS,
        value=ctx.settings.quantization or "none",
        label="quantization (bitsandbytes, GPU)",
        interactive=allowed,
    )
    load = gr.Button("Load model", variant="primary", interactive=allowed)
    if not allowed:
        gr.Markdown("*Switching models is off in public mode: the model is shared by every visitor.*")
    return model, quant, load, gr.HTML()


def _adapter_controls(ctx: AppContext) -> tuple[gr.Radio, gr.Button, gr.HTML]:
    """(adapter choice, Apply, its status)."""
    gr.Markdown("### Adapter")
    allowed = ctx.options.allow_model_switch
    adapter = gr.Radio(
        ADAPTER_CHOICES,
        value="demo-cpu" if serves_shipped(ctx) else "none",
        label="LoRA adapter on the loaded model",
        info="demo-cpu: trained by `python -m envace_demo train --recipe demo-cpu` for the embedded "
        "model; Compare can set it against the base weights",
        interactive=allowed,
        elem_id="model-adapter",
    )
    return adapter, gr.Button("Apply", interactive=allowed), gr.HTML()


def _plan_panels(ctx: AppContext) -> tuple[gr.Markdown, gr.Dropdown, gr.Dropdown, gr.Markdown]:
    """(this hardware's plan, a Space flavor, a model, that pair's plan)."""
    gr.Markdown("### Plan for this hardware")
    here = gr.Markdown(this_plan_markdown(ctx), elem_id="model-plan")
    gr.Markdown("### Plan for a Space's hardware")
    with gr.Row():
        flavor = gr.Dropdown(list(FLAVOR_NAMES), value="l4x1", label="hardware flavor")
        planned_model = gr.Dropdown(list(PLAN_MODELS), value=DEFAULT_GPU_MODEL, label="model")
    other = gr.Markdown(plan_markdown("l4x1", DEFAULT_GPU_MODEL), elem_id="model-plan-other")
    return here, flavor, planned_model, other


def _layout(ctx: AppContext) -> ModelTab:
    with gr.Row(equal_height=False):
        with gr.Column(scale=2):
            gr.Markdown("### Loaded model")
            info = gr.JSON(model_info(ctx), label="model", elem_id="model-info")
            loading = _load_controls(ctx)
            adapter = _adapter_controls(ctx)
            plans = _plan_panels(ctx)
        with gr.Column(scale=3):
            gr.Markdown(METHOD_MD)
    return ModelTab(info, *loading, *adapter, *plans)


def _loader(ctx: AppContext, tab: ModelTab, banner: gr.HTML, timer: gr.Timer) -> Callable[[str, str], Iterator[Any]]:
    """Load's handler: the model loads in the background, its progress in the banner."""

    def load_model(name: str, quantization: str) -> Iterator[Any]:
        if not ctx.options.allow_model_switch:
            raise gr.Error("switching models is off in public mode")
        try:
            settings = ctx.settings.replace(
                model=(name or "").strip() or None, quantization=None if quantization == "none" else quantization
            )
            ctx.holder.start(settings)
        except EnvaceError as err:
            yield {tab.load_status: render.status_html(ctx.options.redact(str(err)), "error")}
            return
        started = time.monotonic()
        while ctx.holder.status().state == "loading":
            text = render.status_html(
                f"loading {name or 'the default model'}… {time.monotonic() - started:.0f} s", "busy"
            )
            yield {tab.load_status: text, banner: text, timer: gr.Timer(active=True)}
            time.sleep(0.5)
        st = ctx.holder.status()
        redact = ctx.options.redact
        html = render.model_status_html(st.state, st.model, st.seconds, redact(st.error), redact(st.info))
        yield {tab.load_status: html, banner: html, tab.info: model_info(ctx)}

    return load_model


def _wire(ctx: AppContext, tab: ModelTab, banner: gr.HTML, timer: gr.Timer) -> None:
    private: dict[str, Any] = {"queue": False, "show_progress": "hidden", "api_visibility": "private"}
    for control in (tab.flavor, tab.planned_model):
        control.change(plan_markdown, [tab.flavor, tab.planned_model], [tab.other], **private)
    timer.tick(lambda: this_plan_markdown(ctx), None, [tab.here], **private)

    def on_apply(choice: str) -> tuple[str, dict]:
        return switch_adapter(ctx, choice), model_info(ctx)

    apply_outputs = [tab.adapter_status, tab.info]
    tab.apply.click(on_apply, [tab.adapter], apply_outputs, **ctx.model_event(), api_visibility="private")
    load_outputs = [tab.load_status, banner, timer, tab.info]
    tab.load.click(
        _loader(ctx, tab, banner, timer), [tab.model, tab.quant], load_outputs, **ctx.model_event(),
        api_visibility="private",
    )


def build_model_tab(ctx: AppContext, banner: gr.HTML, timer: gr.Timer) -> gr.JSON:
    """The tab; returns its model-info box (the header's refresh redraws it)."""
    tab = _layout(ctx)
    _wire(ctx, tab, banner, timer)
    return tab.info
