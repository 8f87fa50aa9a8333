"""The Playground's handlers: a Run (one handler per queue) and a follow-up, each streamed
into the panels between the buttons turned off and on again."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, Iterator

import gradio as gr

from envace_demo.envs.manual import PendingCall
from envace_demo.engine import EpisodeConfig
from envace_demo.errors import ConfigError, EnvaceError, SchemaError, StorageError
from envace_demo.events import EpisodeFinished, Generating
from envace_demo.tasks import Task
from envace_demo.ui import bfcl_entries, render, runner
from envace_demo.ui.common import NO_SESSION, AppContext, Throttle, await_model, estimate_for
from envace_demo.ui.fairness import Job, current_job, streamed_until_gone
from envace_demo.ui.inputs import MANUAL, RunRequest, can_follow_up, max_user_turns, resolve
from envace_demo.ui.playground_layout import FOLLOW_UP_FIRST, MEMORY_PLACEHOLDER, Playground, shown_memory
from envace_demo.ui.session import Conversation, Session

log = logging.getLogger(__name__)


def follow_up_refusal(conversation: Conversation | None, options: Any) -> str | None:
    """Why the session's conversation cannot take a follow-up now (None: it can)."""
    if conversation is None or conversation.trajectory is None:
        return FOLLOW_UP_FIRST
    why = can_follow_up(conversation.trajectory, options)
    if why is None and conversation.environment is None:
        return FOLLOW_UP_FIRST
    return why


def _not_manual(env: str) -> str | None:
    if env == MANUAL:
        return "its run waits on you between generations: it starts from its own Run button"
    return None


def _manual_only(env: str) -> str | None:
    return None if env == MANUAL else "the manual environment's Run runs that environment only"


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
            if bfcl_entries.is_entry(traj.environment):
                left = f" (the entry's next turn, prefilled: BFCL's checker scores its own words){left}"
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
        shown = bfcl_entries.shown(traj)  # a BFCL entry with turns left: not judged yet
        status = render.status_html(render.progress_text(view), render.outcome_kind(shown))
        try:  # the record as a visitor may see it; a full disk leaves no half file and no broken panels
            saved = session.save_json(f"trajectory-{traj.mode}.json", ctx.options.redact(traj.to_dict()))
        except StorageError as err:
            saved, status = None, render.status_html(ctx.options.redact(str(err)), "error")
        return {
            p.status: status,
            p.rehearsals: render.messages_for(view),
            p.memory: shown_memory(traj),
            p.steps: render.steps_html(view),
            p.outcome: render.outcome_html(shown),
            p.download: gr.DownloadButton(value=saved, interactive=saved is not None),
            self.ui.inspector.pick: gr.Dropdown(choices=choices, value=choices[0][1] if choices else None),
            self.ui.manual.box: gr.Group(visible=False),
            # A follow-up's message now heads its steps: the box is ready for the next one
            # (a BFCL entry's next turn, where it has one).
            self.ui.follow_up.text: bfcl_entries.next_turn(traj) or ("" if followed else gr.skip()),
            # The estimate after the speed this run saw (ModelHolder.observe).
            self.ui.request.estimate: estimate_for(
                ctx, traj.mode, traj.n or 1, config.max_steps, config.sampling.max_new_tokens
            ),
        }
