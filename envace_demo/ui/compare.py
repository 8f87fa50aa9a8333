"""The Compare tab: one task without and with rehearsal; a suite of tasks both ways."""

from __future__ import annotations

from typing import Any, Iterator

import gradio as gr

from envace_demo.errors import EnvaceError
from envace_demo.events import EpisodeFinished, Generating
from envace_demo.ui import charts, render, runner
from envace_demo.ui.common import (
    NO_SESSION,
    AppContext,
    Throttle,
    await_model,
    sampling_controls,
    stop_session,
)
from envace_demo.ui.inputs import (
    BASELINE,
    REHEARSAL_MODES,
    RunRequest,
    build_config,
    build_task,
    compare_modes,
    example_tasks,
    example_tools,
    find_example,
    gallery,
    suite_tasks,
)
from envace_demo.ui.render import SUITE_COLUMNS, suite_table
from envace_demo.ui.session import Session

_EMPTY = '<div class="ev-empty">Press Compare: the committed steps appear here.</div>'


def _task_choices(env: str) -> list[tuple[str, str]]:
    return [(f"{t.name}: {t.prompt}", t.name) for t in example_tasks(env)]


def build_compare(ctx: AppContext, state: gr.State) -> None:
    envs = list(gallery())
    gr.Markdown(
        "Run one task twice with the same seed and sampling: **without rehearsal** (mode `none`) and "
        "**with rehearsal** (N imagined trajectories, then one committed run)."
    )
    with gr.Row():
        env = gr.Dropdown(envs, value=envs[0], label="environment")
        task_pick = gr.Dropdown(_task_choices(envs[0]), value=example_tasks(envs[0])[0].name, label="task")
        rmode = gr.Radio(list(REHEARSAL_MODES), value="parallel", label="rehearsal mode")
        n = gr.Slider(1, ctx.options.max_n, value=2, step=1, label="rehearsal budget N", elem_id="compare-n")
    sampling = sampling_controls(ctx)
    with gr.Row():
        go = gr.Button("Compare", variant="primary", elem_id="compare-button")
        stop = gr.Button("Stop", variant="stop")
    status = gr.HTML(render.status_html("ready: pick a task and press Compare"))
    with gr.Row(equal_height=False):
        with gr.Column():
            gr.Markdown("#### Without rehearsal (`none`)")
            left_steps, left_outcome = gr.HTML(_EMPTY, elem_id="compare-none"), gr.HTML()
        with gr.Column():
            right_title = gr.Markdown("#### With rehearsal (`parallel`)")
            right_steps, right_outcome = gr.HTML(_EMPTY, elem_id="compare-rehearsal"), gr.HTML()
    table = gr.Dataframe(
        headers=["metric", "none", "parallel"], label="metrics", interactive=False, elem_id="compare-table"
    )
    compare_file = gr.DownloadButton("Download both records (JSON)", interactive=False)

    gr.Markdown("### Suite: every task, both ways")
    with gr.Row():
        source = gr.Radio(
            [("the environment's example tasks", "env"), ("an uploaded JSONL", "upload")],
            value="env",
            label="tasks",
        )
        upload = gr.File(
            label="JSONL of tasks (project format or BFCL records)",
            file_types=[".jsonl"],
            type="filepath",
            height=120,
        )
        limit = gr.Slider(
            1,
            ctx.options.max_suite_tasks,
            value=min(8, ctx.options.max_suite_tasks),
            step=1,
            label="at most this many tasks",
            elem_id="suite-limit",
        )
    with gr.Row():
        suite_go = gr.Button("Run suite", variant="primary", elem_id="suite-button")
        suite_stop = gr.Button("Stop", variant="stop")
    suite_status = gr.HTML(elem_id="suite-status")
    suite_df = gr.Dataframe(headers=SUITE_COLUMNS, label="per task and mode", interactive=False)
    with gr.Row():
        plot_success, plot_errors = (
            gr.Plot(label="success rate by mode"),
            gr.Plot(label="real errors by mode"),
        )
    with gr.Row():
        plot_fidelity, plot_latency = gr.Plot(label="fidelity distribution"), gr.Plot(label="latency")
    suite_file = gr.DownloadButton("Download the suite rows (JSON)", interactive=False)
    plots = (plot_success, plot_errors, plot_fidelity, plot_latency)

    def run_compare(
        session: Session | None, env_name: str, task_name: str, mode_name: str, n_value: float, *values: Any
    ) -> Iterator[dict]:
        if session is None:
            yield {status: render.status_html(NO_SESSION, "error")}
            return
        outcomes = {BASELINE: left_outcome, mode_name: right_outcome}
        steps_of = {BASELINE: left_steps, mode_name: right_steps}
        try:
            task = find_example(env_name, task_name)
            req = RunRequest.from_controls(
                example_tools(env_name), env_name, task.prompt, mode_name, n_value, *values
            ).check(ctx.options)
            task = build_task(req)
            modes = compare_modes(mode_name)
        except EnvaceError as err:
            yield {status: render.status_html(ctx.options.redact(str(err)), "error")}
            return
        yield {
            left_steps: "",
            right_steps: "",
            left_outcome: "",
            right_outcome: "",
            compare_file: gr.DownloadButton(value=None, interactive=False),
            right_title: f"#### With rehearsal (`{mode_name}`, N={req.n})",
            table: gr.Dataframe(value=[], headers=["metric", *modes]),
        }
        try:
            backend = yield from await_model(ctx.holder, ctx.options, lambda html: {status: html})
            configs = {m: build_config(req, ctx.settings, backend, mode=m) for m in modes}
        except EnvaceError as err:
            yield {status: render.status_html(ctx.options.redact(str(err)), "error")}
            return
        cancel = session.begin()
        views = {m: render.LiveView() for m in modes}
        throttle = Throttle()
        session.compared = {}
        for side, event in runner.compare_events(task, configs, cancel):
            views[side].apply(event)
            if isinstance(event, Generating) and not throttle():
                continue
            update = {
                status: render.status_html(f"{side}: {render.progress_text(views[side])}", "busy"),
                steps_of[side]: render.steps_html(views[side], condensed=True),
            }
            if isinstance(event, EpisodeFinished):
                session.compared[side] = event.trajectory
                update[outcomes[side]] = render.outcome_html(event.trajectory)
            yield update
        by_side = {m: runner.metrics(t) for m, t in session.compared.items()}
        headers, rows = render.metrics_table(by_side)
        done = len(by_side) == len(modes)
        yield {
            status: render.status_html("done" if done else "stopped", "ok" if done else "error"),
            table: gr.Dataframe(value=rows, headers=headers),
            compare_file: gr.DownloadButton(
                value=session.save_json(
                    "compare.json",
                    {
                        "metrics": by_side,
                        "trajectories": {m: t.to_dict() for m, t in session.compared.items()},
                    },
                ),
                interactive=True,
            ),
        }

    def run_suite(
        session: Session | None,
        source_name: str,
        env_name: str,
        upload_path: str | None,
        limit_value: float,
        mode_name: str,
        n_value: float,
        temperature: float,
        top_p: float,
        top_k: float,
        max_new_tokens: float,
        seed: float | None,
        constrained: bool,
        max_steps: float,
        progress: gr.Progress = gr.Progress(),  # positional: Gradio finds it only there
    ) -> Iterator[dict]:
        if session is None:
            yield {suite_status: render.status_html(NO_SESSION, "error")}
            return
        try:
            tasks = suite_tasks(source_name, env_name, upload_path, int(limit_value), ctx.options.input_policy)
            modes = compare_modes(mode_name)
            # Only the sampling and limits of this request are used: each task brings its own tools.
            req = RunRequest.from_controls(
                "",
                env_name,
                tasks[0].prompt,
                mode_name,
                n_value,
                temperature,
                top_p,
                top_k,
                max_new_tokens,
                seed,
                constrained,
                max_steps,
            ).check(ctx.options)
            backend = yield from await_model(ctx.holder, ctx.options, lambda html: {suite_status: html})
            configs = {m: build_config(req, ctx.settings, backend, mode=m) for m in modes}
        except EnvaceError as err:
            yield {suite_status: render.status_html(ctx.options.redact(str(err)), "error")}
            return
        cancel = session.begin()
        session.suite = []
        total = len(tasks) * len(modes)
        progress((0, total), desc="running the suite", unit="episodes")
        yield {
            suite_status: render.status_html(f"0 of {total} episodes done", "busy"),
            suite_df: gr.Dataframe(value=[], headers=SUITE_COLUMNS),
            suite_file: gr.DownloadButton(value=None, interactive=False),
            **{plot: None for plot in plots},
        }
        for row in runner.suite_rows(tasks, configs, cancel):
            session.suite.append(row.to_dict())
            done = len(session.suite)
            progress((done, total), desc=f"{row.task} ({row.mode})", unit="episodes")
            yield {
                suite_status: render.status_html(f"{done} of {total} episodes done", "busy"),
                suite_df: gr.Dataframe(value=suite_table(session.suite), headers=SUITE_COLUMNS),
                **dict(zip(plots, charts.suite_figures(session.suite))),  # the charts grow as rows come
            }
        finished = len(session.suite) == total
        yield {
            suite_status: render.status_html(
                f"{len(session.suite)} of {total} episodes" + ("" if finished else " (stopped)"),
                "ok" if finished else "error",
            ),
            suite_file: gr.DownloadButton(
                value=session.save_json("suite.json", {"rows": session.suite}) if session.suite else None,
                interactive=bool(session.suite),
            ),
        }

    private: dict[str, Any] = {"api_visibility": "private"}
    compare_outputs = [
        status,
        left_steps,
        right_steps,
        left_outcome,
        right_outcome,
        right_title,
        table,
        compare_file,
    ]
    go.click(
        run_compare,
        [state, env, task_pick, rmode, n, *sampling.inputs()],
        compare_outputs,
        **ctx.streamed_event(),
    )
    suite_outputs = [
        suite_status,
        suite_df,
        plot_success,
        plot_errors,
        plot_fidelity,
        plot_latency,
        suite_file,
    ]
    suite_go.click(
        run_suite,
        [state, source, env, upload, limit, rmode, n, *sampling.inputs()],
        suite_outputs,
        show_progress_on=[suite_df],
        **ctx.model_event(),
        **private,
    )
    for button in (stop, suite_stop):
        button.click(stop_session, [state], None, queue=False, **private)
    env.input(
        lambda e: gr.Dropdown(choices=_task_choices(e), value=example_tasks(e)[0].name),
        [env],
        [task_pick],
        queue=False,
        **private,
    )
