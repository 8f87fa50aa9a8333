"""The Fine-tune tab: role-wise GRPO on a small tool schema, with live per-role curves.

One training job per app (``TrainingSlot``), on a background thread and on a copy of
the weights: the model everyone else is served stays as it was until someone presses
"Apply". A timer redraws the progress, the curves and the before/after table while
the job runs, for every page that has the tab open. Off in public mode.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr

from envace_demo.errors import ConfigError, EnvaceError, TaskError
from envace_demo.policy import DEFAULT_POLICY, InputPolicy
from envace_demo.schemas import load_tools
from envace_demo.train.config import TrainConfig
from envace_demo.train.data import DATA_DIR, split_tasks, task_set
from envace_demo.train.events import EvalResult, Progress
from envace_demo.train.job import TrainingJob, TrainingSlot
from envace_demo.ui import render
from envace_demo.ui.common import AppContext, json_editor
from envace_demo.ui.inputs import example_tools, gallery
from envace_demo.ui.train_charts import training_curves

log = logging.getLogger(__name__)

OWN = "own"
LORA_RANKS = [4, 8, 16, 32]
MAX_STEPS = 64
_RECIPE = TrainConfig.cpu_recipe()  # the defaults shown: measured on CPU with the embedded model
_STAGES = {
    "eval_before": "evaluating the held-out tasks before training",
    "rollout": "rollouts (actor and rehearser, no real tools)",
    "update": "updating the LoRA weights",
    "eval_after": "evaluating the held-out tasks after training",
    "save": "saving the adapter",
}
OFF_IN_PUBLIC = "Fine-tuning is off in public mode: it would hold this shared machine for minutes."


START_BASE, START_ADAPTER = "base", "adapter"
START_CHOICES = [("base weights", START_BASE), ("the served adapter", START_ADAPTER)]


def continues(start_from: str, backend: Any) -> bool:
    """Whether training continues the adapter ``backend`` serves (none served: from base)."""
    return start_from == START_ADAPTER and getattr(backend, "adapter", None) is not None


def source_choices() -> list[tuple[str, str]]:
    drills = sorted(p.name.removesuffix("_drills.jsonl") for p in DATA_DIR.glob("*_drills.jsonl"))
    choices = [(f"{env}: drills (single-call tasks, 6 held out)", f"drills:{env}") for env in drills]
    choices += [(f"{env}: example tasks", f"env:{env}") for env in gallery()]
    return choices + [("your own: tools + a JSONL of tasks", OWN)]


def load_source(
    source: str, tools_text: str, tasks_file: str | None, policy: InputPolicy = DEFAULT_POLICY
) -> tuple[list, list]:
    """(training tasks, held-out tasks) of the picked source; TaskError/SchemaError if unusable."""
    if source == OWN:
        if not tasks_file:
            raise TaskError('upload a JSONL of tasks (each with a "check"; mark held-out ones "split": "heldout")')
        load_tools(tools_text or "", policy)  # a located schema error, before any task is read
        tasks = task_set(tasks_file=tasks_file, tools=json.loads(tools_text), policy=policy)
    else:
        kind, _, env = source.partition(":")
        if kind not in ("drills", "env") or not env:
            raise TaskError(f"unknown task source {source!r}")
        tasks = task_set(env=env, drills=kind == "drills")
    return split_tasks(tasks)


def config_for(
    device: str, steps: float, group: float, lr: float, rank: Any, seed: float, with_rehearsal: bool = False
) -> TrainConfig:
    """The device's configuration (``TrainConfig.for_device``), then the controls.
    ``with_rehearsal``: evaluate the held-out tasks with one rehearsal too."""
    try:
        return TrainConfig.for_device(
            device,
            steps=int(steps),
            group_size=int(group),
            lr=float(lr),
            lora_rank=int(rank),
            seed=int(seed or 0),
            eval_rehearsals=1 if with_rehearsal else 0,
        )
    except (TypeError, ValueError) as err:
        raise ConfigError(f"training settings: {err}") from None


def progress_html(job: TrainingJob) -> str:
    p: Progress | None = job.progress
    total = job.config.steps
    if job.error is not None:
        return ""
    if p is None:
        return render.status_html("starting…", "busy")
    # Rough share of the run: evaluations a tenth each, the steps the rest.
    within = p.done / p.total if p.total else 0.0
    if p.stage == "eval_before":
        share = 0.1 * within
    elif p.stage in ("rollout", "update"):
        part = 0.8 * within if p.stage == "rollout" else 0.8 + 0.2 * within
        share = 0.1 + 0.8 * (p.step - 1 + part) / total
    elif p.stage == "eval_after":
        share = 0.9 + 0.1 * within
    else:
        share = 1.0
    where = f"step {p.step}/{total}: " if p.stage in ("rollout", "update") else ""
    label = f"{where}{_STAGES.get(p.stage, p.stage)} ({p.done}/{p.total})"
    return (
        f'<div class="ev-train-progress"><progress max="1" value="{share:.3f}"></progress>'
        f"<span>{render.esc(label)}</span></div>"
    )


CUT = "cut by Stop"


def eval_table(before: EvalResult | None, after: EvalResult | None, stopped: bool = False) -> list[list[Any]]:
    """Rows: held-out success without and with rehearsal, before and after, and the
    change; ``stopped``: Stop ended the run, so the evaluation after it never ran."""
    missing = CUT if stopped else "–"

    def pct(value: float | None, empty: str = "–") -> str:
        return empty if value is None else f"{100 * value:.0f}%"

    rows = []
    for label, key in (("success without rehearsal", "success_without"), ("success with rehearsal", "success_with")):
        b = getattr(before, key) if before else None
        a = getattr(after, key) if after else None
        if b is None and a is None and before is not None:
            continue  # that mode was not evaluated in this run
        change = f"{100 * (a - b):+.0f} pts" if a is not None and b is not None else "–"
        rows.append([label, pct(b), pct(a, missing), change])
    if before is not None:
        rows.append(["held-out tasks", str(before.tasks), str(after.tasks if after else missing), ""])
    return rows


def job_status(job: TrainingJob, redact) -> str:
    if job.error is not None:
        message = str(job.error) if isinstance(job.error, EnvaceError) else f"{type(job.error).__name__}: {job.error}"
        return render.status_html(f"training failed: {redact(message)}", "error")
    if job.running:
        return render.status_html("training…", "busy")
    result = job.result
    if result is None:
        return render.status_html("training ended without a result", "error")
    saved = "adapter saved" if result.adapter_dir else "no step finished, nothing saved"
    if result.stopped:
        cut = "; Stop cut the final evaluation (no after figures)" if result.before is not None else ""
        return render.status_html(
            f"stopped: {result.steps_done} steps in {result.seconds:.0f} s, {saved}{cut}", "warn"
        )
    return render.status_html(f"done: {result.steps_done} steps in {result.seconds:.0f} s, {saved}", "ok")


def adapter_zip(job: TrainingJob) -> str | None:
    """The adapter folder as a zip for download (made once per run)."""
    result = job.result
    if result is None or result.adapter_dir is None:
        return None
    folder = Path(tempfile.gettempdir()) / "envace-adapters"
    folder.mkdir(exist_ok=True)
    base = folder / f"{result.out_dir.name}-adapter"
    path = base.with_suffix(".zip")
    if not path.exists():  # whole or not at all: a full disk leaves no half zip that counts as done
        partial = folder / f".{base.name}-{os.getpid()}-{threading.get_ident()}"
        try:
            os.replace(shutil.make_archive(str(partial), "zip", result.adapter_dir), path)
        except OSError as err:
            partial.with_suffix(".zip").unlink(missing_ok=True)
            log.warning("adapter zip not written: %s", err)
            return None
    return str(path)


@dataclass
class TrainControls:
    """The left column: what to train on, how, and the buttons that start and stop it."""

    source: gr.Dropdown
    own_box: gr.Accordion
    own_tools: gr.Code
    own_tasks: gr.File
    start_from: gr.Radio
    steps: gr.Slider
    group: gr.Slider
    lr: gr.Number
    rank: gr.Dropdown
    seed: gr.Number
    with_rehearsal: gr.Checkbox
    train: gr.Button
    stop: gr.Button
    status: gr.HTML
    progress: gr.HTML

    def inputs(self) -> list[gr.components.Component]:
        """In ``TrainHandlers.start``'s order: the source, then ``config_for``'s values."""
        return [
            self.source, self.own_tools, self.own_tasks, self.start_from,
            self.steps, self.group, self.lr, self.rank, self.seed, self.with_rehearsal,
        ]


@dataclass
class TrainResults:
    """The right column: curves, the before/after table and what to do with the adapter."""

    curves: gr.Plot
    table: gr.Dataframe
    download: gr.DownloadButton
    apply: gr.Button
    remove: gr.Button
    applied: gr.HTML


@dataclass
class TrainTab:
    controls: TrainControls
    results: TrainResults
    timer: gr.Timer
    drawn: gr.State  # how many metric rows this page has drawn


def _own_source() -> tuple[gr.Accordion, gr.Code, gr.File]:
    with gr.Accordion("Your own tools and tasks", open=False) as own_box:
        own_tools = json_editor("tools", "train-tools", lines=10, value=example_tools(next(iter(gallery()))))
        own_tasks = gr.File(
            label='JSONL of tasks (a "check" each; "split": "heldout" for evaluation)',
            file_types=[".jsonl"],
            type="filepath",
            height=110,
            elem_id="train-tasks",
        )
    return own_box, own_tools, own_tasks


def _train_controls(allowed: bool) -> TrainControls:
    choices = source_choices()
    source = gr.Dropdown(choices, value=choices[0][1], label="tasks", elem_id="train-source")
    own_box, own_tools, own_tasks = _own_source()
    start_from = gr.Radio(
        START_CHOICES, value=START_ADAPTER, label="start from", elem_id="train-start-from",
        info="the served adapter (the shipped demo-cpu one by default) is trained further and the saved "
        "adapter holds both; base: a new adapter on the untrained weights",
    )
    with gr.Row():
        steps = gr.Slider(1, MAX_STEPS, value=_RECIPE.steps, step=1, label="steps", elem_id="train-steps")
        group = gr.Slider(2, 16, value=_RECIPE.group_size, step=1, label="group size", elem_id="train-group")
    with gr.Row():
        lr = gr.Number(value=_RECIPE.lr, label="learning rate (LoRA)", minimum=1e-6, maximum=0.1)
        rank = gr.Dropdown(LORA_RANKS, value=_RECIPE.lora_rank, label="LoRA rank")
        seed = gr.Number(value=_RECIPE.seed, precision=0, minimum=0, label="seed", elem_id="train-seed")
    with_rehearsal = gr.Checkbox(
        value=False,
        label="evaluate with rehearsal too (before and after; several times slower on CPU)",
        elem_id="train-with-rehearsal",
    )
    gr.Markdown(
        "*On CPU the rest follows the measured CPU recipe (one task a step, LoRA on the last "
        "4 layers, rollouts at temperature 0.7); on a GPU the paper-like defaults.*"
    )
    with gr.Row():
        train = gr.Button("Train", variant="primary", interactive=allowed, elem_id="train-button")
        stop = gr.Button("Stop", variant="stop", interactive=allowed, elem_id="train-stop")
    status = gr.HTML(elem_id="train-status")
    progress = gr.HTML(elem_id="train-progress")
    return TrainControls(
        source, own_box, own_tools, own_tasks, start_from, steps, group, lr, rank, seed, with_rehearsal,
        train, stop, status, progress,
    )


def _train_results(allowed: bool) -> TrainResults:
    curves = gr.Plot(training_curves([]), show_label=False, elem_id="train-curves")
    table = gr.Dataframe(
        headers=["held-out", "before", "after", "change"],
        label="before / after (same run, same seeds)",
        interactive=False,
        elem_id="train-eval",
    )
    with gr.Row():
        download = gr.DownloadButton("Download the adapter (zip)", interactive=False)
        apply = gr.Button("Apply to the Playground model", interactive=False, elem_id="train-apply")
        remove = gr.Button("Remove the adapter", interactive=allowed)
    applied = gr.HTML(elem_id="train-applied")
    return TrainResults(curves, table, download, apply, remove, applied)


def _train_layout(allowed: bool) -> TrainTab:
    gr.Markdown(
        "Role-wise GRPO on a small tool schema, through LoRA on the loaded model. Rollouts are "
        "world rehearsal: the actor acts and the same policy rehearses every tool response, no real "
        "tool runs. Reward is task success only; advantages are computed per role within each group. "
        "Held-out tasks are evaluated before and after, in the same run."
    )
    if not allowed:
        gr.Markdown(f"*{OFF_IN_PUBLIC}*")
    with gr.Row(equal_height=False):
        with gr.Column(scale=2, min_width=320):
            controls = _train_controls(allowed)
        with gr.Column(scale=3):
            results = _train_results(allowed)
    # Active at first, so a page opened during a run picks it up; idle, one tick turns it off.
    timer = gr.Timer(1.0, active=True)
    return TrainTab(controls, results, timer, gr.State(-1))


class TrainHandlers:
    """The tab's events: they start, follow, stop and apply the app's one training job."""

    def __init__(self, ctx: AppContext, tab: TrainTab, slot: TrainingSlot):
        self.ctx, self.tab, self.slot = ctx, tab, slot
        self.allowed = ctx.options.allow_training

    def start(self, src: str, tools_text: str, tasks_file: str | None, start_from: str, *values: Any) -> dict:
        ctx, c, r = self.ctx, self.tab.controls, self.tab.results
        if not ctx.options.allow_training:
            return {c.status: render.status_html(OFF_IN_PUBLIC, "error")}
        st = ctx.holder.status()
        if st.state != "ready":
            msg = "the model is still loading; try again shortly" if st.state == "loading" else st.error
            return {c.status: render.status_html(ctx.options.redact(f"cannot train: {msg}"), "error")}
        training = st.plan.training if st.plan is not None else None
        if training is not None and not training.available:  # the hardware plan says why (ZeroGPU: off)
            return {c.status: render.status_html(f"cannot train here: {training.reason}", "error")}
        try:
            backend = ctx.holder.wait(timeout=0.0)
            train_tasks, heldout = load_source(src, tools_text, tasks_file, ctx.options.input_policy)
            config = config_for(backend.info.device, *values).fitted_to(backend)
            out_dir = Path(ctx.settings.cache_dir) / "runs" / time.strftime("run-%Y%m%d-%H%M%S")
            self.slot.start(
                backend, train_tasks, heldout, config, out_dir, continue_adapter=continues(start_from, backend)
            )
        except EnvaceError as err:
            return {c.status: render.status_html(ctx.options.redact(str(err)), "error")}
        return {
            c.status: render.status_html(
                f"training on {len(train_tasks)} tasks, {len(heldout)} held out…", "busy"
            ),
            c.progress: render.status_html("starting…", "busy"),
            self.tab.drawn: -1,
            self.tab.timer: gr.Timer(active=True),
            c.train: gr.Button(interactive=False),
            r.download: gr.DownloadButton(value=None, interactive=False),
            r.apply: gr.Button(interactive=False),
        }

    def refresh(self, count: int) -> dict:
        job, c, r = self.slot.job, self.tab.controls, self.tab.results
        if job is None:
            return {self.tab.timer: gr.Timer(active=False)}
        rows = job.metrics
        finished = not job.running
        update: dict = {
            c.progress: "" if finished else progress_html(job),
            r.table: gr.Dataframe(
                value=eval_table(job.before, job.after, stopped=job.result is not None and job.result.stopped)
            ),
            self.tab.timer: gr.Timer(active=not finished),
            c.train: gr.Button(interactive=self.allowed and finished),
        }
        if len(rows) != count or finished:  # redraw only when there is something new
            update[r.curves] = training_curves(rows, job.config.steps)
            update[self.tab.drawn] = len(rows)
        if finished:
            update[c.status] = job_status(job, self.ctx.options.redact)
            ready = job.result is not None and job.result.adapter_dir is not None
            update[r.download] = gr.DownloadButton(
                value=adapter_zip(job) if ready else None, interactive=ready
            )
            update[r.apply] = gr.Button(interactive=self.allowed and ready)
        return update

    def stop_training(self) -> str:
        job = self.slot.job
        if job is None or not job.running:
            return render.status_html("no training is running", "info")
        job.stop()
        return render.status_html(
            "stopping: the step in progress is dropped, the steps done are kept…", "busy"
        )

    def apply_adapter_now(self) -> str:
        from envace_demo.train.adapter import apply_adapter

        ctx = self.ctx
        if not ctx.options.allow_training:
            raise gr.Error(OFF_IN_PUBLIC)
        job = self.slot.job
        if job is None or job.result is None or job.result.adapter_dir is None:
            return render.status_html("no adapter yet: train first", "error")
        try:
            backend = ctx.holder.wait(timeout=0.0)
            apply_adapter(backend, job.result.adapter_dir)
            ctx.holder.set_adapter(job.result.out_dir.name)
        except EnvaceError as err:
            return render.status_html(ctx.options.redact(str(err)), "error")
        return render.status_html(
            f"applied: the Playground and Compare now run {backend.info.model_id} with the adapter of "
            f"{job.result.out_dir.name}",
            "ok",
        )

    def remove_adapter_now(self) -> str:
        from envace_demo.train.adapter import has_adapter, remove_adapter

        ctx = self.ctx
        if not ctx.options.allow_training:
            raise gr.Error(OFF_IN_PUBLIC)
        try:
            backend = ctx.holder.wait(timeout=0.0)
            if not has_adapter(backend):
                return render.status_html("no adapter is applied", "info")
            remove_adapter(backend)
            ctx.holder.set_adapter(None)
        except EnvaceError as err:
            return render.status_html(ctx.options.redact(str(err)), "error")
        return render.status_html(f"removed: back to the base weights of {backend.info.model_id}", "ok")


def _wire(ctx: AppContext, tab: TrainTab, on: TrainHandlers) -> None:
    c, r = tab.controls, tab.results
    private: dict[str, Any] = {"api_visibility": "private"}
    outputs = [c.status, c.progress, tab.drawn, tab.timer, c.train, r.download, r.apply]
    c.train.click(on.start, c.inputs(), outputs, queue=False, **private)
    ticked = [c.progress, r.table, tab.timer, c.train, r.curves, tab.drawn, c.status, r.download, r.apply]
    tab.timer.tick(on.refresh, [tab.drawn], ticked, queue=False, show_progress="hidden", **private)
    c.stop.click(on.stop_training, None, [c.status], queue=False, **private)
    # Swapping weights waits for a running generation: the model queue.
    r.apply.click(on.apply_adapter_now, None, [r.applied], **ctx.model_event(), **private)
    r.remove.click(on.remove_adapter_now, None, [r.applied], **ctx.model_event(), **private)
    c.source.change(lambda s: gr.Accordion(open=s == OWN), [c.source], [c.own_box], queue=False, **private)


def build_train_tab(ctx: AppContext) -> gr.HTML:
    """The tab; returns the line that says which adapter was applied or removed."""
    tab = _train_layout(ctx.options.allow_training)
    _wire(ctx, tab, TrainHandlers(ctx, tab, TrainingSlot()))
    return tab.results.applied
