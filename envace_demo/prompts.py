"""The two roles' prompts, built exactly as the EnvACE contract says (method doc §2, §3).

Actor: the Qwen3 chat template with ``tools`` and thinking on. Reasoning of earlier
turns stays in context: the whole episode answers one user message, and the Qwen3
template keeps reasoning after the last user message, as in training.

Rehearser: a separate two-message chat ``[system, user]`` rendered without tools,
thinking on. The user message has five labelled sections and ends with ``/think``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from envace_demo.calls import format_call
from envace_demo.models.base import Prompt
from envace_demo.record import ToolCall, Turn
from envace_demo.schemas import Tool

# Section labels and tags of the rehearsal contract: the 8B model was trained on them.
CANDIDATE_TOOLS = "Candidate tools (whitelist for this sample):"
PREVIOUS_CALLS = "Previous tool calls and results (few-shot):"
HISTORY = "Current conversation history:"
LATEST_RESPONSE = "RL model's latest response:"
CURRENT_TOOL = "Current tool to simulate:"
RESULT_OPEN, RESULT_CLOSE = "<execution_result>", "</execution_result>"

# The instruction prose. It names the contract's codes and tags exactly but shows no
# literal sample object: a small model copies whatever sample it is shown (it used to answer
# every call with a sample error message written in angle brackets).
REHEARSER_SYSTEM = f"""You are a tool executor. You never talk to the user: given one tool call, you \
return exactly what the tool would return.

First validate the call, in this order, and stop at the first check that fails:
1. Format: the call has a tool name and a JSON object of arguments. If not, the result is an \
object whose only key is "error_tool_call"; it holds "code" set to INVALID_TOOL_CALL_FORMAT and a \
"message" that says what is malformed.
2. Availability: the tool name is in the candidate tool whitelist. If not, "error_tool_call" holds \
"code" set to TOOL_NOT_AVAILABLE and a "message" naming the unknown tool.
3. Parameters: the arguments satisfy the tool's input schema (required parameters present, types, \
enums and patterns respected). If not, "error_tool_call" holds "code" set to INVALID_PARAMETERS, a \
"message" summing up the problem, and "details" whose "errors" list has one entry per violation.

If the call is valid, produce its result. When an earlier call of the same tool with similar \
arguments has a known result, stay consistent with it; otherwise invent a realistic result that \
fits the tool, its declared response schema when it has one, and every fact established so far. \
A valid call can still fail in the tool's own domain (an unknown id, too little money): then the \
result is the tool's own error.

The result is a non-empty JSON object or array with real values: no commentary, no markdown. Think \
briefly, then write the JSON result between a {RESULT_OPEN} line and a {RESULT_CLOSE} line."""


# Placeholder text in a prompt: an angle-bracket phrase that is not a tag (it has a space
# or a hyphen, e.g. the Qwen3 template's "<function-name>"), or a bare ellipsis.
_PLACEHOLDER = re.compile(r"<(?!/)([^<>\n]{0,60}[ -][^<>\n]{0,60})>")
ELLIPSES = ("...", "…", "{...}")


def find_placeholders(text: str) -> set[str]:
    """The placeholder fragments of ``text`` (a prompt), e.g. ``{"<what is wrong>"}``."""
    return {m.group(0) for m in _PLACEHOLDER.finditer(text)}


def copies_placeholder(value: Any, placeholders: set[str]) -> list[str]:
    """The strings inside ``value`` (a call's arguments or a result) that hold one of
    ``placeholders`` or are a bare ellipsis: text a model copied instead of a value."""
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            if item.strip() in ELLIPSES or any(p in item for p in placeholders):
                found.append(item)
    return found


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


@dataclass
class Conversation:
    """The actor's view of an episode: the user's request and its turns so far (the
    record's turns: each call's tool message is its real response in a committed run
    with an environment, ``executed``, and its rehearsed one otherwise)."""

    user: str
    turns: list[Turn] = field(default_factory=list)
    memory: str | None = None  # rehearsal memory, shown to the committed actor
    executed: bool = False

    def results(self, turn: Turn) -> list[tuple[ToolCall, Any]]:
        """The tool messages that answered ``turn``."""
        return [(c.call, c.real if self.executed else c.rehearsed) for c in turn.calls]

    def actor_messages(self) -> list[dict]:
        messages: list[dict] = []
        if self.memory:
            messages.append({"role": "system", "content": self.memory})
        messages.append({"role": "user", "content": self.user})
        for turn in self.turns:
            msg: dict[str, Any] = {
                "role": "assistant",
                "content": turn.action.content,
                "reasoning_content": turn.action.thinking,
            }
            if turn.action.calls:
                msg["tool_calls"] = [
                    {"type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                    for c in turn.action.calls
                ]
            messages.append(msg)
            for call, result in self.results(turn):
                messages.append({"role": "tool", "name": call.name, "content": _json(result)})
        return messages

    def history_lines(self) -> list[str]:
        """The conversation as the rehearser sees it (system messages left out)."""
        lines = [f"User: {self.user}"]
        for turn in self.turns:
            visible = turn.action.content
            calls = "\n".join(format_call(c) for c in turn.action.calls)
            lines.append("Assistant: " + "\n".join(p for p in (visible, calls) if p))
            for call, result in self.results(turn):
                lines.append(f"Tool[{call.name}]: {_json(result)}")
        return lines


def actor_prompt(backend, conversation: Conversation, tools: list[Tool]) -> Prompt:
    """The actor's chat with ``tools``, thinking on (text rendered where the backend renders)."""
    return backend.prompt(conversation.actor_messages(), tools=[t.to_openai() for t in tools], thinking=True)


def rehearser_messages(
    tools: list[Tool],
    known_results: list[tuple[ToolCall, Any]],
    conversation: Conversation,
    latest_response: str,
    call: ToolCall,
    tool: Tool | None,
) -> list[dict]:
    """The ``[system, user]`` chat of one rehearsal (method doc §3)."""
    if known_results:
        shots = "\n\n".join(
            f"Tool name: {c.name}\nTool arguments: {_json(c.arguments)}\nTool execution result: {_json(r)}"
            for c, r in known_results
        )
    else:
        shots = "(none)"
    schema = tool.parameters if tool else {}
    # Beyond the contract's three lines: the declared response shape, when there is one
    # (the constrained rehearser is held to it; the prompt says so instead of leaving a guess).
    response = f"\n- response schema (JSON Schema): {_json(tool.response)}" if tool and tool.response else ""
    sections = [
        f"{CANDIDATE_TOOLS}\n{_json([t.to_openai() for t in tools])}",
        f"{PREVIOUS_CALLS}\n{shots}",
        f"{HISTORY}\n" + "\n".join(conversation.history_lines()),
        f"{LATEST_RESPONSE}\n{latest_response}",
        f"{CURRENT_TOOL}\n- name: {call.name}\n- input schema (JSON Schema): {_json(schema)}\n"
        f"- arguments (JSON, parsed from caller's tool_call): {_json(call.arguments)}{response}",
    ]
    user = "\n\n".join(sections) + "\n\n/think"
    return [{"role": "system", "content": REHEARSER_SYSTEM}, {"role": "user", "content": user}]


def rehearser_prompt(backend, messages: list[dict]) -> Prompt:
    """The rehearser's ``[system, user]`` chat: no tools, thinking on."""
    return backend.prompt(messages, tools=None, thinking=True)
