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
from dataclasses import dataclass, field, replace
from typing import Any

from envace_demo.models.base import Prompt
from envace_demo.models.ids import trained_on_contract
from envace_demo.record import ToolCall, Turn, error_code
from envace_demo.schemas import Tool

# Section labels and tags of the rehearsal contract: the EnvACE models were trained on them.
CANDIDATE_TOOLS = "Candidate tools (whitelist for this sample):"
PREVIOUS_CALLS = "Previous tool calls and results (few-shot):"
NO_PREVIOUS_CALLS = f"{PREVIOUS_CALLS} <unavailable>"
HISTORY = "Current conversation history:"
NO_HISTORY = "No conversation history"
LATEST_RESPONSE = "RL model's latest response:"
CURRENT_TOOL = "Current tool to simulate:"
RESPONSE_SCHEMA = "- response schema (JSON Schema):"
RESULT_OPEN, RESULT_CLOSE = "<execution_result>", "</execution_result>"
# The fixed message of a call to a tool outside the whitelist (the training contract's form).
TOOL_NOT_AVAILABLE_MESSAGE = "tool name '{name}' is not found. Please check your function call and use provided tools."

# The instruction: the training instruction's points in its order (inputs, validation order,
# the error contract with its fixed forms, the output format with an example), in this
# project's words. The example is a concrete result, not a placeholder: a small model copies
# the sample it is shown.
REHEARSER_SYSTEM = f"""You simulate tools precisely. Check the RL model's tool call against the whitelist of \
candidate tools and the tool's JSON Schema, then produce what the tool would return.

The user message gives you:
- the candidate tools (the whitelist: the tool schemas this sample may call);
- previous tool calls and their real results (few-shot reference data; <unavailable> when there \
were none yet);
- the conversation so far;
- the RL model's latest response, with its <tool_call>...</tool_call> blocks;
- the tool call to simulate: its name, its JSON Schema and the parsed arguments.

Check the call before answering, in this order, and stop at the first check that fails:
1. Format: the call sits inside <tool_call> tags as valid JSON with a "name" and an "arguments" \
object. If not, the result is {{"error_tool_call": {{"code": "INVALID_TOOL_CALL_FORMAT", "message": \
"a short reason"}}}}.
2. Whitelist: the name under "Current tool to simulate" is one of the candidate tools. If not, the \
result is {{"error_tool_call": {{"code": "TOOL_NOT_AVAILABLE", "message": "{TOOL_NOT_AVAILABLE_MESSAGE}"}}}} \
with the called name in place of {{name}}.
3. Arguments: they form a JSON object that satisfies the input schema (required fields present, \
types and enums respected). If not, the result is {{"error_tool_call": {{"code": "INVALID_PARAMETERS", \
"message": "a short reason", "details": {{"errors": ["one entry per violation"]}}}}}}.
4. Only when all three pass, produce the execution result: where the few-shot section has a call \
of the same tool with similar arguments, reuse its result; otherwise write a plausible result \
that fits the tool and stays consistent with every fact seen so far, correcting a type or a \
slip in the examples where needed.

Output, on every path: reason inside <think> tags first, then put the result between \
{RESULT_OPEN} and {RESULT_CLOSE} tags, each on its own line. The result is valid JSON, a \
non-empty object or an array, and nothing else: no commentary, no markdown, no code fences, no \
hints or comparisons. You are a silent executor. For example:
<think>
The call is well formed, get_order is a candidate tool and order_id is a string as required.
</think>
{RESULT_OPEN}
{{"order_id": "A-1042", "status": "shipped", "items": 2}}
{RESULT_CLOSE}"""


def tool_not_available(name: str) -> str:
    """The fixed message of a call to a tool outside the whitelist."""
    return TOOL_NOT_AVAILABLE_MESSAGE.format(name=name)


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


# What the actor reads for a held call once the rehearser's own wording is withdrawn.
HELD_MESSAGE = "rehearsal foresaw this failure; the call was not executed"


@dataclass
class Conversation:
    """The actor's view of an episode: the user's request and its turns so far (the
    record's turns: each call's tool message is its real response in a committed run
    with an environment, ``executed``, and its rehearsed one otherwise)."""

    user: str
    turns: list[Turn] = field(default_factory=list)
    memory: str | None = None  # rehearsal memory, shown to the committed actor
    executed: bool = False
    # Only what is real: a held call's message keeps its predicted error code and drops the
    # rehearser's wording (whose values no real result backs).
    grounded: bool = False
    # The conversation's earlier user turns, each with the committed turns that answered it
    # (its final answer included): they happened for real.
    earlier: list[tuple[str, list[Turn]]] = field(default_factory=list)

    def results(self, turn: Turn) -> list[tuple[ToolCall, Any]]:
        """The tool messages that answered ``turn``: a held call (not executed, its failure
        foreseen) is answered by its prediction."""
        return [(c.call, self._message(c)) for c in turn.calls]

    def _message(self, step: Any, committed: bool = False) -> Any:
        if not (self.executed or committed):
            return step.real if step.fetched else step.rehearsed
        if not step.held:
            return step.real
        if self.grounded:
            return {"error": {"code": error_code(step.rehearsed), "message": HELD_MESSAGE}}
        return step.rehearsed

    def requests(self) -> list[str]:
        """What the user has said, this turn's request last."""
        return [*(u for u, _ in self.earlier), self.user]

    def segments(self) -> list[tuple[str, list[Turn], bool]]:
        """(user message, turns, committed) of every user turn so far, this one last."""
        return [*((u, t, True) for u, t in self.earlier), (self.user, self.turns, self.executed)]

    def actor_messages(self) -> list[dict]:
        messages: list[dict] = []
        if self.memory:
            messages.append({"role": "system", "content": self.memory})
        for user, turns, committed in self.segments():
            messages.append({"role": "user", "content": user})
            messages += self._turn_messages(turns, committed)
        return messages

    def _turn_messages(self, turns: list[Turn], committed: bool) -> list[dict]:
        messages: list[dict] = []
        for turn in turns:
            msg: dict[str, Any] = {
                "role": "assistant",
                "content": turn.action.content,
                "reasoning_content": _reasoning(turn.action),
            }
            if turn.action.calls:
                msg["tool_calls"] = [
                    {"type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                    for c in turn.action.calls
                ]
            messages.append(msg)
            for step in turn.calls:
                content = _json(self._message(step, committed))
                messages.append({"role": "tool", "name": step.call.name, "content": content})
        return messages

    def history(self) -> str:
        """The conversation as the rehearser sees it (training's history serialization):
        ``User:``, ``Assistant:`` (the caller's own text, reasoning included, then its calls
        as ``<tool_call>`` blocks) and ``Tool[name]:`` entries joined by a blank line; system
        messages (the rehearsal memory) left out."""
        entries: list[str] = []
        for user, turns, committed in self.segments():
            if user.strip():
                entries.append(f"User: {user.strip()}")
            for turn in turns:
                text = written_before_calls(turn.action.text).strip()
                for call in turn.action.calls:
                    text += f'\n<tool_call>\n{{"name": "{call.name}", "arguments": {_json(call.arguments)}}}\n</tool_call>'
                if text:
                    entries.append(f"Assistant: {text}")
                for step in turn.calls:
                    content = _json(self._message(step, committed)).strip()
                    if content:
                        entries.append(f"Tool[{step.call.name}]: {content}")
        return tokenizer_safe("\n\n".join(entries)) if entries else NO_HISTORY


def written_before_calls(text: str) -> str:
    """What the caller wrote before its first call block (reasoning included): training kept
    the text up to ``"\n<tool_call>\n"`` as the assistant message's content. The tolerant
    parser also accepts a block without the newlines: the text before it then."""
    at = text.find("\n<tool_call>\n")
    if at == -1:
        at = text.find("<tool_call>")
    return text if at == -1 else text[:at]


# Code points a fast tokenizer refuses to encode; training replaced them with U+FFFD in every
# text it gave the model (the caller's output, tools, arguments, results).
_UNENCODABLE = re.compile("[\x00\ud800-\udfff\ufdd0-\ufdef" + "".join(
    f"{chr(plane * 0x10000 + 0xFFFE)}{chr(plane * 0x10000 + 0xFFFF)}" for plane in range(17)
) + "]")


def tokenizer_safe(text: str) -> str:
    return _UNENCODABLE.sub("\ufffd", text)


def _block(value: Any) -> str:
    """A JSON value as training wrote it into the rehearser's message: one key or item per
    line, no indentation, non-ASCII escaped."""
    return tokenizer_safe(json.dumps(value, ensure_ascii=True, indent=0))


def few_shot(known_results: list[tuple[ToolCall, Any]]) -> str:
    """The few-shot section: the known (call, result) pairs grouped by tool in the order the
    tools first appear (training's ``{tool: [(arguments, result), ...]}``), each result as
    the text of the tool message that carried it."""
    if not known_results:
        return NO_PREVIOUS_CALLS
    by_tool: dict[str, list[tuple[dict, Any]]] = {}
    for call, result in known_results:
        by_tool.setdefault(call.name, []).append((call.arguments, result))
    lines = [PREVIOUS_CALLS]
    for name, pairs in by_tool.items():
        for arguments, result in pairs:
            shown = result if isinstance(result, str) else _json(result)
            lines.append(
                f"Tool name:\n{name}\nTool arguments:\n{_block(arguments)}\n"
                f"Tool execution result:\n{tokenizer_safe(shown)}\n"
            )
    return "\n".join(lines)


def shows_response_schema(model_id: str, setting: bool | None = None) -> bool:
    """Whether the rehearser's message carries the declared response schema: an addition the
    EnvACE models were not trained on, so on by default only for other models."""
    if setting is not None:
        return setting
    return not trained_on_contract(model_id)


def _reasoning(action) -> str:
    """The turn's reasoning for the template. An empty thought the model did write stays in
    context as ``<think>\n\n</think>\n\n``, as training kept it: Qwen3's template drops an
    earlier turn's empty reasoning, but renders ``"\n"`` as exactly that block."""
    if not action.thinking and "</think>" in action.text:
        return "\n"
    return action.thinking


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
    response_schema: bool = True,
) -> list[dict]:
    """The ``[system, user]`` chat of one rehearsal, the user message as training built it
    (method doc §3): candidate tools, few-shot, history, the caller's raw response and the
    current tool, joined by blank lines, then ``/think``. ``known_results``: real (call,
    result) pairs seen so far. ``response_schema``: add the tool's declared response schema
    as one line after the arguments (the one addition to the training format)."""
    sections = []
    if tools:
        sections.append(f"{CANDIDATE_TOOLS}\n{_block([t.to_openai() for t in tools])}")
    sections.append(few_shot(known_results))
    sections.append(f"{HISTORY}\n{conversation.history()}")
    if latest_response:
        sections.append(f"{LATEST_RESPONSE}\n{tokenizer_safe(latest_response)}")
    # A call outside the whitelist has no tool object: training wrote this stand-in.
    current = _block(tool.to_openai()) if tool else "<schema unavailable>"
    current_tool = (
        f"{CURRENT_TOOL}\n- name: {call.name}\n- input schema (JSON Schema):\n{current}\n"
        f"- arguments (JSON, parsed from caller's tool_call):\n{_block(call.arguments)}"
    )
    if response_schema and tool is not None and tool.response:
        compact = json.dumps(tool.response, ensure_ascii=True, separators=(",", ":"))
        current_tool += f"\n{RESPONSE_SCHEMA} {compact}"
    sections.append(current_tool)
    user = "\n\n".join(sections) + "\n\n/think"
    return [{"role": "system", "content": REHEARSER_SYSTEM}, {"role": "user", "content": user}]


def rehearser_prompt(backend, messages: list[dict]) -> Prompt:
    """The rehearser's ``[system, user]`` chat: no tools, thinking on."""
    return replace(backend.prompt(messages, tools=None, thinking=True), role="rehearser")
