"""What every tab shares: the app context, the sampling controls, waiting for the model."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Generator

import gradio as gr

from envace_demo import budget as budget_mod
from envace_demo.engine import MODES
from envace_demo.errors import ModelError, StorageError
from envace_demo.models.base import Backend, Sampling
from envace_demo.settings import Settings
from envace_demo.ui import render
from envace_demo.ui.holder import ModelHolder
from envace_demo.ui.inputs import SEED_MAX, reasoning_budget
from envace_demo.ui.options import UIOptions
from envace_demo.ui.session import Session

NO_SESSION = "this page's session is not ready yet: reload the page"
MODEL_QUEUE = "model"  # concurrency_id of every event that runs the model
# A manual-environment run waits on a person between generations: it holds no model slot
# (the backend's own lock orders its generations with everybody else's), only one of these.
MANUAL_QUEUE = "manual"
MANUAL_RUNS = 4
_DEFAULT = Sampling()


class EpisodeSeconds:
    """Seconds per episode measured on this app's model, by mode (the suite's estimate).
    One per app (``AppContext``): a measurement of the model every visitor shares, kept
    with the app that made it rather than in a module's globals."""

    def __init__(self) -> None:
        self._seen: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def observe(self, rec: dict) -> None:
        """An eval record's seconds, unless it failed (an error is not a measurement)."""
        if not rec.get("error") and rec.get("seconds"):
            with self._lock:
                self._seen.setdefault(rec["mode"], []).append(float(rec["seconds"]))

    def means(self) -> dict[str, float]:
        """Mode -> the mean seconds of its episodes so far."""
        with self._lock:
            return {m: sum(v) / len(v) for m, v in self._seen.items() if v}


@dataclass
class AppContext:
    settings: Settings
    options: UIOptions
    holder: ModelHolder
    speeds: EpisodeSeconds = field(default_factory=EpisodeSeconds)

    def model_event(self) -> dict[str, Any]:
        """Keyword arguments for an event that runs the model: one shared queue."""
        return {"concurrency_id": MODEL_QUEUE, "concurrency_limit": self.options.concurrency}

    def manual_event(self) -> dict[str, Any]:
        """A UI event that runs the manual environment: its own queue, not the model's."""
        return {"concurrency_id": MANUAL_QUEUE, "concurrency_limit": MANUAL_RUNS, "show_progress": "hidden",
                "api_visibility": "private"}

    def streamed_event(self) -> dict[str, Any]:
        """A UI event that runs the model and draws its own progress (no overlay on every output)."""
        return {**self.model_event(), "show_progress": "hidden", "api_visibility": "private"}

    def run_settings(self) -> Settings:
        """The settings a run goes by: the time limit (and any step or token value left
        at its default) fitted to the loaded model's measured speed."""
        return budget_mod.apply(self.settings, self.holder.status().budget)


@dataclass
class SamplingControls:
    temperature: gr.Slider
    top_p: gr.Slider
    top_k: gr.Slider
    max_new_tokens: gr.Slider
    seed: gr.Number
    max_steps: gr.Slider
    constrained: gr.Checkbox

    def inputs(self) -> list[gr.components.Component]:
        """In RunRequest's order after ``n``."""
        return [
            self.temperature,
            self.top_p,
            self.top_k,
            self.max_new_tokens,
            self.seed,
            self.constrained,
            self.max_steps,
        ]


def sampling_controls(ctx: AppContext, open: bool = False) -> SamplingControls:
    """The sampling accordion, with the EnvACE model card's defaults."""
    opts, settings = ctx.options, ctx.settings
    with gr.Accordion("Sampling and decoding", open=open):
        with gr.Row():
            temperature = gr.Slider(
                0.0, 2.0, value=_DEFAULT.temperature, step=0.05, label="temperature",
                info="the actor's; a rehearser with an adapter of its own (the CPU default) rehearses greedily",
            )
            top_p = gr.Slider(0.05, 1.0, value=_DEFAULT.top_p, step=0.05, label="top_p")
            top_k = gr.Slider(0, 200, value=_DEFAULT.top_k, step=1, label="top_k")
        with gr.Row():
            max_new_tokens = gr.Slider(
                16,
                opts.max_new_tokens,
                value=min(settings.max_new_tokens, opts.max_new_tokens),
                step=16,
                label="max new tokens (per generation)",
            )
            max_steps = gr.Slider(
                1,
                opts.max_steps,
                value=min(settings.max_steps, opts.max_steps),
                step=1,
                label="max steps (actor turns)",
            )
            seed = gr.Number(value=0, precision=0, label="seed", minimum=0, maximum=SEED_MAX)
        constrained = gr.Checkbox(
            value=True,
            label="constrained decoding (calls and responses follow the schemas; needs a model loaded with it)",
        )
    return SamplingControls(temperature, top_p, top_k, max_new_tokens, seed, max_steps, constrained)


def json_editor(label: str, elem_id: str, lines: int, max_lines: int | None = None, value: str | None = None) -> gr.Code:
    """An editable JSON box: the tool schemas (the Playground's, the Fine-tune tab's) and the
    manual environment's typed response."""
    return gr.Code(
        value=value, language="json", interactive=True, lines=lines, max_lines=max_lines or lines,
        label=label, elem_id=elem_id,
    )


def mode_radio(value: str = "parallel", modes: tuple[str, ...] = MODES) -> gr.Radio:
    return gr.Radio(
        list(modes),
        value=value,
        label="mode",
        info="none: act for real · parallel: N rehearsals, then commit · sequential: each rehearsal sees the last · imagine: rehearse only",
    )


def await_model(
    holder: ModelHolder, options: UIOptions, show: Callable[[str], Any]
) -> Generator[Any, None, Backend]:
    """Yield ``show(status_html)`` while the model loads; return the backend (ModelError if it failed)."""
    started = time.monotonic()
    while True:
        st = holder.status()
        if st.state != "loading":
            break
        if time.monotonic() - started > options.model_wait_seconds:
            raise ModelError(
                f"the model is still loading after {options.model_wait_seconds:.0f} s; try again shortly"
            )
        yield show(render.status_html(f"waiting for the model to load ({st.seconds:.0f} s so far)…", "busy"))
        time.sleep(0.5)
    return holder.wait(timeout=0.0)


class Throttle:
    """True at most every ``seconds``: streaming text need not redraw the page 10 times a second."""

    def __init__(self, seconds: float = 0.25):
        self.seconds = seconds
        self._last = 0.0

    def __call__(self) -> bool:
        now = time.monotonic()
        if now - self._last >= self.seconds:
            self._last = now
            return True
        return False


def stop_session(session: Session | None) -> None:
    """Stop's handler: set the visitor's cancel switch (it runs outside the queue, at once)."""
    if session is not None:
        session.stop()


def estimate_for(
    ctx: AppContext, mode: str, n: float, max_steps: float, max_new_tokens: float, environment: str | None = None
) -> str:
    """The estimate line for these control values on the loaded model; ``environment``
    (the picker's value, where the tab has one) "none" says that nothing will be committed."""
    from envace_demo.ui.inputs import NO_ENVIRONMENT

    settings = ctx.run_settings()
    return render.estimate_html(
        ctx.holder.status().speed,
        mode,
        int(n),
        int(max_steps),
        int(max_new_tokens),
        settings.episode_seconds,
        reasoning=settings.think_chars != 0,
        think_tokens=reasoning_budget(settings.think_tokens, int(max_new_tokens)),
        executed=environment != NO_ENVIRONMENT,
    )


def saved_download(
    ctx: AppContext, session: Session, name: str, records: dict, status: str
) -> tuple[str | None, str]:
    """(download path, status) of ``records`` as a visitor may see them; a disk that cannot
    take them leaves no file and says so in the status, the panels drawn as they are."""
    try:
        return session.save_json(name, ctx.options.redact(records)), status
    except StorageError as err:
        return None, render.status_html(ctx.options.redact(str(err)), "error")


def off_while_running(
    button: gr.Button, trigger: Callable, fn: Callable, inputs: list, outputs: list,
    then: tuple[Callable, dict[str, Any]] | None = None, **event: Any,
):
    """Run ``fn`` on ``trigger`` with ``button`` off meanwhile: disabled first, outside the
    queue, then enabled again after the job ends however it ends (.then runs after an error too).
    ``then``: a second handler (and its event options) on the same inputs and outputs, after ``fn``."""
    private: dict[str, Any] = {"api_visibility": "private"}
    started = trigger(lambda: gr.Button(interactive=False), None, [button], queue=False, **private)
    ran = started.then(fn, inputs, outputs, **event)
    if then is not None:
        ran = ran.then(then[0], inputs, outputs, **then[1])
    ran.then(lambda: gr.Button(interactive=True), None, [button], queue=False, **private)


def fit_to_model(
    ctx: AppContext,
    n: gr.Slider,
    sampling: SamplingControls,
    mode: gr.Radio,
    estimate: gr.HTML,
    environment: gr.Dropdown | None = None,
) -> gr.Timer:
    """Wire a tab's controls to the model's budget: once the model is loaded and timed,
    N, max steps and max new tokens take the values fitted to it (a timer polls until
    then, and stops); the estimate follows every change of the controls (and of the
    ``environment`` picker, where the tab has one)."""
    timer = gr.Timer(1.0)
    private: dict[str, Any] = {"queue": False, "show_progress": "hidden", "api_visibility": "private"}

    def fit(mode_value: str, environment_value: str | None = None) -> dict:
        st = ctx.holder.status()
        if st.state == "loading":
            return {timer: gr.skip()}  # an update for a declared output: nothing changes yet
        update: dict = {timer: gr.Timer(active=False)}
        if st.budget is not None:
            # Values the operator set on purpose are kept (budget.apply), within the caps.
            settings = ctx.run_settings()
            n_value = min(st.budget.n, ctx.options.max_n)
            steps_value = min(settings.max_steps, ctx.options.max_steps)
            tokens_value = min(settings.max_new_tokens, ctx.options.max_new_tokens)
            if st.plan is not None and st.plan.mode in [c[0] for c in mode.choices]:
                mode_value = st.plan.mode  # the hardware plan's (ZeroGPU: what one call holds)
                update[mode] = gr.Radio(value=mode_value)
            update |= {
                n: gr.Slider(value=n_value),
                sampling.max_steps: gr.Slider(value=steps_value),
                sampling.max_new_tokens: gr.Slider(value=tokens_value),
                estimate: estimate_for(ctx, mode_value, n_value, steps_value, tokens_value, environment_value),
            }
        return update

    picked = [environment] if environment is not None else []
    timer.tick(fit, [mode, *picked], [timer, n, sampling.max_steps, sampling.max_new_tokens, estimate, mode], **private)
    controls = [mode, n, sampling.max_steps, sampling.max_new_tokens, *picked]
    for control in controls:
        control.change(lambda *values: estimate_for(ctx, *values), controls, [estimate], **private)
    return timer
