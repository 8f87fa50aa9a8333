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

from typing import Any

import gradio as gr

from envace_demo.errors import EnvaceError
from envace_demo.ui import render
from envace_demo.ui.common import AppContext, fit_to_model, stop_session
from envace_demo.ui.inputs import MANUAL, NO_ENVIRONMENT, example_tasks, example_tools, find_example, task_choices
from envace_demo.ui.playground_layout import Playground, layout, schema_status, showcase_panels, shown_memory
from envace_demo.ui.playground_run import PlaygroundRun, follow_up_refusal
from envace_demo.ui.session import Session

__all__ = [
    "Playground", "PlaygroundRun", "build_playground", "follow_up_refusal", "load_example", "schema_status",
    "send_response", "show_prompts", "showcase_panels", "shown_memory",
]


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
    ui = layout(ctx)
    _wire(ctx, ui, state)
    return ui
