"""The API endpoints ``/run``, ``/compare`` and (outside public mode) ``/run_manual``, for
gradio_client: plain JSON in and out.

Every endpoint takes a conversation too: ``message`` is the user's message, or a list of
them (the user turns, in order: the first, then each follow-up, sent once the one before is
answered, against the same environment, its state carried over). The record holds them all:
``prompt`` and ``follow_ups``, ``answers`` (one per user message), ``user_turn`` on each
turn and rehearsal. Public mode caps a conversation's messages (``inputs.PUBLIC_USER_TURNS``).
The arguments keep their places: a caller that sends one message sends what it always did.
Requests go through ``inputs.resolve``, as the Playground's do: the same checks and caps.
"""

from __future__ import annotations

import inspect
import json
import threading
from dataclasses import dataclass, replace
from typing import Any, Callable

import gradio as gr

from envace_demo.envs.manual import PendingCall
from envace_demo.errors import EnvaceError
from envace_demo.models.base import Sampling
from envace_demo.record import Trajectory
from envace_demo.ui import runner
from envace_demo.ui.common import AppContext
from envace_demo.ui.fairness import cancelled_when_gone, current_job
from envace_demo.ui.inputs import MANUAL, RunRequest, compare_modes, resolve

_S = Sampling()
_REQUIRED = inspect.Parameter.empty


def run_parameters(ctx: AppContext) -> list[tuple[str, Any, Any]]:
    """(name, type, default) of the knobs every endpoint takes after its own arguments; the
    defaults are the server's, within its caps."""
    return [
        ("n", int, 2),
        ("temperature", float, _S.temperature),
        ("top_p", float, _S.top_p),
        ("top_k", int, _S.top_k),
        ("max_new_tokens", int, min(ctx.settings.max_new_tokens, ctx.options.max_new_tokens)),
        ("seed", int | None, 0),
        ("constrained", bool, True),
        ("max_steps", int, min(ctx.settings.max_steps, ctx.options.max_steps)),
    ]


@dataclass
class Call:
    """One API call: the cancel switch of its episodes (set when its client is gone) and its
    wait in the queue, which each of its records carries."""

    cancel: threading.Event
    queued_seconds: float | None

    def episode(self, task: Any, config: Any, manual: Any = None) -> Trajectory:
        traj = runner.run_to_end(task, config, self.cancel, manual=manual)
        traj.queued_seconds = self.queued_seconds
        return traj


def endpoint(
    ctx: AppContext, leading: list[tuple[str, Any, Any]], body: Callable[[dict, Call], dict]
) -> Callable:
    """``body(values)`` behind a real signature (``leading`` + the run parameters): gradio reads
    it to document the endpoint, and gradio_client callers pass arguments by name or position.
    A list of messages in ``message`` becomes the first and its follow-ups."""
    params = [
        inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=kind)
        for name, kind, default in leading + run_parameters(ctx)
    ]
    signature = inspect.Signature(params, return_annotation=dict[str, Any])

    def call(*args: Any, **kwargs: Any) -> dict[str, Any]:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        values = _conversation(dict(bound.arguments))
        job = current_job()  # queued: its wait goes into the records, its client's leaving stops it
        run = Call(threading.Event(), job.queued_seconds if job is not None else None)
        try:
            with cancelled_when_gone(job, run.cancel):
                # Records hold what tools and servers answered: shown as a visitor may see them.
                return ctx.options.redact(body(values, run))
        except EnvaceError as err:
            # A refused request is the visitor's, not a fault of the server: no traceback in its log.
            raise gr.Error(ctx.options.redact(str(err)), print_exception=False) from None

    call.__signature__ = signature  # type: ignore[attr-defined]
    call.__annotations__ = {p.name: p.annotation for p in params} | {"return": dict[str, Any]}
    call.__name__, call.__doc__ = body.__name__, body.__doc__
    return call


def make_endpoints(ctx: AppContext) -> dict[str, Callable[..., dict]]:
    """``run``, ``compare`` and (outside public mode) ``run_manual``."""

    def prepare(req: RunRequest):
        """(task, config) of a request: the model awaited, then the Playground's resolver."""
        backend = ctx.holder.wait(timeout=ctx.options.model_wait_seconds)
        return resolve(req, ctx.options, ctx.run_settings(), backend)

    def run(values: dict, call: Call) -> dict[str, Any]:
        """Run one episode and return its trajectory record (the format of the JSON download).

        tools: tool schemas as JSON text (OpenAI, bare functions, BFCL or pydantic JSON Schema).
        environment: bank, files, library, or none (nothing is executed).
        message: the user's message; or a list of messages, a conversation (each answered in
        turn, on the state the one before left: the record's ``answers`` has one per message).
        mode: none, parallel, sequential or imagine.
        """
        task, config = prepare(RunRequest(**values))
        return call.episode(task, config).to_dict()

    def compare(values: dict, call: Call) -> dict[str, Any]:
        """Run the task without rehearsal (mode none) and with it, same seed and sampling.

        Returns {"metrics": {mode: {success, real_calls, real_errors, tokens, seconds,
        fidelity, ended}}, "trajectories": {mode: record}}.
        """
        mode = values.pop("rehearsal_mode")
        modes = compare_modes(mode)
        task, config = prepare(RunRequest(**values, mode=mode))
        trajs = {m: call.episode(task, replace(config, mode=m)) for m in modes}
        return {
            "metrics": {m: runner.metrics(t) for m, t in trajs.items()},
            "trajectories": {m: t.to_dict() for m, t in trajs.items()},
        }

    def run_manual(values: dict, call: Call) -> dict[str, Any]:
        """Run one episode in the manual environment: ``responses`` (a JSON array) holds the
        real response of each committed call, in order (over every user message, where
        ``message`` is a list). A call beyond the list ends the episode with an environment
        error that says so. Returns the trajectory record.
        """
        typed = _responses(values.pop("responses"))
        task, config = prepare(RunRequest(**values, environment=MANUAL))
        answers = list(typed)

        def answer(pending: PendingCall) -> None:
            if answers:
                value = answers.pop(0)  # a bare value is the tool's result, as typed in the UI
                manual.respond(value if isinstance(value, (dict, list)) else {"result": value}, pending.id)
            else:
                manual.abort(f"no response given for call {pending.id} ({len(typed)} in the request)")

        manual, config = runner.manual_environment(task, config, timeout=5.0, on_request=answer)
        return call.episode(task, config, manual=manual).to_dict()

    message = ("message", str | list[str], _REQUIRED)  # a list: the user turns of a conversation
    request = [("tools", str, _REQUIRED), ("environment", str, _REQUIRED), message]
    endpoints = {
        "run": endpoint(ctx, request + [("mode", str, "parallel")], run),
        "compare": endpoint(ctx, request + [("rehearsal_mode", str, "parallel")], compare),
    }
    if ctx.options.allow_manual:
        leading = [("tools", str, _REQUIRED), message, ("responses", str, _REQUIRED),
                   ("mode", str, "parallel")]
        endpoints["run_manual"] = endpoint(ctx, leading, run_manual)
    return endpoints


def _conversation(values: dict) -> dict:
    """``values`` with a list of messages read as the first message and its follow-ups."""
    said = values.get("message")
    if not isinstance(said, list):
        return values
    if not said or not all(isinstance(m, str) for m in said):
        raise gr.Error(
            "message: expected a text, or a non-empty list of texts (the user's messages in order)",
            print_exception=False,
        )
    return {**values, "message": said[0], "follow_ups": said[1:]}


def _responses(text: Any) -> list:
    try:
        typed = json.loads(text)
    except (TypeError, ValueError) as err:
        raise gr.Error(f"responses: not valid JSON ({err})") from None
    if not isinstance(typed, list):
        raise gr.Error("responses: expected a JSON array, one response per committed call")
    return typed
