"""The Compare tab: one task without and with rehearsal; a suite of tasks both ways."""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator

import gradio as gr

from envace_demo.engine import EpisodeConfig
from envace_demo.errors import ConfigError, EnvaceError, StorageError
from envace_demo.evaluation import Job, plan, run_jobs, summarize
from envace_demo.evaluation.batch import estimate_seconds
from envace_demo.evaluation.divergence import pair_note
from envace_demo.evaluation.table import changes_line
from envace_demo.evaluation.report import figures
from envace_demo.evaluation.table import TABLE_COLUMNS, table_rows
from envace_demo.events import EpisodeFinished, Generating
from envace_demo.models.loader import adapter_name
from envace_demo.record import Trajectory
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
    stop_session,
)
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
    suite_tasks,
)
from envace_demo.ui.fairness import current_job, streamed_until_gone
from envace_demo.ui.session import Session


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

EPISODE_COLUMNS = ["task", "category", "mode", "seed", "success", "valid calls", "fidelity", "tokens", "seconds", "ended"]
# Seconds per episode measured on this process's model, by mode (for the suite's estimate).
_seen: dict[str, list[float]] = {}
_seen_lock = threading.Lock()


def _max_seeds(ctx: AppContext) -> int:
    return 3 if ctx.options.public else 10


def _suite_modes(modes: list[str] | None) -> list[str]:
    chosen = [m for m in (BASELINE, *REHEARSAL_MODES) if m in (modes or [])]
    unknown = set(modes or []) - set(chosen)
    if unknown or not chosen:
        raise ConfigError(f"modes: pick one or more of none, parallel, sequential (got {sorted(modes or [])})")
    return chosen


def _observed() -> dict[str, float]:
    with _seen_lock:
        return {m: sum(v) / len(v) for m, v in _seen.items() if v}


def _observe(rec: dict) -> None:
    if not rec.get("error") and rec.get("seconds"):
        with _seen_lock:
            _seen.setdefault(rec["mode"], []).append(float(rec["seconds"]))


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def _estimate_text(tasks: int, modes: list[str], n: int, seeds: int, max_new_tokens: int) -> str:
    if not modes:
        return "Estimate: pick at least one mode."
    episodes = {m: tasks * seeds for m in modes}
    observed = _observed()
    seconds = estimate_seconds(episodes, n, max_new_tokens, observed)
    basis = (
        "from the episodes measured on this model so far"
        if all(m in observed for m in modes)
        else "a rough guess from the token budget until an episode of each mode has run here"
    )
    return (
        f"Estimate: {tasks} task(s) × {len(modes)} mode(s) × {seeds} seed(s) = {tasks * len(modes) * seeds} "
        f"episodes, about **{_duration(seconds)}** ({basis})."
    )


def _remaining_text(jobs: list[Job], n: int, max_new_tokens: int) -> str:
    if not jobs:
        return ""
    episodes: dict[str, int] = {}
    for job in jobs:
        episodes[job.mode] = episodes.get(job.mode, 0) + 1
    return f", about {_duration(estimate_seconds(episodes, n, max_new_tokens, _observed()))} left"


def _episode_rows(records: list[dict]) -> list[list[Any]]:
    def pct(v: float | None) -> str:
        return "—" if v is None else f"{100 * v:.0f}%"

    return [
        [
            r["task"], r["category"], r["mode"], r["seed"],
            {True: "yes", False: "no", None: "—"}[r["success"]],
            pct(r["validity"]), "—" if r["fidelity"] is None else f"{r['fidelity']:.2f}",
            r["tokens"], f"{r['seconds']:.1f}", r.get("error") or r["ended"],
        ]
        for r in records
    ]


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


def _initial_estimate(env: str, limit: int, max_new_tokens: int) -> str:
    return _estimate_text(len(example_tasks(env)[:limit]), [BASELINE, "parallel"], 2, 1, max_new_tokens)


def _task_choices(env: str) -> list[tuple[str, str]]:
    return [(f"{t.name}: {t.prompt}", t.name) for t in example_tasks(env)]


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


@dataclass
class SuiteView:
    """Many tasks in several modes: the controls, the estimate, the eval table and its charts."""

    source: gr.Radio
    env: gr.Dropdown
    upload: gr.File
    modes: gr.CheckboxGroup
    n: gr.Slider
    seeds: gr.Slider
    limit: gr.Slider
    sampling: SamplingControls
    estimate: gr.Markdown
    go: gr.Button
    stop: gr.Button
    status: gr.HTML
    table: gr.Dataframe
    plots: tuple[gr.Plot, gr.Plot, gr.Plot, gr.Plot]  # in the order of report.figures
    episodes: gr.Dataframe
    file: gr.DownloadButton

    def inputs(self, state: gr.State) -> list[gr.components.Component]:
        """In ``SuiteRun.run_suite``'s order."""
        return [
            state, self.source, self.env, self.upload, self.limit, self.modes, self.n, self.seeds,
            *self.sampling.inputs(),
        ]

    def outputs(self) -> list[gr.components.Component]:
        return [self.status, self.table, self.episodes, *self.plots, self.file]

    def estimate_inputs(self) -> list[gr.components.Component]:
        """In ``SuiteRun.suite_estimate``'s order."""
        return [
            self.source, self.env, self.upload, self.limit, self.modes, self.n, self.seeds,
            self.sampling.max_new_tokens,
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
        task_pick = gr.Dropdown(_task_choices(envs[0]), value=example_tasks(envs[0])[0].name, label="task")
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


def _suite_sources(envs: list[str]) -> tuple[gr.Radio, gr.Dropdown, gr.File]:
    with gr.Row():
        source = gr.Radio(
            [("an example environment's tasks", "env"), ("an uploaded JSONL", "upload")],
            value="env",
            label="tasks",
        )
        env = gr.Dropdown(envs, value=envs[0], label="example environment")
        upload = gr.File(
            label="JSONL of tasks (project format or BFCL records)",
            file_types=[".jsonl"],
            type="filepath",
            height=120,
        )
    return source, env, upload


def _suite_sizes(ctx: AppContext) -> tuple[gr.CheckboxGroup, gr.Slider, gr.Slider, gr.Slider]:
    """(modes, N, seeds per task, most tasks)."""
    with gr.Row():
        modes = gr.CheckboxGroup(
            ["none", *REHEARSAL_MODES], value=["none", "parallel"], label="modes", elem_id="suite-modes"
        )
        n = gr.Slider(1, ctx.options.max_n, value=2, step=1, label="rehearsal budget N", elem_id="suite-n")
        seeds = gr.Slider(1, _max_seeds(ctx), value=1, step=1, label="seeds per task", elem_id="suite-seeds")
        limit = gr.Slider(
            1,
            ctx.options.max_suite_tasks,
            value=min(8, ctx.options.max_suite_tasks),
            step=1,
            label="at most this many tasks",
            elem_id="suite-limit",
        )
    return modes, n, seeds, limit


def _suite_results() -> tuple[gr.HTML, gr.Dataframe, tuple, gr.Dataframe, gr.DownloadButton]:
    """(status, table, plots, episodes, download)."""
    status = gr.HTML(elem_id="suite-status")
    table = gr.Dataframe(
        headers=TABLE_COLUMNS, label="table: per category and mode", interactive=False, elem_id="suite-table"
    )
    # No label on the plots: each figure carries its own title and axis titles.
    with gr.Row():
        plot_success = gr.Plot(show_label=False, elem_id="suite-plot-success")
        plot_diff = gr.Plot(show_label=False, elem_id="suite-plot-difference")
    with gr.Row():
        plot_validity = gr.Plot(show_label=False, elem_id="suite-plot-validity")
        plot_tokens = gr.Plot(show_label=False, elem_id="suite-plot-tokens")
    episodes = gr.Dataframe(headers=EPISODE_COLUMNS, label="episodes", interactive=False)
    file = gr.DownloadButton("Download the episodes and the table (JSON)", interactive=False)
    return status, table, (plot_success, plot_diff, plot_validity, plot_tokens), episodes, file


def _suite_layout(ctx: AppContext, envs: list[str]) -> SuiteView:
    gr.Markdown(
        "### Suite: the table over many tasks\n"
        "Every task in every chosen mode with the same seeds: the table `python -m envace_demo eval` prints "
        "(call validity, task success or BFCL match, fidelity, tokens, seconds; Δ is the paired difference to "
        "`none` on the same task and seed, with its 95% bootstrap interval)."
    )
    source, env, upload = _suite_sources(envs)
    modes, n, seeds, limit = _suite_sizes(ctx)
    sampling = sampling_controls(ctx)
    estimate = gr.Markdown(
        _initial_estimate(envs[0], min(8, ctx.options.max_suite_tasks), ctx.settings.max_new_tokens),
        elem_id="suite-estimate",
    )
    with gr.Row():
        go = gr.Button("Run suite", variant="primary", elem_id="suite-button")
        stop = gr.Button("Stop", variant="stop")
    status, table, plots, episodes, file = _suite_results()
    return SuiteView(
        source, env, upload, modes, n, seeds, limit, sampling, estimate, go, stop, status, table, plots,
        episodes, file,
    )


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
        saved, status = _saved(self.ctx, session, "compare.json", records, status)
        return {
            ui.status: status,
            ui.table: gr.Dataframe(value=rows, headers=headers),
            ui.file: gr.DownloadButton(value=saved, interactive=saved is not None),
        }


class SuiteRun:
    """The suite's handlers: its estimate, and the run that fills the table episode by episode."""

    def __init__(self, ctx: AppContext, ui: SuiteView):
        self.ctx, self.ui = ctx, ui

    def suite_estimate(
        self, source_name: str, env_name: str, upload_path: str | None, limit_value: float, modes: list[str],
        n_value: float, seeds_value: float, max_new_tokens: float,
    ) -> str:
        options = self.ctx.options
        try:
            tasks = suite_tasks(source_name, env_name, upload_path, int(limit_value), options.input_policy)
            count = len(tasks)
        except EnvaceError as err:
            return f"Estimate: {options.redact(str(err))}"
        return _estimate_text(count, list(modes or []), int(n_value), int(seeds_value), int(max_new_tokens))

    def run_suite(
        self,
        session: Session | None,
        source_name: str,
        env_name: str,
        upload_path: str | None,
        limit_value: float,
        modes: list[str],
        n_value: float,
        seeds_value: float,
        temperature: float,
        top_p: float,
        top_k: float,
        max_new_tokens: float,
        seed: float | None,
        constrained: bool,
        max_steps: float,
        progress: gr.Progress = gr.Progress(),  # positional: Gradio finds it only there
    ) -> Iterator[dict]:
        ui, ctx = self.ui, self.ctx
        job = current_job()
        if session is None:
            yield {ui.status: render.status_html(NO_SESSION, "error")}
            return
        try:
            modes, n_seeds, etasks = self._checked(
                source_name, env_name, upload_path, limit_value, modes, seeds_value
            )
            # Only the sampling and limits of this request are used: each task brings its own tools.
            req = RunRequest.from_controls(
                "", env_name, etasks[0].task.prompt, modes[-1], n_value, temperature, top_p, top_k,
                max_new_tokens, seed, constrained, max_steps,
            ).check(ctx.options)
            backend = yield from await_model(ctx.holder, ctx.options, lambda html: {ui.status: html})
            check_prompts([t.task for t in etasks], ctx.options.input_policy, backend)
            configs = {m: build_config(req, ctx.run_settings(), backend, mode=m) for m in modes}
        except EnvaceError as err:
            yield {ui.status: render.status_html(ctx.options.redact(str(err)), "error")}
            return
        base_seed = req.seed or 0
        jobs = plan(etasks, modes, [base_seed + i for i in range(n_seeds)])
        cancel = session.begin()
        session.suite = []
        progress((0, len(jobs)), desc="running the suite", unit="episodes")
        yield self._started(len(jobs))
        episodes = self._stream(session, jobs, configs, cancel, int(n_value), int(max_new_tokens), progress)
        yield from streamed_until_gone(job, cancel, episodes)
        yield self._finished(session, len(jobs), modes)

    def _checked(
        self, source_name: str, env_name: str, upload_path: str | None, limit_value: float, modes: list[str],
        seeds_value: float,
    ) -> tuple[list[str], int, list]:
        """(modes, seeds per task, tasks) within the app's caps; ConfigError otherwise."""
        options, max_seeds = self.ctx.options, _max_seeds(self.ctx)
        modes = _suite_modes(modes)
        n_seeds = int(seeds_value)
        if not 1 <= n_seeds <= max_seeds:
            raise ConfigError(f"seeds per task: expected 1 to {max_seeds}, got {seeds_value}")
        etasks = suite_tasks(source_name, env_name, upload_path, int(limit_value), options.input_policy)
        if len(etasks) > options.max_suite_tasks:
            raise ConfigError(f"suite: at most {options.max_suite_tasks} tasks")
        options.input_policy.check_work(len(etasks), n_seeds, len(modes))
        return modes, n_seeds, etasks

    def _started(self, total: int) -> dict:
        ui = self.ui
        return {
            ui.status: render.status_html(f"0 of {total} episodes done", "busy"),
            ui.table: gr.Dataframe(value=[], headers=TABLE_COLUMNS),
            ui.episodes: gr.Dataframe(value=[], headers=EPISODE_COLUMNS),
            ui.file: gr.DownloadButton(value=None, interactive=False),
            **{plot: None for plot in ui.plots},
        }

    def _stream(
        self, session: Session, jobs: list[Job], configs: dict[str, EpisodeConfig], cancel: threading.Event,
        n: int, max_new_tokens: int, progress: Callable,
    ) -> Iterator[dict]:
        """The table, the episodes and the charts after each episode; each episode's record
        goes into the session (and its seconds into the estimate)."""
        ui, total = self.ui, len(jobs)
        modes = list(configs)  # one config per mode, in the order picked

        def run_one(job: Job) -> Trajectory:
            config = replace(configs[job.mode], sampling=replace(configs[job.mode].sampling, seed=job.seed))
            return runner.run_to_end(job.etask.task, config, cancel)

        # One episode at a time: the app's model is shared by every visitor (its queue orders the work).
        # Each episode in the visitor's request context (ZeroGPU charges that visitor).
        for rec in run_jobs(jobs, runner.carrying_context(run_one), concurrency=1, cancel=cancel):
            if rec.get("ended") in ("cancelled",):
                break
            session.suite.append({k: v for k, v in rec.items() if k != "trajectory"})
            _observe(rec)
            done = len(session.suite)
            summary = summarize(session.suite, modes)
            left = _remaining_text(jobs[done:], n, max_new_tokens)
            progress((done, total), desc=f"{rec['task']} ({rec['mode']})", unit="episodes")
            yield {
                ui.status: render.status_html(f"{done} of {total} episodes done{left}", "busy"),
                ui.table: gr.Dataframe(value=table_rows(summary), headers=TABLE_COLUMNS),
                ui.episodes: gr.Dataframe(value=_episode_rows(session.suite), headers=EPISODE_COLUMNS),
                **dict(zip(ui.plots, figures(summary).values())),  # the charts grow as episodes come
            }

    def _finished(self, session: Session, total: int, modes: list[str]) -> dict:
        ui = self.ui
        finished = len(session.suite) == total
        summary = summarize(session.suite, modes) if session.suite else None
        status = render.status_html(
            f"{len(session.suite)} of {total} episodes" + ("" if finished else " (stopped)"),
            "info" if finished else "warn",
        )
        if summary is not None and (line := changes_line(summary)):
            status += render.status_html(line, "info")
        saved = None
        if session.suite:
            records = {"episodes": session.suite, "summary": summary}
            saved, status = _saved(self.ctx, session, "suite.json", records, status)
        return {ui.status: status, ui.file: gr.DownloadButton(value=saved, interactive=saved is not None)}


def _saved(
    ctx: AppContext, session: Session, name: str, records: dict, status: str
) -> tuple[str | None, str]:
    """(download path, status) of ``records`` as a visitor may see them; a disk that cannot
    take them leaves no file and says so in the status, the panels drawn as they are."""
    try:
        return session.save_json(name, ctx.options.redact(records)), status
    except StorageError as err:
        return None, render.status_html(ctx.options.redact(str(err)), "error")


def _wire(ctx: AppContext, compare: CompareView, suite: SuiteView, state: gr.State) -> None:
    private: dict[str, Any] = {"api_visibility": "private"}
    run_compare = CompareRun(ctx, compare).run_compare
    off_while_running(
        compare.go, compare.go.click, run_compare, compare.inputs(state), compare.outputs(),
        **ctx.streamed_event(),
    )
    handlers = SuiteRun(ctx, suite)
    off_while_running(
        suite.go,
        suite.go.click,
        handlers.run_suite,
        suite.inputs(state),
        suite.outputs(),
        show_progress_on=[suite.table],
        **ctx.model_event(),
        **private,
    )
    estimate_inputs = suite.estimate_inputs()
    for control in estimate_inputs:
        control.change(handlers.suite_estimate, estimate_inputs, [suite.estimate], queue=False, **private)
    suite.go.click(handlers.suite_estimate, estimate_inputs, [suite.estimate], queue=False, **private)
    for button in (compare.stop, suite.stop):
        button.click(stop_session, [state], None, queue=False, **private)
    compare.env.input(
        lambda e: gr.Dropdown(choices=_task_choices(e), value=example_tasks(e)[0].name),
        [compare.env],
        [compare.task_pick],
        queue=False,
        **private,
    )


def build_compare(ctx: AppContext, state: gr.State) -> None:
    envs = list(gallery())
    compare = _compare_layout(ctx, envs)
    suite = _suite_layout(ctx, envs)
    _wire(ctx, compare, suite, state)
