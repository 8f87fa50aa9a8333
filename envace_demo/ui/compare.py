"""The Compare tab: one task without and with rehearsal, side by side; the Suite below it
(``suite``) runs many tasks both ways."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterator

import gradio as gr

from envace_demo.errors import ConfigError, EnvaceError
from envace_demo.evaluation.divergence import pair_note
from envace_demo.events import EpisodeFinished, Generating
from envace_demo.models.loader import adapter_name
from envace_demo.ui import render, runner
from envace_demo.ui.common import (
    NO_SESSION,
    AppContext,
    SamplingControls,
    Throttle,
    await_model,
    fit_to_model,
    off_while_running,
    sampling_controls,
    saved_download,
    stop_session,
)
from envace_demo.ui.fairness import current_job, streamed_until_gone
from envace_demo.ui.inputs import (
    BASELINE,
    REHEARSAL_MODES,
    RunRequest,
    build_config,
    build_task,
    check_prompts,
    compare_modes,
    example_tasks,
    example_tools,
    find_example,
    gallery,
    task_choices,
)
from envace_demo.ui.session import Session
from envace_demo.ui.suite import SuiteView, build_suite


def served_adapter(backend) -> str | None:
    """The name of the adapter ``backend`` serves beside base weights it can run apart
    (None: none, or a backend without adapters)."""
    return adapter_name(backend) if hasattr(backend, "base_weights") else None


_EMPTY = '<div class="ev-empty">Press Compare: the committed steps appear here.</div>'

# What Compare sets side by side: the task without and with rehearsal, or the base
# weights and the served adapter in the same rehearsal mode (same task, seed and sampling).
SIDES_REHEARSAL, SIDES_WEIGHTS = "rehearsal", "weights"
SIDE_CHOICES = [("no rehearsal | rehearsal", SIDES_REHEARSAL), ("base model | trained adapter", SIDES_WEIGHTS)]
BASE_SIDE, TRAINED_SIDE = "base", "trained"


@dataclass(frozen=True)
class Side:
    key: str  # the record's and the table's name for it
    title: str
    mode: str
    base_weights: bool = False


def compare_sides(kind: str, mode_name: str, n: int, adapter: str | None) -> tuple[Side, Side]:
    """The two sides of a Compare run; ``adapter``: the name of the adapter served (None:
    no adapter, so there is no trained side to set against the base one)."""
    if kind == SIDES_WEIGHTS:
        if adapter is None:
            raise ConfigError(
                "compare base and trained: the model is served without an adapter, so both sides would be "
                "the same model; serve one (the Model tab, or --adapter demo-cpu) or compare with and "
                "without rehearsal"
            )
        return (
            Side(BASE_SIDE, f"#### Base model (`{mode_name}`, N={n})", mode_name, base_weights=True),
            Side(TRAINED_SIDE, f"#### Trained: {adapter} (`{mode_name}`, N={n})", mode_name),
        )
    if kind != SIDES_REHEARSAL:
        raise ConfigError(f"compare: expected {SIDES_REHEARSAL!r} or {SIDES_WEIGHTS!r}, got {kind!r}")
    baseline, mode = compare_modes(mode_name)
    return (
        Side(baseline, "#### Without rehearsal (`none`)", baseline),
        Side(mode, f"#### With rehearsal (`{mode_name}`, N={n})", mode),
    )


def _difference(left: Any, right: Any, names: tuple[str, str] = ("without rehearsal", "with rehearsal")) -> str:
    """The right side minus the left one, for one metric of the Compare table; ``names``:
    how the success row names the two sides."""
    if isinstance(left, bool) or isinstance(right, bool):
        if left is None or right is None or left == right:
            return "same" if left == right and left is not None else "—"
        return f"succeeds only {names[1]}" if right else f"succeeds only {names[0]}"
    if isinstance(left, (int, float)) and isinstance(right, (int, float)):
        d = right - left
        return f"{d:+.2f}" if isinstance(d, float) else f"{d:+d}"
    return "—"


def _difference_header(sides: tuple[str, str]) -> str:
    return "difference (rehearsal − none)" if sides[0] == BASELINE else f"difference ({sides[1]} − {sides[0]})"


def _with_difference(by_side: dict[str, dict]) -> tuple[list[str], list[list[Any]]]:
    """The Compare table with a column for the difference between the two sides."""
    headers, rows = render.metrics_table(by_side)
    if len(by_side) != 2:
        return headers, rows
    (left_key, left), (right_key, right) = by_side.items()
    names = ("without rehearsal", "with rehearsal") if left_key == BASELINE else (f"on the {left_key} model", f"on the {right_key} model")
    for row, (key, _) in zip(rows, render.METRIC_ROWS):
        row.append(_difference(left.get(key), right.get(key), names) if key != "ended" else "—")
    return [*headers, _difference_header((left_key, right_key))], rows


@dataclass
class CompareView:
    """One task without and with rehearsal: the controls, then the two sides and their table."""

    env: gr.Dropdown
    task_pick: gr.Dropdown
    rmode: gr.Radio
    n: gr.Slider
    sides: gr.Radio
    sampling: SamplingControls
    go: gr.Button
    stop: gr.Button
    status: gr.HTML
    left_title: gr.Markdown
    left_steps: gr.HTML
    left_outcome: gr.HTML
    right_title: gr.Markdown
    right_steps: gr.HTML
    right_outcome: gr.HTML
    table: gr.Dataframe
    file: gr.DownloadButton

    def inputs(self, state: gr.State) -> list[gr.components.Component]:
        """In ``CompareRun.run_compare``'s order."""
        return [state, self.env, self.task_pick, self.rmode, self.n, self.sides, *self.sampling.inputs()]

    def outputs(self) -> list[gr.components.Component]:
        return [
            self.status, self.left_steps, self.right_steps, self.left_outcome, self.right_outcome,
            self.left_title, self.right_title, self.table, self.file,
        ]


def _compare_sides() -> tuple[gr.Markdown, gr.HTML, gr.HTML, gr.Markdown, gr.HTML, gr.HTML]:
    """(left title, left steps, left outcome, right title, right steps, right outcome)."""
    with gr.Row(equal_height=False):
        with gr.Column():
            left_title = gr.Markdown("#### Without rehearsal (`none`)")
            left_steps, left_outcome = gr.HTML(_EMPTY, elem_id="compare-none"), gr.HTML()
        with gr.Column():
            right_title = gr.Markdown("#### With rehearsal (`parallel`)")
            right_steps, right_outcome = gr.HTML(_EMPTY, elem_id="compare-rehearsal"), gr.HTML()
    return left_title, left_steps, left_outcome, right_title, right_steps, right_outcome


def _compare_layout(ctx: AppContext, envs: list[str]) -> CompareView:
    gr.Markdown(
        "Run one task twice with the same seed and sampling: **without rehearsal** (mode `none`) and "
        "**with rehearsal** (N imagined trajectories, then one committed run)."
    )
    with gr.Row():
        env = gr.Dropdown(envs, value=envs[0], label="environment")
        task_pick = gr.Dropdown(task_choices(envs[0]), value=example_tasks(envs[0])[0].name, label="task")
        rmode = gr.Radio(list(REHEARSAL_MODES), value="parallel", label="rehearsal mode")
        n = gr.Slider(1, ctx.options.max_n, value=2, step=1, label="rehearsal budget N", elem_id="compare-n")
    sides_pick = gr.Radio(
        SIDE_CHOICES,
        value=SIDES_REHEARSAL,
        label="side by side",
        info="base | trained: the served adapter against the same weights without it, both in the rehearsal mode above",
        elem_id="compare-sides",
    )
    sampling = sampling_controls(ctx)
    with gr.Row():
        go = gr.Button("Compare", variant="primary", elem_id="compare-button")
        stop = gr.Button("Stop", variant="stop")
    status = gr.HTML(render.status_html("ready: pick a task and press Compare"))
    # The rehearsal side's estimate; the run without rehearsal adds about one committed pass.
    estimate = gr.HTML(render.estimate_html(None, "parallel", 2, 1, 1, ctx.settings.episode_seconds))
    fit_to_model(ctx, n, sampling, rmode, estimate)
    sides = _compare_sides()
    table = gr.Dataframe(
        headers=["metric", "none", "parallel", "difference (rehearsal − none)"],
        label="metrics",
        interactive=False,
        elem_id="compare-table",
    )
    file = gr.DownloadButton("Download both records (JSON)", interactive=False)
    return CompareView(env, task_pick, rmode, n, sides_pick, sampling, go, stop, status, *sides, table, file)


class CompareRun:
    """The Compare button's handler: the task without rehearsal, then with it, streamed side by side."""

    def __init__(self, ctx: AppContext, ui: CompareView):
        self.ctx, self.ui = ctx, ui

    def run_compare(
        self,
        session: Session | None,
        env_name: str,
        task_name: str,
        mode_name: str,
        n_value: float,
        sides_kind: str,
        *values: Any,
    ) -> Iterator[dict]:
        ui, ctx = self.ui, self.ctx
        job = current_job()  # its wait in the queue; its client's leaving stops the run
        if session is None:
            yield {ui.status: render.status_html(NO_SESSION, "error")}
            return
        try:
            task = find_example(env_name, task_name)
            req = RunRequest.from_controls(
                example_tools(env_name), env_name, task.prompt, mode_name, n_value, *values
            ).check(ctx.options)
            task = build_task(req)
            sides = compare_sides(sides_kind, mode_name, req.n, "adapter")  # checked again once loaded
        except EnvaceError as err:
            yield self._refused(err)
            return
        yield self._cleared(sides)
        try:
            backend = yield from await_model(ctx.holder, ctx.options, lambda html: {ui.status: html})
            sides = compare_sides(sides_kind, mode_name, req.n, served_adapter(backend))
            check_prompts([task], req.policy, backend)
            settings = ctx.run_settings()
            configs = {
                side.key: replace(build_config(req, settings, backend, mode=side.mode), base_weights=side.base_weights)
                for side in sides
            }
        except EnvaceError as err:
            yield self._refused(err)
            return
        cancel = session.begin()
        session.compared = {}
        events = runner.compare_events(task, configs, cancel)
        yield from streamed_until_gone(job, cancel, self._stream(session, events, sides))
        for traj in session.compared.values():  # both sides waited in the queue as one job
            traj.queued_seconds = job.queued_seconds if job is not None else None
        yield self._finished(session, [side.key for side in sides])

    def _refused(self, err: EnvaceError) -> dict:
        return {self.ui.status: render.status_html(self.ctx.options.redact(str(err)), "error")}

    def _cleared(self, sides: tuple[Side, Side]) -> dict:
        ui = self.ui
        keys = (sides[0].key, sides[1].key)
        return {
            ui.left_steps: "",
            ui.right_steps: "",
            ui.left_outcome: "",
            ui.right_outcome: "",
            ui.file: gr.DownloadButton(value=None, interactive=False),
            ui.left_title: sides[0].title,
            ui.right_title: sides[1].title,
            ui.table: gr.Dataframe(value=[], headers=["metric", *keys, _difference_header(keys)]),
        }

    def _stream(self, session: Session, events: Iterator[tuple[str, Any]], sides: tuple[Side, Side]) -> Iterator[dict]:
        """Each side's steps as they come; a finished side's record goes into the session."""
        ui = self.ui
        left, right = sides[0].key, sides[1].key
        outcomes = {left: ui.left_outcome, right: ui.right_outcome}
        steps_of = {left: ui.left_steps, right: ui.right_steps}
        views = {side.key: render.LiveView() for side in sides}
        throttle = Throttle()
        for side, event in events:
            views[side].apply(event)
            if isinstance(event, Generating) and not throttle():
                continue
            update = {
                ui.status: render.status_html(f"{side}: {render.progress_text(views[side])}", "busy"),
                steps_of[side]: render.steps_html(views[side], condensed=True),
            }
            if isinstance(event, EpisodeFinished):
                session.compared[side] = event.trajectory
                update[outcomes[side]] = render.outcome_html(event.trajectory)
            yield update

    def _finished(self, session: Session, modes: list[str]) -> dict:
        """The metrics table with its difference column, and both records for download."""
        ui = self.ui
        by_side = {m: {**runner.metrics(t), **render.write_metrics(t)} for m, t in session.compared.items()}
        headers, rows = _with_difference(by_side)
        done = len(by_side) == len(modes)
        records = {"metrics": by_side, "trajectories": {m: t.to_dict() for m, t in session.compared.items()}}
        # Neutral: "done" says the runs ended, not that they passed (green is a passed check's).
        status = render.status_html("done" if done else "stopped", "info" if done else "warn")
        status += render.status_html(note, "info") if (note := pair_note(session.compared.values())) else ""
        saved, status = saved_download(self.ctx, session, "compare.json", records, status)
        return {
            ui.status: status,
            ui.table: gr.Dataframe(value=rows, headers=headers),
            ui.file: gr.DownloadButton(value=saved, interactive=saved is not None),
        }


def _wire(ctx: AppContext, compare: CompareView, suite: SuiteView, state: gr.State) -> None:
    private: dict[str, Any] = {"api_visibility": "private"}
    run_compare = CompareRun(ctx, compare).run_compare
    off_while_running(
        compare.go, compare.go.click, run_compare, compare.inputs(state), compare.outputs(),
        **ctx.streamed_event(),
    )
    for button in (compare.stop, suite.stop):
        button.click(stop_session, [state], None, queue=False, **private)
    compare.env.input(
        lambda e: gr.Dropdown(choices=task_choices(e), value=example_tasks(e)[0].name),
        [compare.env],
        [compare.task_pick],
        queue=False,
        **private,
    )


def build_compare(ctx: AppContext, state: gr.State) -> None:
    envs = list(gallery())
    compare = _compare_layout(ctx, envs)
    suite = build_suite(ctx, envs, state)
    _wire(ctx, compare, suite, state)
