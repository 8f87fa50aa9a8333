"""The rehearser's user message as EnvACE's training builders lay it out, stated on its own
for the golden tests (method doc §3; ``simulate_core/_builders.py`` of the public training
code): the project's prompt builder must give these bytes for the same inputs.

Inputs are what training held: the tool objects, a few-shot map ``{tool: [(arguments,
result), ...]}`` (a result as the tool message's text, or a JSON value), the chat so far as
OpenAI messages (assistant ``content`` = the caller's text before its first call block,
``tool_calls`` with ``arguments`` as a JSON string), the caller's raw text, the current tool
object and the parsed arguments.
"""

from __future__ import annotations

import json
from typing import Any


def dump0(value: Any) -> str:
    return json.dumps(value, ensure_ascii=True, indent=0)


def few_shot_lines(by_tool: dict[str, list[tuple[dict, Any]]]) -> list[str]:
    if not by_tool:
        return ["Previous tool calls and results (few-shot): <unavailable>"]
    lines = ["Previous tool calls and results (few-shot):"]
    for name, pairs in by_tool.items():
        for arguments, result in pairs:
            text = dump0(result) if isinstance(result, (dict, list)) else result
            lines.append(f"Tool name:\n{name}\nTool arguments:\n{dump0(arguments)}\nTool execution result:\n{text}\n")
    return lines


def history(messages: list[dict]) -> str:
    entries = []
    for msg in messages:
        role, content = msg.get("role"), (msg.get("content") or "").strip()
        if role == "user" and content:
            entries.append(f"User: {content}")
        elif role == "assistant":
            text = content
            for tc in msg.get("tool_calls") or []:
                fn = tc["function"]
                text += f'\n<tool_call>\n{{"name": "{fn["name"]}", "arguments": {fn["arguments"]}}}\n</tool_call>'
            if text:
                entries.append(f"Assistant: {text}")
        elif role == "tool" and content:
            entries.append(f"Tool[{msg['name']}]: {content}")
    return "\n\n".join(entries) if entries else "No conversation history"


def user_message(
    candidate_tools: list[dict],
    by_tool: dict[str, list[tuple[dict, Any]]],
    messages: list[dict],
    raw_caller: str,
    current_tool: dict,
    arguments: dict,
) -> str:
    parts = []
    if candidate_tools:
        parts.append("Candidate tools (whitelist for this sample):\n" + dump0(candidate_tools))
    parts.append("\n".join(few_shot_lines(by_tool)))
    parts.append("Current conversation history:\n" + history(messages))
    if raw_caller:
        parts.append("RL model's latest response:\n" + raw_caller)
    parts.append(
        "Current tool to simulate:\n"
        f"- name: {current_tool['function']['name']}\n"
        "- input schema (JSON Schema):\n" + dump0(current_tool) + "\n"
        "- arguments (JSON, parsed from caller's tool_call):\n" + dump0(arguments)
    )
    return "\n\n".join(parts) + "\n\n/think"
