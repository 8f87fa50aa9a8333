"""The API endpoints ``/run``, ``/compare`` and (outside public mode) ``/run_manual``, for
gradio_client: plain JSON in and out."""

from __future__ import annotations

from typing import Any, Callable

import gradio as gr

import json

from envace_demo.envs.manual import PendingCall
from envace_demo.errors import EnvaceError
from envace_demo.models.base import Sampling
from envace_demo.ui import runner
from envace_demo.ui.common import AppContext
from envace_demo.ui.inputs import MANUAL, RunRequest, build_config, build_task, compare_modes

_S = Sampling()


def make_endpoints(ctx: AppContext) -> dict[str, Callable[..., dict]]:
    """``run`` and ``compare``, with the server's defaults baked into their signatures."""
    default_tokens = min(ctx.settings.max_new_tokens, ctx.options.max_new_tokens)
    default_steps = min(ctx.settings.max_steps, ctx.options.max_steps)

    def prepare(req: RunRequest):
        req.check(ctx.options)
        task = build_task(req)
        backend = ctx.holder.wait(timeout=ctx.options.model_wait_seconds)
        return task, backend

    def run(
        tools: str,
        environment: str,
        message: str,
        mode: str = "parallel",
        n: int = 2,
        temperature: float = _S.temperature,
        top_p: float = _S.top_p,
        top_k: int = _S.top_k,
        max_new_tokens: int = default_tokens,
        seed: int | None = 0,
        constrained: bool = True,
        max_steps: int = default_steps,
    ) -> dict[str, Any]:
        """Run one episode and return its trajectory record (the format of the JSON download).

        tools: tool schemas as JSON text (OpenAI, bare functions, BFCL or pydantic JSON Schema).
        environment: bank, files, library, or none (nothing is executed).
        mode: none, parallel, sequential or imagine.
        """
        req = RunRequest(
            tools,
            environment,
            message,
            mode,
            n,
            temperature,
            top_p,
            top_k,
            max_new_tokens,
            seed,
            constrained,
            max_steps,
        )
        try:
            task, backend = prepare(req)
            return runner.run_to_end(task, build_config(req, ctx.settings, backend)).to_dict()
        except EnvaceError as err:
            raise gr.Error(ctx.options.redact(str(err))) from None

    def compare(
        tools: str,
        environment: str,
        message: str,
        rehearsal_mode: str = "parallel",
        n: int = 2,
        temperature: float = _S.temperature,
        top_p: float = _S.top_p,
        top_k: int = _S.top_k,
        max_new_tokens: int = default_tokens,
        seed: int | None = 0,
        constrained: bool = True,
        max_steps: int = default_steps,
    ) -> dict[str, Any]:
        """Run the task without rehearsal (mode none) and with it, same seed and sampling.

        Returns {"metrics": {mode: {success, real_calls, real_errors, tokens, seconds,
        fidelity, ended}}, "trajectories": {mode: record}}.
        """
        req = RunRequest(
            tools,
            environment,
            message,
            rehearsal_mode,
            n,
            temperature,
            top_p,
            top_k,
            max_new_tokens,
            seed,
            constrained,
            max_steps,
        )
        try:
            modes = compare_modes(rehearsal_mode)
            task, backend = prepare(req)
            trajs = {
                m: runner.run_to_end(task, build_config(req, ctx.settings, backend, mode=m)) for m in modes
            }
        except EnvaceError as err:
            raise gr.Error(ctx.options.redact(str(err))) from None
        return {
            "metrics": {m: runner.metrics(t) for m, t in trajs.items()},
            "trajectories": {m: t.to_dict() for m, t in trajs.items()},
        }

    def run_manual(
        tools: str,
        message: str,
        responses: str,
        mode: str = "parallel",
        n: int = 2,
        temperature: float = _S.temperature,
        top_p: float = _S.top_p,
        top_k: int = _S.top_k,
        max_new_tokens: int = default_tokens,
        seed: int | None = 0,
        constrained: bool = True,
        max_steps: int = default_steps,
    ) -> dict[str, Any]:
        """Run one episode in the manual environment: ``responses`` (a JSON array) holds the
        real response of each committed call, in order. A call beyond the list ends the
        episode with an environment error that says so. Returns the trajectory record.
        """
        try:
            typed = json.loads(responses)
        except (TypeError, ValueError) as err:
            raise gr.Error(f"responses: not valid JSON ({err})") from None
        if not isinstance(typed, list):
            raise gr.Error("responses: expected a JSON array, one response per committed call")
        req = RunRequest(
            tools, MANUAL, message, mode, n, temperature, top_p, top_k, max_new_tokens, seed, constrained, max_steps
        )
        try:
            task, backend = prepare(req)
            answers = list(typed)

            def answer(call: PendingCall) -> None:
                if answers:
                    value = answers.pop(0)  # a bare value is the tool's result, as typed in the UI
                    manual.respond(value if isinstance(value, (dict, list)) else {"result": value}, call.id)
                else:
                    manual.abort(f"no response given for call {call.id} ({len(typed)} in the request)")

            manual, config = runner.manual_environment(
                task, build_config(req, ctx.settings, backend), timeout=5.0, on_request=answer
            )
            return runner.run_to_end(task, config, manual=manual).to_dict()
        except EnvaceError as err:
            raise gr.Error(ctx.options.redact(str(err))) from None

    endpoints = {"run": run, "compare": compare}
    if ctx.options.allow_manual:
        endpoints["run_manual"] = run_manual
    return endpoints
