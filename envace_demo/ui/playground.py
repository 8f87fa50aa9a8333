"""The Playground tab: schemas, a request, one episode streamed as it runs."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any, Iterator

import gradio as gr

from envace_demo import memory as memory_mod
from envace_demo import showcase as showcase_mod
from envace_demo.envs.manual import PendingCall
from envace_demo.errors import EnvaceError, SchemaError, StorageError
from envace_demo.events import EpisodeFinished, Generating
from envace_demo.policy import DEFAULT_POLICY, InputPolicy
from envace_demo.record import Trajectory
from envace_demo.schemas import load_tools
from envace_demo.ui import render, runner
from envace_demo.ui.common import (
    NO_SESSION,
    AppContext,
    SamplingControls,
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
    check_prompts,
    environment_choices,
    example_tasks,
    example_tools,
    find_example,
    foreign_tools,
    foreign_tools_text,
    gallery,
)
from envace_demo.ui.fairness import current_job, streamed_until_gone
from envace_demo.ui.session import Session

log = logging.getLogger(__name__)
_FIRST_ENV = next(iter(gallery()))
MEMORY_PLACEHOLDER = render.placeholder_card(
    "Rehearsal memory",
    "What the rehearsals tried and predicted, condensed for the committed run, appears here.",
)


def schema_status(text: str, policy: InputPolicy = DEFAULT_POLICY, environment: str | None = None) -> str:
    """The editor's status box: the schema loaded as Run loads it (the app's policy), so
    the box never shows "ok" for a schema that Run then refuses; tools the picked example
    environment does not have are named, with what to pick instead."""
    try:
        tools = load_tools(text or "", policy)
    except SchemaError as err:
        return render.schema_error_html(err)
    foreign = foreign_tools(tools, environment or NO_ENVIRONMENT)
    if foreign:
        own = sorted(t.name for t in load_tools(example_tools(environment)))
        return render.status_html(foreign_tools_text(foreign, environment, own), "warn")
    return render.schema_ok_html(tools)


def shown_memory(traj: Trajectory) -> str:
    """The memory card of a finished run; a run cut before the engine summed up its
    rehearsals (imagine mode at a time limit) gets them summed up here."""
    memory = traj.memory
    if memory is None and traj.rehearsals:
        memory = memory_mod.summarize(traj.rehearsals)
    return render.memory_html(memory) or MEMORY_PLACEHOLDER


def showcase_n(env: str, default: int = 2) -> int:
    """The N ``env``'s showcase was recorded with: the slider's value until the model is
    timed, so that N does not change under a visitor who reads the showcase meanwhile."""
    try:
        show = showcase_mod.load(env)
    except EnvaceError:
        return default
    n = (show.budget or {}).get("n") if show is not None else None
    return n if isinstance(n, int) and n >= 1 else default


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
class SchemaPanel:
    example: gr.Radio
    editor: gr.Code
    box: gr.HTML  # the schema's status: ok, or its located error


@dataclass
class RequestPanel:
    environment: gr.Dropdown
    task_pick: gr.Dropdown
    message: gr.Textbox
    mode: gr.Radio
    n: gr.Slider
    sampling: SamplingControls
    run: gr.Button
    stop: gr.Button
    estimate: gr.HTML


@dataclass
class RunPanels:
    """What a run fills: its status, the rehearsals, the memory, the committed steps, the outcome."""

    status: gr.HTML
    showcase_note: gr.HTML
    rehearsals: gr.Chatbot
    memory: gr.HTML
    steps: gr.HTML
    outcome: gr.HTML
    download: gr.DownloadButton


@dataclass
class ManualBox:
    """The manual environment's box: shown while a committed call waits for the response you type."""

    box: gr.Group
    call: gr.HTML
    text: gr.Code
    send: gr.Button
    status: gr.HTML


@dataclass
class Inspector:
    pick: gr.Dropdown
    actor_prompt: gr.Code
    rehearser_prompt: gr.Code


@dataclass
class Playground:
    schema: SchemaPanel
    request: RequestPanel
    panels: RunPanels
    manual: ManualBox
    inspector: Inspector

    def run_inputs(self, state: gr.State) -> list[gr.components.Component]:
        """In ``RunRequest.from_controls``' order, after the visitor's session."""
        r = self.request
        return [state, self.schema.editor, r.environment, r.message, r.mode, r.n, *r.sampling.inputs()]

    def run_outputs(self) -> list[gr.components.Component]:
        p, m = self.panels, self.manual
        return [
            p.status, self.schema.box, p.rehearsals, p.memory, p.steps, p.outcome, p.download,
            self.inspector.pick, m.box, m.call, m.text, m.status, p.showcase_note, self.request.estimate,
        ]


def _schema_panel() -> SchemaPanel:
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
    box = gr.HTML(schema_status(example_tools(_FIRST_ENV)), elem_id="schema-status")
    return SchemaPanel(example, editor, box)


def _request_panel(ctx: AppContext) -> RequestPanel:
    first_task = example_tasks(_FIRST_ENV)[0]
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
    n_start = min(showcase_n(_FIRST_ENV), ctx.options.max_n)  # until the model is timed: the showcase's
    n = gr.Slider(1, ctx.options.max_n, value=n_start, step=1, label="rehearsal budget N", elem_id="rehearsal-n")
    sampling = sampling_controls(ctx)
    with gr.Row():
        run = gr.Button("Run", variant="primary", elem_id="run-button")
        stop = gr.Button("Stop", variant="stop", elem_id="stop-button")
    estimate = gr.HTML(
        render.estimate_html(None, "parallel", n_start, 1, 1, ctx.settings.episode_seconds), elem_id="run-estimate"
    )
    return RequestPanel(environment, task_pick, message, mode, n, sampling, run, stop, estimate)


def _live_panels(note: str, rehearsed: list[dict], memory_card: str, steps_card: str) -> tuple:
    """(status, showcase note, rehearsals, memory, steps), showing the showcase at first."""
    status = gr.HTML(render.status_html("ready: press Run"), elem_id="run-status")
    showcase_note = gr.HTML(note, elem_id="showcase")
    with gr.Row(equal_height=False):
        with gr.Column(scale=3):
            rehearsals = gr.Chatbot(
                rehearsed,
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
            memory = gr.HTML(memory_card, elem_id="memory-card")
    gr.Markdown("### Committed run")
    steps = gr.HTML(steps_card, elem_id="committed-steps")
    return status, showcase_note, rehearsals, memory, steps


def _manual_box() -> ManualBox:
    with gr.Group(visible=False, elem_id="manual-box") as box:
        call = gr.HTML(elem_id="manual-call")
        text = gr.Code(
            language="json",
            interactive=True,
            lines=6,
            max_lines=12,
            label="real response (JSON; it starts as the rehearsed one: edit it, then send)",
            elem_id="manual-response",
        )
        with gr.Row():
            send = gr.Button("Send response", variant="primary", elem_id="manual-send")
        status = gr.HTML(elem_id="manual-status")
    return ManualBox(box, call, text, send, status)


def _outcome_row(outcome_card: str) -> tuple[gr.HTML, gr.DownloadButton]:
    with gr.Row(equal_height=False):
        with gr.Column(scale=4):
            outcome = gr.HTML(outcome_card, elem_id="outcome")
        with gr.Column(scale=1, min_width=220):
            download = gr.DownloadButton("Download the record (JSON)", interactive=False, elem_id="download")
    return outcome, download


def _inspector() -> Inspector:
    with gr.Accordion("Prompt inspector: the exact rendered prompts of any step", open=False):
        pick = gr.Dropdown([], label="step", elem_id="inspector-step")
        with gr.Row():
            prompts = [
                gr.Code(
                    label=label, language=None, lines=12, max_lines=30, interactive=False, wrap_lines=True
                )
                for label in ("actor prompt", "rehearser prompt")
            ]
    return Inspector(pick, *prompts)


def _layout(ctx: AppContext) -> Playground:
    with gr.Row(equal_height=False):
        with gr.Column(scale=5, min_width=360):
            schema = _schema_panel()
        with gr.Column(scale=4, min_width=320):
            request = _request_panel(ctx)
    note, rehearsed, memory_card, steps_card, outcome_card = showcase_panels(_FIRST_ENV)
    live = _live_panels(note, rehearsed, memory_card, steps_card)
    manual = _manual_box()
    panels = RunPanels(*live, *_outcome_row(outcome_card))
    return Playground(schema, request, panels, manual, _inspector())


class PlaygroundRun:
    """The Run button's handler: one episode, checked, then streamed into the tab's panels."""

    def __init__(self, ctx: AppContext, ui: Playground):
        self.ctx, self.ui = ctx, ui

    # Both handlers run on every Run, one after the other; the one whose environment it is not
    # yields one update that changes nothing (a generator that yields nothing left the page's
    # finished run wiped, and an empty dict is an error for gradio).

    def on_model(self, session: Session | None, *values: Any) -> Iterator[dict]:
        """Run's handler in the model queue: every environment but the manual one."""
        if values[1] != MANUAL:
            yield from self.run_episode(session, *values)
        else:
            yield {self.ui.panels.status: gr.skip()}

    def on_manual(self, session: Session | None, *values: Any) -> Iterator[dict]:
        """Run's handler for the manual environment: in a queue of its own, since it waits on
        a person between generations (the backend's lock orders those with everybody's)."""
        if values[1] == MANUAL:
            yield from self.run_episode(session, *values)
        else:
            yield {self.ui.panels.status: gr.skip()}

    def run_episode(self, session: Session | None, *values: Any) -> Iterator[dict]:
        p, ctx = self.ui.panels, self.ctx
        job = current_job()  # its wait in the queue; its client's leaving stops the run
        if session is None:
            yield {p.status: render.status_html(NO_SESSION, "error")}
            return
        try:
            req = RunRequest.from_controls(*values).check(ctx.options)
            task = build_task(req)
        except SchemaError as err:  # located, beside the editor; nothing the user typed changes
            yield {
                self.ui.schema.box: render.schema_error_html(err),
                p.status: render.status_html(
                    "fix the schema first: its error is shown beside the editor", "error"
                ),
            }
            return
        except EnvaceError as err:
            yield self._refused(err)
            return
        yield self._cleared(task.tools)
        try:
            backend = yield from await_model(ctx.holder, ctx.options, lambda html: {p.status: html})
            check_prompts([task], req.policy, backend)
            # The time limit fitted to the model's measured speed (the sliders carry the rest).
            config = build_config(req, ctx.run_settings(), backend)
        except EnvaceError as err:
            yield self._refused(err)
            return
        if task.env in session.known:  # this visitor's earlier real reads there: few-shot
            config = replace(config, known_results=tuple(session.known[task.env]))
        cancel = session.begin()
        view = render.LiveView()
        manual = None
        if task.env == MANUAL:
            manual, config = runner.manual_environment(task, config, ctx.options.manual_seconds, cancel)
        session.manual = manual
        events = runner.episode_events(task, config, cancel, manual)
        try:
            yield from streamed_until_gone(job, cancel, self._stream(events, view, manual))
        except EnvaceError as err:  # its environment would not open (an MCP server down): say why
            session.manual = None
            yield self._refused(err)
            return
        if view.trajectory is not None and job is not None:
            view.trajectory.queued_seconds = job.queued_seconds
        yield self._finished(session, view, config)

    def _refused(self, err: EnvaceError) -> dict:
        return {self.ui.panels.status: render.status_html(self.ctx.options.redact(str(err)), "error")}

    def _cleared(self, tools: Any) -> dict:
        """The panels emptied for a new run (the schema it runs with marked ok)."""
        p = self.ui.panels
        return {
            self.ui.schema.box: render.schema_ok_html(tools),
            p.showcase_note: "",
            p.rehearsals: [],
            p.memory: MEMORY_PLACEHOLDER,
            p.steps: render.steps_placeholder(),
            p.outcome: "",
            p.download: gr.DownloadButton(value=None, interactive=False),
            self.ui.inspector.pick: gr.Dropdown(choices=[], value=None),
        }

    def _stream(self, events: Iterator, view: render.LiveView, manual: Any) -> Iterator[dict]:
        """Live updates until the episode ends; with the manual environment, the box asks
        for each response the engine waits on, and hides once it is sent."""
        throttle = Throttle()
        asked: int | None = None
        for event in runner.with_idle_ticks(events) if manual is not None else events:
            if event is None:  # the engine is waiting: for the response typed here?
                call = manual.pending() if manual is not None else None
                if call is not None and call.id != asked:
                    asked = call.id
                    yield self._ask_for_response(call, view)
                continue
            if asked is not None and manual is not None and manual.pending() is None:
                asked = None
                yield {self.ui.manual.box: gr.Group(visible=False)}
            view.apply(event)
            if isinstance(event, EpisodeFinished):
                break
            if isinstance(event, Generating) and not throttle():
                continue
            yield self._live(view)

    def _ask_for_response(self, call: PendingCall, view: render.LiveView) -> dict:
        m = self.ui.manual
        rehearsed = render.pending_rehearsal(view, call.name, call.arguments)
        return {
            m.box: gr.Group(visible=True),
            m.call: render.manual_call_html(call.name, call.arguments),
            m.text: render.to_json(rehearsed) if rehearsed is not None else "{}",
            m.status: "",
            self.ui.panels.status: render.status_html(f"waiting for your response to {call.name}…", "busy"),
        }

    def _live(self, view: render.LiveView) -> dict:
        p = self.ui.panels
        memory = view.trajectory.memory if view.trajectory else None
        return {
            p.status: render.status_html(render.progress_text(view), "busy"),
            p.rehearsals: render.rehearsal_messages(view),
            p.memory: render.memory_html(memory) or MEMORY_PLACEHOLDER,
            p.steps: render.steps_html(view),
        }

    def _finished(self, session: Session, view: render.LiveView, config: Any) -> dict:
        """The finished run in every panel; it becomes the session's record and download."""
        p, ctx = self.ui.panels, self.ctx
        traj = view.trajectory
        assert traj is not None
        ctx.holder.observe(traj)
        session.trajectory = traj
        session.remember(traj)
        session.manual = None
        choices = render.inspector_choices(traj)
        status = render.status_html(render.progress_text(view), render.outcome_kind(traj))
        try:  # the record as a visitor may see it; a full disk leaves no half file and no broken panels
            saved = session.save_json(f"trajectory-{traj.mode}.json", ctx.options.redact(traj.to_dict()))
        except StorageError as err:
            saved, status = None, render.status_html(ctx.options.redact(str(err)), "error")
        return {
            p.status: status,
            p.rehearsals: render.rehearsal_messages(view),
            p.memory: shown_memory(traj),
            p.steps: render.steps_html(view),
            p.outcome: render.outcome_html(traj),
            p.download: gr.DownloadButton(value=saved, interactive=saved is not None),
            self.ui.inspector.pick: gr.Dropdown(choices=choices, value=choices[0][1] if choices else None),
            self.ui.manual.box: gr.Group(visible=False),
            # The estimate after the speed this run saw (ModelHolder.observe).
            self.ui.request.estimate: estimate_for(
                ctx, traj.mode, traj.n or 1, config.max_steps, config.sampling.max_new_tokens
            ),
        }


def send_response(session: Session | None, text: str) -> str:
    """The manual box's Send: the typed text answers the call the run waits on."""
    manual = session.manual if session is not None else None
    call = manual.pending() if manual is not None else None
    if call is None:
        return render.status_html("no call is waiting for a response", "error")
    try:
        manual.respond(text or "", call.id)
    except EnvaceError as err:  # not JSON: say so, keep the text for fixing
        return render.status_html(str(err), "error")
    return render.status_html(f"sent: the response of {call.name}", "info")


def show_prompts(session: Session | None, key: str | None) -> tuple[str, str]:
    return render.inspector_prompts(session.trajectory if session else None, key)


def load_example(name: str) -> tuple:
    """An example's tools, environment, first request and showcase, all at once."""
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
    return gr.Dropdown(choices=choices, value=choices[0][1] if choices else None, interactive=bool(choices))


def task_picked(env: str, name: str | None, current: str) -> str:
    return find_example(env, name).prompt if name and env != NO_ENVIRONMENT else current


def _wire(ctx: AppContext, ui: Playground, state: gr.State) -> None:
    s, r, p, m, i = ui.schema, ui.request, ui.panels, ui.manual, ui.inspector
    private: dict[str, Any] = {"api_visibility": "private"}
    run = PlaygroundRun(ctx, ui)
    inputs, outputs = ui.run_inputs(state), ui.run_outputs()
    manual = (run.on_manual, ctx.manual_event()) if ctx.options.allow_manual else None
    for trigger in (r.run.click, r.message.submit):
        off_while_running(r.run, trigger, run.on_model, inputs, outputs, then=manual, **ctx.streamed_event())
    r.stop.click(stop_session, [state], None, queue=False, **private)
    # Outside the queues: the run that waits for this response holds a slot of its own.
    m.send.click(send_response, [state, m.text], [m.status], queue=False, **private)
    policy = ctx.options.input_policy

    def editor_status(text: str, environment: str) -> str:
        return schema_status(text, policy, environment)

    for control in (s.editor, r.environment):
        control.change(editor_status, [s.editor, r.environment], [s.box], queue=False, trigger_mode="always_last",
                       **private)
    example = [s.editor, r.environment, r.task_pick, r.message, s.box]
    showcase = [p.showcase_note, p.rehearsals, p.memory, p.steps, p.outcome]  # showcase_panels' order
    s.example.input(load_example, [s.example], [*example, *showcase], queue=False, **private)
    fit_to_model(ctx, r.n, r.sampling, r.mode, r.estimate, r.environment)
    r.environment.input(environment_changed, [r.environment], [r.task_pick], queue=False, **private)
    picked = [r.environment, r.task_pick, r.message]
    r.task_pick.input(task_picked, picked, [r.message], queue=False, **private)
    i.pick.change(show_prompts, [state, i.pick], [i.actor_prompt, i.rehearser_prompt], queue=False, **private)


def build_playground(ctx: AppContext, state: gr.State) -> Playground:
    ui = _layout(ctx)
    _wire(ctx, ui, state)
    return ui
