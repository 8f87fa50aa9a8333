"""The ``rehearse`` endpoint (API and MCP tool): one call rehearsed against a pasted schema,
as the simulated MCP server rehearses it (``envace_demo.simulate``), under the app's caps."""

from __future__ import annotations

import json
from typing import Any, Callable

import gradio as gr

from envace_demo.errors import ConfigError, EnvaceError, InputError, ModelError
from envace_demo.models.base import Sampling
from envace_demo.record import ToolCall
from envace_demo.schemas import Tool, load_tools
from envace_demo.simulate.pairs import Pair, parse_pairs
from envace_demo.simulate.rehearse import RehearsalSettings
from envace_demo.simulate.world import SimulatedWorld
from envace_demo.ui.common import AppContext
from envace_demo.ui.gpu import gpu
from envace_demo.ui.holder import ModelHolder

_S = Sampling()
# Public mode: the most history entries and examples one request may carry (each goes into the prompt).
PUBLIC_MAX_PAIRS = 16
_holder: ModelHolder | None = None  # found here by the GPU function, which may run in another process


def rehearse_endpoints(ctx: AppContext) -> dict[str, Callable[..., dict]]:
    """``rehearse``, for ``gr.api``: its signature and docstring are the API's and MCP tool's."""
    global _holder
    _holder = ctx.holder
    options = ctx.options

    # Gradio reads each argument's description, and each return line, from one line of the docstring.
    def rehearse(
        tools: str,
        call: str,
        history: str = "",
        examples: str = "",
        temperature: float = _S.temperature,
        top_p: float = _S.top_p,
        top_k: int = _S.top_k,
        max_new_tokens: int = min(ctx.settings.max_new_tokens, options.max_new_tokens),
        seed: int | None = 0,
        constrained: bool = True,
    ) -> dict[str, Any]:
        """Predict what a tool would answer to one call, without executing anything: the model
        that acts rehearses the tool's response (EnvACE's rehearser), held to the tool's
        declared response schema.

        Args:
            tools: the tool schemas as JSON text (OpenAI tools, bare functions, BFCL or pydantic JSON Schema).
            call: the call to rehearse, as JSON: {"name": "get_account", "arguments": {"account_id": "ACC-1003"}}.
            history: optional JSON array of the conversation's earlier calls and their answers, [{"name", "arguments", "result"}]; the rehearsal stays consistent with them.
            examples: optional JSON array of real calls and results, [{"name", "arguments", "result"}]; they are the few-shot block, and an identical call gets its real result.
            temperature: sampling temperature (0 = greedy).
            top_p: nucleus sampling mass.
            top_k: sample among the k likeliest tokens (0 = no limit).
            max_new_tokens: new tokens for the rehearsal.
            seed: sampling seed (the same seed, the same rehearsal).
            constrained: constrained decoding (the result follows the declared response schema).

        Returns:
            {"response": the rehearsed result or error object, "valid": whether it parsed and fits the declared shape (else the response is a REHEARSAL_FAILED error), "is_error": whether the tool failed, "source": validation, example, cache, model or failed, "problems": why attempts were refused, "raw": the model's text, "attempts", "tokens", "seconds"}.
        """
        try:
            _check_knobs(options, temperature, top_p, top_k, max_new_tokens)
            loaded = load_tools(_text("tools", tools, options.max_input_bytes), options.input_policy)
            limit = PUBLIC_MAX_PAIRS if options.public else None
            earlier = parse_pairs(_text("history", history, options.max_input_bytes), loaded, "history", limit)
            known = parse_pairs(_text("examples", examples, options.max_input_bytes), loaded, "examples", limit)
            asked = _call(_text("call", call, options.max_input_bytes))
            settings = RehearsalSettings(
                sampling=Sampling(temperature, top_p, top_k, max_new_tokens, seed),
                constrained=constrained,
                think_chars=ctx.run_settings().think_chars,
            )
            ctx.holder.wait(timeout=options.model_wait_seconds)  # a load is waited for outside the GPU
            return _rehearse_on_gpu(loaded, asked, earlier, known, settings)
        except EnvaceError as err:
            raise gr.Error(options.redact(str(err))) from None

    return {"rehearse": rehearse}


def _gpu_seconds(tools, call, history, examples, settings: RehearsalSettings) -> int:
    # Two attempts at most; a 10 tokens/s floor, plus the time to move data to the GPU.
    return 2 * settings.sampling.max_new_tokens // 10 + 15


@gpu(_gpu_seconds)
def _rehearse_on_gpu(
    tools: list[Tool], call: ToolCall, history: list[Pair], examples: list[Pair], settings: RehearsalSettings
) -> dict[str, Any]:
    if _holder is None:
        raise ModelError("no model is bound to the rehearse endpoint")
    backend = _holder.wait(timeout=0.0)
    world = SimulatedWorld(tools, lambda: backend, settings, examples)
    world.remember(history)
    return world.answer(list(history), call.name, call.arguments).to_dict()


def _text(name: str, value: Any, max_bytes: int) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ConfigError(f"{name}: expected JSON text")
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise InputError(f"{name}: {size:,} bytes, at most {max_bytes:,}")
    return value


def _call(text: str) -> ToolCall:
    try:
        value = json.loads(text)
    except ValueError as err:
        raise InputError(f"call: not valid JSON ({err})") from None
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        raise InputError('call: expected {"name": ..., "arguments": {...}}')
    arguments = value.get("arguments", {})
    if isinstance(arguments, str):  # OpenAI style: the arguments as a JSON string
        try:
            arguments = json.loads(arguments)
        except ValueError:
            raise InputError("call: the arguments string is not JSON") from None
    if not isinstance(arguments, dict):
        raise InputError('call: "arguments" must be a JSON object')
    return ToolCall(value["name"], arguments)


def _check_knobs(options, temperature: float, top_p: float, top_k: int, max_new_tokens: int) -> None:
    if not isinstance(max_new_tokens, int) or not 16 <= max_new_tokens <= options.max_new_tokens:
        raise ConfigError(
            f"max_new_tokens: expected an integer from 16 to {options.max_new_tokens}, got {max_new_tokens!r}"
        )
    if not isinstance(top_k, int) or not 0 <= top_k <= 1000:
        raise ConfigError(f"top_k: expected an integer from 0 to 1000, got {top_k!r}")
    if not 0.0 <= temperature <= 2.0:
        raise ConfigError(f"temperature: expected 0 to 2, got {temperature}")
    if not 0.0 < top_p <= 1.0:
        raise ConfigError(f"top_p: expected more than 0 and at most 1, got {top_p}")
