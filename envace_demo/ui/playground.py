"""The Playground tab: schemas, a request, one episode streamed as it runs."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Iterator

import gradio as gr

from envace_demo import memory as memory_mod
from envace_demo import showcase as showcase_mod
from envace_demo.envs.manual import PendingCall
from envace_demo.errors import EnvaceError, SchemaError
from envace_demo.events import EpisodeFinished, Generating
from envace_demo.record import Trajectory
from envace_demo.schemas import load_tools
from envace_demo.ui import render, runner
from envace_demo.ui.common import (
    NO_SESSION,
    AppContext,
    Throttle,
    await_model,
    estimate_for,
    fit_to_model,
    off_while_running,
    mode_radio,
    sampling_controls,
    stop_session,
)
from envace_demo.ui.inputs import (
    MANUAL,
    NO_ENVIRONMENT,
    RunRequest,
    build_config,
    build_task,
    environment_choices,
    example_tasks,
    example_tools,
    find_example,
    gallery,
)
from envace_demo.ui.session import Session

log = logging.getLogger(__name__)
_FIRST_ENV = next(iter(gallery()))
MEMORY_PLACEHOLDER = render.placeholder_card(
    "Rehearsal memory",
    "What the rehearsals tried and predicted, condensed for the committed run, appears here.",
)


def schema_status(text: str) -> str:
    try:
        return render.schema_ok_html(load_tools(text or ""))
    except SchemaError as err:
        return render.schema_error_html(err)


def shown_memory(traj: Trajectory) -> str:
    """The memory card of a finished run; a run cut before the engine summed up its
    rehearsals (imagine mode at a time limit) gets them summed up here."""
    memory = traj.memory
    if memory is None and traj.rehearsals:
        memory = memory_mod.summarize(traj.rehearsals)
    return render.memory_html(memory) or MEMORY_PLACEHOLDER


def showcase_panels(env: str) -> tuple[str, list[dict], str, str, str]:
    """(note, rehearsals, memory, steps, outcome) of ``env``'s recorded showcase; the
    empty panels when it has none."""
    try:
        show = showcase_mod.load(env)
    except EnvaceError as err:  # a broken record must not break the page
        log.warning("showcase of %s not shown: %s", env, err)
        show = None
    if show is None:
        return "", [], MEMORY_PLACEHOLDER, render.steps_placeholder(), ""
    view = render.showcase_view(show.trajectory)
    return (
        render.showcase_html(show.model, show.command, show.budget),
        render.rehearsal_messages(view),
        shown_memory(show.trajectory),
        render.steps_html(view),
        render.outcome_html(show.trajectory),
    )


def _task_choices(env: str) -> list[tuple[str, str]]:
    return [(f"{t.name}: {t.prompt}", t.name) for t in example_tasks(env)]


@dataclass
class Playground:
    editor: gr.Code
    schema_box: gr.HTML
    environment: gr.Dropdown
    message: gr.Textbox
    status: gr.HTML
    steps: gr.HTML


def build_playground(ctx: AppContext, state: gr.State) -> Playground:
    first_task = example_tasks(_FIRST_ENV)[0]
    with gr.Row(equal_height=False):
        with gr.Column(scale=5, min_width=360):
            example = gr.Radio(
                list(gallery()),
                value=_FIRST_ENV,
                label="Tool schemas: start from an example, or paste your own",
            )
            editor = gr.Code(
                value=example_tools(_FIRST_ENV),
                language="json",
                interactive=True,
                lines=16,
                max_lines=16,
                label="tools (OpenAI, bare functions, BFCL or pydantic JSON Schema)",
                elem_id="schema-editor",
            )
            schema_box = gr.HTML(schema_status(example_tools(_FIRST_ENV)), elem_id="schema-status")
        with gr.Column(scale=4, min_width=320):
            environment = gr.Dropdown(
                environment_choices(ctx.options),
                value=_FIRST_ENV,
                label="environment (where committed calls run)",
                elem_id="environment",
            )
            task_pick = gr.Dropdown(
                _task_choices(_FIRST_ENV),
                value=first_task.name,
                label="example request (its success check applies)",
            )
            message = gr.Textbox(first_task.prompt, lines=3, label="user message", elem_id="user-message")
            mode = mode_radio()
            n = gr.Slider(
                1, ctx.options.max_n, value=2, step=1, label="rehearsal budget N", elem_id="rehearsal-n"
            )
            sampling = sampling_controls(ctx)
            with gr.Row():
                run = gr.Button("Run", variant="primary", elem_id="run-button")
                stop = gr.Button("Stop", variant="stop", elem_id="stop-button")
            estimate = gr.HTML(
                render.estimate_html(None, "parallel", 2, 1, 1, ctx.settings.episode_seconds), elem_id="run-estimate"
            )
    status = gr.HTML(render.status_html("ready: press Run"), elem_id="run-status")
    note0, rehearsals0, memory0, steps0, outcome0 = showcase_panels(_FIRST_ENV)
    showcase_note = gr.HTML(note0, elem_id="showcase")
    with gr.Row(equal_height=False):
        with gr.Column(scale=3):
            rehearsals = gr.Chatbot(
                rehearsals0,
                label="Rehearsals (imagined: actor + rehearser, nothing real)",
                height="auto",
                min_height=200,
                max_height=560,
                placeholder="Rehearsals appear here (modes parallel, sequential, imagine).",
                elem_id="rehearsals",
                layout="panel",
                group_consecutive_messages=False,
                feedback_options=None,
            )
        with gr.Column(scale=2):
            memory = gr.HTML(memory0, elem_id="memory-card")
    gr.Markdown("### Committed run")
    steps = gr.HTML(steps0, elem_id="committed-steps")
    # The manual environment: shown while a committed call waits for the response you type.
    with gr.Group(visible=False, elem_id="manual-box") as manual_box:
        manual_call = gr.HTML(elem_id="manual-call")
        manual_text = gr.Code(
            language="json",
            interactive=True,
            lines=6,
            max_lines=12,
            label="real response (JSON; it starts as the rehearsed one: edit it, then send)",
            elem_id="manual-response",
        )
        with gr.Row():
            manual_send = gr.Button("Send response", variant="primary", elem_id="manual-send")
        manual_status = gr.HTML(elem_id="manual-status")
    with gr.Row(equal_height=False):
        with gr.Column(scale=4):
            outcome = gr.HTML(outcome0, elem_id="outcome")
        with gr.Column(scale=1, min_width=220):
            download = gr.DownloadButton("Download the record (JSON)", interactive=False, elem_id="download")
    with gr.Accordion("Prompt inspector: the exact rendered prompts of any step", open=False):
        pick = gr.Dropdown([], label="step", elem_id="inspector-step")
        with gr.Row():
            actor_prompt = gr.Code(
                label="actor prompt",
                language=None,
                lines=12,
                max_lines=30,
                interactive=False,
                wrap_lines=True,
            )
            rehearser_prompt = gr.Code(
                label="rehearser prompt",
                language=None,
                lines=12,
                max_lines=30,
                interactive=False,
                wrap_lines=True,
            )

    outputs = [
        status, schema_box, rehearsals, memory, steps, outcome, download, pick,
        manual_box, manual_call, manual_text, manual_status, showcase_note, estimate,
    ]

    def ask_for_response(call: PendingCall, view: render.LiveView) -> dict:
        rehearsed = render.pending_rehearsal(view, call.name, call.arguments)
        return {
            manual_box: gr.Group(visible=True),
            manual_call: render.manual_call_html(call.name, call.arguments),
            manual_text: render.to_json(rehearsed) if rehearsed is not None else "{}",
            manual_status: "",
            status: render.status_html(f"waiting for your response to {call.name}…", "busy"),
        }

    def run_episode(session: Session | None, *values: Any) -> Iterator[dict]:
        if session is None:
            yield {status: render.status_html(NO_SESSION, "error")}
            return
        try:
            req = RunRequest.from_controls(*values).check(ctx.options)
            task = build_task(req)
        except SchemaError as err:  # located, beside the editor; nothing the user typed changes
            yield {
                schema_box: render.schema_error_html(err),
                status: render.status_html(
                    "fix the schema first: its error is shown beside the editor", "error"
                ),
            }
            return
        except EnvaceError as err:
            yield {status: render.status_html(ctx.options.redact(str(err)), "error")}
            return
        yield {
            schema_box: render.schema_ok_html(task.tools),
            showcase_note: "",
            rehearsals: [],
            memory: MEMORY_PLACEHOLDER,
            steps: render.steps_placeholder(),
            outcome: "",
            download: gr.DownloadButton(value=None, interactive=False),
            pick: gr.Dropdown(choices=[], value=None),
        }
        try:
            backend = yield from await_model(ctx.holder, ctx.options, lambda html: {status: html})
            # The time limit fitted to the model's measured speed (the sliders carry the rest).
            config = build_config(req, ctx.run_settings(), backend)
        except EnvaceError as err:
            yield {status: render.status_html(ctx.options.redact(str(err)), "error")}
            return
        cancel = session.begin()
        view = render.LiveView()
        throttle = Throttle()
        manual = None
        if task.env == MANUAL:
            manual, config = runner.manual_environment(task, config, ctx.options.manual_seconds, cancel)
        session.manual = manual
        asked: int | None = None
        events = runner.episode_events(task, config, cancel, manual)
        for event in runner.with_idle_ticks(events) if manual is not None else events:
            if event is None:  # the engine is waiting: for the response typed here?
                call = manual.pending() if manual is not None else None
                if call is not None and call.id != asked:
                    asked = call.id
                    yield ask_for_response(call, view)
                continue
            if asked is not None and manual is not None and manual.pending() is None:
                asked = None
                yield {manual_box: gr.Group(visible=False)}
            view.apply(event)
            if isinstance(event, EpisodeFinished):
                break
            if isinstance(event, Generating) and not throttle():
                continue
            yield {
                status: render.status_html(render.progress_text(view), "busy"),
                rehearsals: render.rehearsal_messages(view),
                memory: render.memory_html(view.trajectory.memory if view.trajectory else None)
                or MEMORY_PLACEHOLDER,
                steps: render.steps_html(view),
            }
        traj = view.trajectory
        assert traj is not None
        ctx.holder.observe(traj)
        session.trajectory = traj
        session.manual = None
        choices = render.inspector_choices(traj)
        yield {
            status: render.status_html(render.progress_text(view), render.outcome_kind(traj)),
            rehearsals: render.rehearsal_messages(view),
            memory: shown_memory(traj),
            steps: render.steps_html(view),
            outcome: render.outcome_html(traj),
            download: gr.DownloadButton(
                value=session.save_json(f"trajectory-{traj.mode}.json", traj.to_dict()), interactive=True
            ),
            pick: gr.Dropdown(choices=choices, value=choices[0][1] if choices else None),
            manual_box: gr.Group(visible=False),
            # The estimate after the speed this run saw (ModelHolder.observe).
            estimate: estimate_for(ctx, traj.mode, traj.n or 1, config.max_steps, config.sampling.max_new_tokens),
        }

    def send_response(session: Session | None, text: str) -> str:
        manual = session.manual if session is not None else None
        call = manual.pending() if manual is not None else None
        if call is None:
            return render.status_html("no call is waiting for a response", "error")
        try:
            manual.respond(text or "", call.id)
        except EnvaceError as err:  # not JSON: say so, keep the text for fixing
            return render.status_html(str(err), "error")
        return render.status_html(f"sent: the response of {call.name}", "ok")

    def show_prompts(session: Session | None, key: str | None) -> tuple[str, str]:
        return render.inspector_prompts(session.trajectory if session else None, key)

    def load_example(name: str) -> tuple:
        task = example_tasks(name)[0]
        text = example_tools(name)
        return (
            text,
            name,
            gr.Dropdown(choices=_task_choices(name), value=task.name),
            task.prompt,
            schema_status(text),
            *showcase_panels(name),
        )

    def environment_changed(env: str) -> gr.Dropdown:
        choices = _task_choices(env)
        return gr.Dropdown(
            choices=choices, value=choices[0][1] if choices else None, interactive=bool(choices)
        )

    def task_picked(env: str, name: str | None, current: str) -> str:
        return find_example(env, name).prompt if name and env != NO_ENVIRONMENT else current

    private: dict[str, Any] = {"api_visibility": "private"}
    inputs = [state, editor, environment, message, mode, n, *sampling.inputs()]
    for trigger in (run.click, message.submit):
        off_while_running(run, trigger, run_episode, inputs, outputs, **ctx.streamed_event())
    stop.click(stop_session, [state], None, queue=False, **private)
    # Outside the model queue: the run that waits for this response holds it.
    manual_send.click(send_response, [state, manual_text], [manual_status], queue=False, **private)
    editor.change(schema_status, [editor], [schema_box], queue=False, trigger_mode="always_last", **private)
    example.input(
        load_example,
        [example],
        [editor, environment, task_pick, message, schema_box, showcase_note, rehearsals, memory, steps, outcome],
        queue=False,
        **private,
    )
    fit_to_model(ctx, n, sampling, mode, estimate)
    environment.input(environment_changed, [environment], [task_pick], queue=False, **private)
    task_pick.input(task_picked, [environment, task_pick, message], [message], queue=False, **private)
    pick.change(show_prompts, [state, pick], [actor_prompt, rehearser_prompt], queue=False, **private)
    return Playground(editor, schema_box, environment, message, status, steps)

