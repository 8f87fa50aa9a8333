"""The Playground's layout: its panels as dataclasses of components, built top to bottom,
and what they show before any run (the schema's status, the recorded showcase)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import gradio as gr

from envace_demo import memory as memory_mod
from envace_demo import showcase as showcase_mod
from envace_demo.errors import EnvaceError, SchemaError
from envace_demo.policy import DEFAULT_POLICY, InputPolicy
from envace_demo.record import Trajectory
from envace_demo.schemas import load_tools
from envace_demo.ui import bfcl_entries, render
from envace_demo.ui.common import AppContext, SamplingControls, json_editor, mode_radio, sampling_controls
from envace_demo.ui.options import UIOptions
from envace_demo.ui.inputs import (
    NO_ENVIRONMENT,
    environment_choices,
    example_tasks,
    example_tools,
    foreign_tools,
    foreign_tools_text,
    gallery,
    max_user_turns,
    task_choices,
)

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
    empty panels when it has none (a BFCL entry never has one)."""
    if bfcl_entries.is_entry(env):
        return "", [], MEMORY_PLACEHOLDER, render.steps_placeholder(), ""
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


def example_choices(options: UIOptions) -> list[tuple[str, str]]:
    """The examples: the built-in environments, then the BFCL multi-turn entries offered."""
    entries = bfcl_entries.choices(options.public, max_user_turns(options))
    return [(name, name) for name in gallery()] + [(label.split(":")[0], env) for label, env in entries]


def _schema_panel(ctx: AppContext) -> SchemaPanel:
    example = gr.Radio(
        example_choices(ctx.options),
        value=_FIRST_ENV,
        label="Tool schemas: start from an example (a BFCL one is a conversation), or paste your own",
        elem_id="schema-example",
    )
    editor = json_editor(
        "tools (OpenAI, bare functions, BFCL or pydantic JSON Schema)", "schema-editor", lines=16,
        value=example_tools(_FIRST_ENV),
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
        text = json_editor(
            "real response (JSON; it starts as the rehearsed one: edit it, then send)", "manual-response",
            lines=6, max_lines=12,
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


def layout(ctx: AppContext) -> Playground:
    with gr.Row(equal_height=False):
        with gr.Column(scale=5, min_width=360):
            schema = _schema_panel(ctx)
        with gr.Column(scale=4, min_width=320):
            request = _request_panel(ctx)
    note, rehearsed, memory_card, steps_card, outcome_card = showcase_panels(_FIRST_ENV)
    live = _live_panels(note, rehearsed, memory_card, steps_card)
    manual = _manual_box()
    panels = RunPanels(*live, *_outcome_row(outcome_card))
    follow_up = _follow_up_box()
    return Playground(schema, request, panels, manual, follow_up, _inspector())
