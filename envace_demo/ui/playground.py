"""The Playground tab: schemas, a request, one episode streamed as it runs, and follow-ups.

A Run, file by file: the click turns to its queue's handler here (``PlaygroundRun``,
chosen when the events are wired: Run in the model queue, the manual environment's Run in
its own), which waits for the model (``common.await_model``), resolves the controls into
(task, episode config) in one call (``inputs.resolve``), opens the conversation's
environment (``runner.kept_environment``, kept in the visitor's ``Session``), streams the
engine's events (``runner.episode_events``) into the panels (``render``), and turns the
buttons back on. A follow-up takes the same path from its Send button, with the
conversation's request, its record so far and the new message.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any, Iterator

import gradio as gr

from envace_demo import memory as memory_mod
from envace_demo import showcase as showcase_mod
from envace_demo.envs.manual import PendingCall
from envace_demo.engine import EpisodeConfig
from envace_demo.errors import ConfigError, EnvaceError, SchemaError, StorageError
from envace_demo.events import EpisodeFinished, Generating
from envace_demo.policy import DEFAULT_POLICY, InputPolicy
from envace_demo.record import Trajectory
from envace_demo.schemas import load_tools
from envace_demo.tasks import Task
from envace_demo.ui import render, runner
from envace_demo.ui.common import (
    NO_SESSION,
    AppContext,
    SamplingControls,
    Throttle,
    await_model,
    estimate_for,
    fit_to_model,
    mode_radio,
    sampling_controls,
    stop_session,
)
from envace_demo.ui.inputs import (
    MANUAL,
    NO_ENVIRONMENT,
    RunRequest,
    can_follow_up,
    environment_choices,
    example_tasks,
    example_tools,
    find_example,
    foreign_tools,
    foreign_tools_text,
    gallery,
    max_user_turns,
    resolve,
    task_choices,
)
from envace_demo.ui.fairness import Job, current_job, streamed_until_gone
from envace_demo.ui.session import Conversation, Session

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
        render.messages_for(view),
        shown_memory(show.trajectory),
        render.steps_html(view),
        render.outcome_html(show.trajectory),
    )


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
    run: gr.Button  # every environment but the manual one: the model queue
    run_manual: gr.Button | None  # the manual environment's (its own queue); None where it is not offered
    stop: gr.Button
    estimate: gr.HTML

    def buttons(self) -> list[gr.Button]:
        return [b for b in (self.run, self.run_manual) if b is not None]


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
class FollowUpBox:
    """The next user message of the conversation the last run began (a built-in environment's)."""

    text: gr.Textbox
    send: gr.Button
    note: gr.HTML


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
    follow_up: FollowUpBox
    inspector: Inspector

    def run_inputs(self, state: gr.State) -> list[gr.components.Component]:
        """In ``RunRequest.from_controls``' order, after the visitor's session."""
        r = self.request
        return [state, self.schema.editor, r.environment, r.message, r.mode, r.n, *r.sampling.inputs()]

    def ready_outputs(self) -> list[gr.components.Component]:
        """What says whether a run may start: the Run buttons, the follow-up's Send and note."""
        return [*self.request.buttons(), self.follow_up.send, self.follow_up.note]

    def run_outputs(self) -> list[gr.components.Component]:
        p, m = self.panels, self.manual
        return [
            p.status, self.schema.box, p.rehearsals, p.memory, p.steps, p.outcome, p.download,
            self.inspector.pick, m.box, m.call, m.text, m.status, p.showcase_note, self.request.estimate,
            self.follow_up.text, *self.ready_outputs(),
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
        task_choices(_FIRST_ENV),
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
        # The manual environment's Run, in place of Run while it is picked: its run waits on
        # you between generations, in a queue of its own.
        run_manual = None
        if ctx.options.allow_manual:
            run_manual = gr.Button("Run (you answer each call)", variant="primary", visible=False,
                                   elem_id="run-manual-button")
        stop = gr.Button("Stop", variant="stop", elem_id="stop-button")
    estimate = gr.HTML(
        render.estimate_html(None, "parallel", n_start, 1, 1, ctx.settings.episode_seconds), elem_id="run-estimate"
    )
    return RequestPanel(environment, task_pick, message, mode, n, sampling, run, run_manual, stop, estimate)


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


FOLLOW_UP_FIRST = "press Run first: a follow-up goes on from a finished run on a built-in environment"


def follow_up_refusal(conversation: Conversation | None, options: Any) -> str | None:
    """Why the session's conversation cannot take a follow-up now (None: it can)."""
    if conversation is None or conversation.trajectory is None:
        return FOLLOW_UP_FIRST
    why = can_follow_up(conversation.trajectory, options)
    if why is None and conversation.environment is None:
        return FOLLOW_UP_FIRST
    return why


def _follow_up_box() -> FollowUpBox:
    gr.Markdown("### Follow-up")
    with gr.Row(equal_height=True):
        text = gr.Textbox(
            lines=1, scale=5, show_label=False, elem_id="follow-up-message",
            placeholder="the next user message: it runs on the state the last one left, in the same mode",
        )
        send = gr.Button("Send", variant="secondary", scale=1, min_width=120, interactive=False,
                         elem_id="follow-up-send")
    note = gr.HTML(render.status_html(FOLLOW_UP_FIRST.capitalize()), elem_id="follow-up-note")
    return FollowUpBox(text, send, note)


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
    follow_up = _follow_up_box()
    return Playground(schema, request, panels, manual, follow_up, _inspector())


class PlaygroundRun:
    """The Playground's handlers, one per queue, each wired to its own trigger: ``on_model``
    (Run: the model queue), ``on_manual`` (the manual environment's Run: its own queue) and
    ``on_follow_up`` (Send: the model queue). Each turns the buttons off first, streams its
    episode into the panels, and turns them back on last, however the run ended."""

    def __init__(self, ctx: AppContext, ui: Playground):
        self.ctx, self.ui = ctx, ui

    def on_model(self, session: Session | None, *controls: Any) -> Iterator[dict]:
        """Run: a new conversation in any environment but the manual one."""
        yield from self._handled(session, self.run_episode(session, controls, manual=False))

    def on_manual(self, session: Session | None, *controls: Any) -> Iterator[dict]:
        """The manual environment's Run: it waits on a person between generations (the
        backend's lock orders those with everybody's), so it holds no model slot meanwhile."""
        yield from self._handled(session, self.run_episode(session, controls, manual=True))

    def on_follow_up(self, session: Session | None, message: str) -> Iterator[dict]:
        """Send: the next user message of the session's conversation."""
        yield from self._handled(session, self.follow_up(session, message))

    def run_episode(self, session: Session, controls: tuple, manual: bool) -> Iterator[dict]:
        """A Run: the controls resolved, the panels cleared, a fresh environment kept for
        the conversation it begins, its episode streamed."""
        job = current_job()  # its wait in the queue; its client's leaving stops the run
        request = RunRequest.from_controls(*controls)
        backend = yield from self._model()
        task, config = resolve(
            request, self.ctx.options, self.ctx.run_settings(), backend,
            known=session.known, refuses=_manual_only if manual else _not_manual,
        )
        yield self._cleared(task.tools)
        conversation = session.converse(Conversation(request, runner.kept_environment(task)))
        yield from self._episode(session, job, task, config, conversation)

    def follow_up(self, session: Session, message: str) -> Iterator[dict]:
        """A follow-up: the conversation's request, its record so far and ``message``
        resolved like a Run; its episode goes on against the environment the last one left."""
        job = current_job()
        conversation = session.conversation
        why = follow_up_refusal(conversation, self.ctx.options)
        if why is not None:
            raise ConfigError(f"follow-up: {why}")
        backend = yield from self._model()
        task, config = resolve(
            conversation.request, self.ctx.options, self.ctx.run_settings(), backend,
            known=session.known, previous=conversation.trajectory, follow_up=message,
        )
        yield from self._episode(session, job, task, config, conversation)

    def _handled(self, session: Session | None, run: Iterator[dict]) -> Iterator[dict]:
        """``run``'s updates, between the buttons turned off and on again; a refusal shown
        in the status box (a schema's beside the editor), nothing typed or shown lost."""
        p = self.ui.panels
        if session is None:
            yield {p.status: render.status_html(NO_SESSION, "error")}
            return
        yield self._busy()
        try:
            yield from run
        except SchemaError as err:  # located, beside the editor
            yield {
                self.ui.schema.box: render.schema_error_html(err),
                p.status: render.status_html(
                    "fix the schema first: its error is shown beside the editor", "error"
                ),
            }
        except EnvaceError as err:
            yield self._refused(err)
        except Exception:  # a fault of the app: logged, said, and the page usable again
            log.exception("a Playground run failed")
            yield {p.status: render.status_html("the run failed on the server; try again", "error")}
        yield self.ready(session)

    def _model(self) -> Iterator[dict]:
        """Wait for the model (the status box says so meanwhile); returns the backend."""
        status = self.ui.panels.status
        return (yield from await_model(self.ctx.holder, self.ctx.options, lambda html: {status: html}))

    def _episode(
        self, session: Session, job: Job | None, task: Task, config: EpisodeConfig, conversation: Conversation
    ) -> Iterator[dict]:
        """The episode streamed into the panels; the finished record in every panel."""
        cancel = session.begin()
        view = render.LiveView(before=conversation.trajectory)
        manual = None
        if task.env == MANUAL:
            manual, config = runner.manual_environment(task, config, self.ctx.options.manual_seconds, cancel)
        session.manual = manual
        events = runner.episode_events(task, config, cancel, manual, conversation)
        try:
            yield from streamed_until_gone(job, cancel, self._stream(events, view, manual))
        except EnvaceError:  # its environment would not open (an MCP server down), or failed midway
            session.manual = None
            session.converse(None)  # its state need not match the record any more
            raise
        yield self._finished(session, view, config, job, conversation)

    def ready(self, session: Session | None) -> dict:
        """The buttons on again; Send on where the conversation may take a follow-up."""
        f, options = self.ui.follow_up, self.ctx.options
        conversation = session.conversation if session is not None else None
        why = follow_up_refusal(conversation, options)
        if why is None:
            traj = conversation.trajectory
            cap = max_user_turns(options)
            left = f" (at most {cap} in this public demo)" if cap is not None else ""
            note = render.status_html(
                f"message {2 + len(traj.follow_ups)} of this conversation{left}: it runs in mode {traj.mode} "
                "on the state the last one left; Run starts a new conversation"
            )
        else:
            note = render.status_html(why[:1].upper() + why[1:], "info")
        on = {b: gr.Button(interactive=True) for b in self.ui.request.buttons()}
        return {**on, f.send: gr.Button(interactive=why is None), f.note: note}

    def _busy(self) -> dict:
        """Every button that starts a run off while this one lasts."""
        return {b: gr.Button(interactive=False) for b in [*self.ui.request.buttons(), self.ui.follow_up.send]}

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
            p.rehearsals: render.messages_for(view),
            p.memory: render.memory_html(memory) or MEMORY_PLACEHOLDER,
            p.steps: render.steps_html(view),
        }

    def _finished(
        self, session: Session, view: render.LiveView, config: EpisodeConfig, job: Job | None,
        conversation: Conversation,
    ) -> dict:
        """The finished run in every panel; it becomes the session's record (its
        conversation's so far) and download."""
        p, ctx = self.ui.panels, self.ctx
        traj = view.trajectory
        assert traj is not None
        if job is not None:
            traj.queued_seconds = job.queued_seconds
        followed = conversation.trajectory is not None
        earlier = len(conversation.trajectory.turns) if followed else 0
        ctx.holder.observe(replace(traj, turns=traj.turns[earlier:]))  # this episode's own turns
        session.trajectory = conversation.trajectory = traj
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
            p.rehearsals: render.messages_for(view),
            p.memory: shown_memory(traj),
            p.steps: render.steps_html(view),
            p.outcome: render.outcome_html(traj),
            p.download: gr.DownloadButton(value=saved, interactive=saved is not None),
            self.ui.inspector.pick: gr.Dropdown(choices=choices, value=choices[0][1] if choices else None),
            self.ui.manual.box: gr.Group(visible=False),
            # A follow-up's message now heads its steps: the box is ready for the next one.
            self.ui.follow_up.text: "" if followed else gr.skip(),
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
        gr.Dropdown(choices=task_choices(name), value=task.name),
        task.prompt,
        schema_status(text),
        *showcase_panels(name),
    )


def environment_changed(env: str) -> gr.Dropdown:
    choices = task_choices(env)
    return gr.Dropdown(choices=choices, value=choices[0][1] if choices else None, interactive=bool(choices))


def run_buttons(env: str) -> tuple[gr.Button, gr.Button]:
    """Run, or the manual environment's Run where that environment is picked."""
    return gr.Button(visible=env != MANUAL), gr.Button(visible=env == MANUAL)


def _not_manual(env: str) -> str | None:
    if env == MANUAL:
        return "its run waits on you between generations: it starts from its own Run button"
    return None


def _manual_only(env: str) -> str | None:
    return None if env == MANUAL else "the manual environment's Run runs that environment only"


def task_picked(env: str, name: str | None, current: str) -> str:
    return find_example(env, name).prompt if name and env != NO_ENVIRONMENT else current


def _wire(ctx: AppContext, ui: Playground, state: gr.State) -> None:
    s, r, p, m, i, f = ui.schema, ui.request, ui.panels, ui.manual, ui.inspector, ui.follow_up
    private: dict[str, Any] = {"api_visibility": "private"}
    run = PlaygroundRun(ctx, ui)
    inputs, outputs, ready = ui.run_inputs(state), ui.run_outputs(), ui.ready_outputs()
    # One handler per queue, each on its own triggers; then the buttons' state, however the
    # job ended (refused at the queue's door included: .then runs after an error too).
    handlers = [(run.on_model, [r.run.click, r.message.submit], inputs, ctx.streamed_event()),
                (run.on_follow_up, [f.send.click, f.text.submit], [state, f.text], ctx.streamed_event())]
    if r.run_manual is not None:
        handlers.append((run.on_manual, [r.run_manual.click], inputs, ctx.manual_event()))
        r.environment.change(run_buttons, [r.environment], [r.run, r.run_manual], queue=False, **private)
    for handler, triggers, handler_inputs, queue in handlers:
        gr.on(triggers, handler, handler_inputs, outputs, **queue).then(
            run.ready, [state], ready, queue=False, **private
        )
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
