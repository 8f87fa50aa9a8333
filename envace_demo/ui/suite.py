"""Compare's Suite: many tasks in several modes, the table ``eval`` prints and its charts.

The sources: an example environment's tasks, an uploaded JSONL, or a few BFCL v4
multi-turn entries (each a conversation against its live backends, scored by BFCL's own
checker as ``eval --suite bfcl-multi-turn`` scores them). The estimate follows the
seconds measured on this app's model (``AppContext.speeds``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator

import gradio as gr

from envace_demo.engine import EpisodeConfig
from envace_demo.errors import ConfigError, EnvaceError
from envace_demo.evaluation import Job, plan, run_jobs, summarize
from envace_demo.evaluation.batch import EvalTask, estimate_seconds
from envace_demo.evaluation.report import figures
from envace_demo.evaluation.table import TABLE_COLUMNS, changes_line, table_rows
from envace_demo.record import Trajectory
from envace_demo.ui import bfcl_entries, render, runner
from envace_demo.ui.common import (
    NO_SESSION,
    AppContext,
    EpisodeSeconds,
    SamplingControls,
    await_model,
    off_while_running,
    sampling_controls,
    saved_download,
)
from envace_demo.ui.fairness import current_job, streamed_until_gone
from envace_demo.ui.inputs import (
    BASELINE,
    REHEARSAL_MODES,
    RunRequest,
    build_config,
    check_prompts,
    example_tasks,
    max_user_turns,
    suite_tasks,
)
from envace_demo.ui.session import Session

BFCL_SOURCE = "bfcl"
EPISODE_COLUMNS = ["task", "category", "mode", "seed", "success", "valid calls", "fidelity", "tokens", "seconds", "ended"]


def _entries(ctx: AppContext) -> list[str]:
    """The BFCL multi-turn entries this app offers (fewer in public mode, each within the
    conversation cap)."""
    return bfcl_entries.offered(ctx.options.public, max_user_turns(ctx.options))


def _suite_tasks(ctx: AppContext, source: str, env: str, upload: str | None, limit: int) -> list[EvalTask]:
    """The suite's tasks: ``inputs.suite_tasks``' sources, or the BFCL entries offered (each
    a whole conversation against its backends, judged by BFCL's checker)."""
    if source == BFCL_SOURCE:
        return bfcl_entries.eval_tasks(_entries(ctx), limit)
    return suite_tasks(source, env, upload, limit, ctx.options.input_policy)


def _max_seeds(ctx: AppContext) -> int:
    return 3 if ctx.options.public else 10


def _suite_modes(modes: list[str] | None) -> list[str]:
    chosen = [m for m in (BASELINE, *REHEARSAL_MODES) if m in (modes or [])]
    unknown = set(modes or []) - set(chosen)
    if unknown or not chosen:
        raise ConfigError(f"modes: pick one or more of none, parallel, sequential (got {sorted(modes or [])})")
    return chosen


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def _estimate_text(
    speeds: EpisodeSeconds, tasks: int, modes: list[str], n: int, seeds: int, max_new_tokens: int
) -> str:
    if not modes:
        return "Estimate: pick at least one mode."
    episodes = {m: tasks * seeds for m in modes}
    observed = speeds.means()
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


def _remaining_text(speeds: EpisodeSeconds, jobs: list[Job], n: int, max_new_tokens: int) -> str:
    if not jobs:
        return ""
    episodes: dict[str, int] = {}
    for job in jobs:
        episodes[job.mode] = episodes.get(job.mode, 0) + 1
    return f", about {_duration(estimate_seconds(episodes, n, max_new_tokens, speeds.means()))} left"


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


def _initial_estimate(ctx: AppContext, env: str, limit: int) -> str:
    tasks = len(example_tasks(env)[:limit])
    return _estimate_text(ctx.speeds, tasks, [BASELINE, "parallel"], 2, 1, ctx.settings.max_new_tokens)


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


def _suite_sources(ctx: AppContext, envs: list[str]) -> tuple[gr.Radio, gr.Dropdown, gr.File]:
    sources = [("an example environment's tasks", "env"), ("an uploaded JSONL", "upload")]
    if _entries(ctx):
        sources.append(("BFCL v4 multi-turn entries (scored by BFCL's checker)", BFCL_SOURCE))
    with gr.Row():
        source = gr.Radio(
            sources,
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
    source, env, upload = _suite_sources(ctx, envs)
    modes, n, seeds, limit = _suite_sizes(ctx)
    sampling = sampling_controls(ctx)
    estimate = gr.Markdown(
        _initial_estimate(ctx, envs[0], min(8, ctx.options.max_suite_tasks)),
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
            count = len(_suite_tasks(self.ctx, source_name, env_name, upload_path, int(limit_value)))
        except EnvaceError as err:
            return f"Estimate: {options.redact(str(err))}"
        return _estimate_text(
            self.ctx.speeds, count, list(modes or []), int(n_value), int(seeds_value), int(max_new_tokens)
        )

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
        etasks = _suite_tasks(self.ctx, source_name, env_name, upload_path, int(limit_value))
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
            self.ctx.speeds.observe(rec)
            done = len(session.suite)
            summary = summarize(session.suite, modes)
            left = _remaining_text(self.ctx.speeds, jobs[done:], n, max_new_tokens)
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
            saved, status = saved_download(self.ctx, session, "suite.json", records, status)
        return {ui.status: status, ui.file: gr.DownloadButton(value=saved, interactive=saved is not None)}


def build_suite(ctx: AppContext, envs: list[str], state: gr.State) -> SuiteView:
    """The Suite's layout and its events (Stop is wired with Compare's)."""
    suite = _suite_layout(ctx, envs)
    private: dict[str, Any] = {"api_visibility": "private"}
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
    return suite
