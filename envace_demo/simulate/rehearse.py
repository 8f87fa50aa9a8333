"""One call rehearsed as the engine rehearses it (``engine.Episode._rehearse``).

What the engine is certain of it says itself (a tool not in the schema, arguments that break
the input schema: ``validation.validation_error``). Anything else goes to the model through
the engine's rehearser prompt and grammar, and its output is parsed as the engine parses it
(``calls.parse_execution_result``). Beyond the engine, a result must also fit the tool's
declared response (an error object passes: it is the tool failing, not a wrong shape); a
rehearsal that does not parse or does not fit is asked for once more, then reported as a
``REHEARSAL_FAILED`` error that gives both reasons.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from jsonschema import Draft202012Validator

from envace_demo.calls import format_call, parse_execution_result
from envace_demo.models.base import Backend, Prompt, Sampling
from envace_demo.models.grammar import rehearsal_constraint, rehearses_failures
from envace_demo.prompts import Conversation, rehearser_messages, rehearser_prompt, shows_response_schema
from envace_demo.record import Action, CallStep, ToolCall, Turn, is_error
from envace_demo.schemas import Tool, find_tool
from envace_demo.simulate.pairs import Pair
from envace_demo.validation import check_arguments, validation_error

# The user's request as the rehearser's conversation shows it, when nobody said what it is:
# an MCP server sees calls, never the conversation that led to them.
UNKNOWN_REQUEST = "(unknown: the caller's request does not reach the tool server)"
# Few-shot pairs in one prompt (the called tool's first) and earlier calls of the
# conversation shown: a long session must not outgrow the model's context.
MAX_SHOTS = 6
MAX_HISTORY = 16
FAILED = "REHEARSAL_FAILED"  # the engine's code for a rehearsal it could not use

Source = Literal["validation", "example", "cache", "model", "failed"]


@dataclass(frozen=True)
class RehearsalSettings:
    """How calls are rehearsed: sampling, grammar, and what the conversation says."""

    sampling: Sampling = field(default_factory=Sampling)
    constrained: bool = True
    think_chars: int | None = None  # the rehearser's reasoning bound under constraint
    context: str = UNKNOWN_REQUEST  # the user's request, as the rehearser sees it
    attempts: int = 2  # one try and one retry


@dataclass
class Answer:
    """What a simulated tool answered. ``response``: the result, or an error object
    (``error_tool_call`` from validation, ``error`` from the tool's domain or a failed
    rehearsal). ``source``: who wrote it. ``problems``: why model attempts were refused.
    ``raw``: the model's text the response came from (the last attempt's, if it failed)."""

    call: ToolCall
    response: Any
    source: Source
    problems: list[str] = field(default_factory=list)
    raw: str | None = None
    attempts: int = 0
    tokens: int = 0
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return self.source == "failed"

    @property
    def is_error(self) -> bool:
        return is_error(self.response)

    def to_dict(self) -> dict:
        return {
            "call": self.call.to_dict(),
            "response": self.response,
            "valid": not self.failed,
            "is_error": self.is_error,
            "source": self.source,
            "problems": list(self.problems),
            "raw": self.raw,
            "attempts": self.attempts,
            "tokens": self.tokens,
            "seconds": round(self.seconds, 3),
        }


def resolved(call: ToolCall, tools: list[Tool]) -> tuple[ToolCall, Tool | None]:
    """The call under its tool's API-safe name (what prompts and keys use), and its tool."""
    tool = find_tool(tools, call.name)
    return (ToolCall(tool.name, call.arguments) if tool else call), tool


def certain(call: ToolCall, tool: Tool | None) -> Answer | None:
    """The engine's own answer where it is certain (unknown tool, arguments that break the
    input schema); None when only the model can say."""
    errors = check_arguments(tool, call.arguments) if tool else []
    decided = validation_error(call, tool, errors)
    return None if decided is None else Answer(call, decided, "validation")


def rehearser_chat(
    backend: Backend, tools: list[Tool], examples: list[Pair], history: list[Pair], call: ToolCall,
    tool: Tool | None, context: str,
) -> Prompt:
    """The engine's rehearser prompt for ``call``: the examples are the few-shot block (the
    engine's real results), the session's earlier calls and answers the conversation (each
    a caller turn with one call), and the call itself the caller's latest response."""
    turns = [
        Turn(index=i, action=Action(text=format_call(c), calls=[c]), calls=[CallStep(c, rehearsed=r)])
        for i, (c, r) in enumerate(history)
    ]
    conversation = Conversation(context, turns)
    messages = rehearser_messages(
        tools, examples, conversation, format_call(call), call, tool,
        response_schema=shows_response_schema(backend.info.model_id),
    )
    return rehearser_prompt(backend, messages)


def shots(examples: list[Pair], call: ToolCall) -> list[Pair]:
    """The few-shot pairs for ``call``: the same tool's first, at most ``MAX_SHOTS``, in file order."""
    same = [p for p in examples if p[0].name == call.name]
    other = [p for p in examples if p[0].name != call.name]
    chosen = {id(p) for p in (same + other)[:MAX_SHOTS]}
    return [p for p in examples if id(p) in chosen]


def shape_problem(result: Any, tool: Tool) -> str | None:
    """Why ``result`` cannot stand as the tool's answer, or None. An error object needs a
    code and a message; anything else must fit the declared response, where there is one."""
    if is_error(result):
        key = "error_tool_call" if "error_tool_call" in result else "error"
        inner = result[key]
        if len(result) != 1 or not isinstance(inner, dict):
            return f'an error must be the only key, holding an object: {{"{key}": {{"code", "message"}}}}'
        if not isinstance(inner.get("code"), str) or not isinstance(inner.get("message"), str):
            return f'the "{key}" object needs a string "code" and a string "message"'
        return None
    if tool.response is None:
        return None
    checker = Draft202012Validator(tool.response, format_checker=Draft202012Validator.FORMAT_CHECKER)
    error = next(iter(sorted(checker.iter_errors(result), key=lambda e: list(e.absolute_path))), None)
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "the result"
    return f"breaks the declared response schema at {where}: {error.message}"


def ask_model(
    backend: Backend,
    tools: list[Tool],
    call: ToolCall,
    tool: Tool,
    history: list[Pair],
    examples: list[Pair],
    settings: RehearsalSettings,
) -> Answer:
    """The model's rehearsal of a valid call: up to ``settings.attempts`` tries (distinct
    seeds), the first that parses and fits wins; else a ``REHEARSAL_FAILED`` error."""
    known = shots(examples, call)
    prompt = rehearser_chat(backend, tools, known, history[-MAX_HISTORY:], call, tool, settings.context)
    constraint = None
    if settings.constrained and backend.supports_constraints:
        # What the call fixes is pinned; a failure seen for real may be said again (grammar.py).
        from envace_demo.models.adapters import rehearser_think_chars

        own = rehearser_think_chars(backend)  # a rehearser trained to state facts first
        # No state and no reads stand behind a simulated call, so a domain failure is said only
        # where the examples show one: the trained embedded rehearser, offered any, refused
        # every call of a fresh bank session (get_account included) with INSUFFICIENT_FUNDS.
        constraint = rehearsal_constraint(tool.response, call.name, call.arguments, examples,
                                          rehearses_failures(backend), settings.think_chars if own is None else own,
                                          failures=False)
    answer = Answer(call, None, "failed")
    seed = settings.sampling.seed
    for attempt in range(settings.attempts):
        sampling = replace(settings.sampling, seed=None if seed is None else seed + attempt)
        gen = backend.generate(prompt, sampling, constraint=constraint)
        answer.raw, answer.attempts = gen.text, attempt + 1
        answer.tokens += gen.new_tokens
        answer.seconds += gen.seconds
        result, problem = parse_execution_result(gen.text)
        if problem is None:
            problem = shape_problem(result, tool)
        if problem is None:
            answer.response, answer.source = result, "model"
            return answer
        answer.problems.append(f"attempt {attempt + 1}: {problem}")
    answer.response = {
        "error": {
            "code": FAILED,
            "message": f"the simulator got no usable rehearsal of {call.name} in {settings.attempts} "
            f"attempts ({'; '.join(answer.problems)})",
        }
    }
    return answer
