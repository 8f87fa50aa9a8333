"""Words the user dictated go into a call as the user wrote them.

Copying a request's words into a call, the small actor changes their case: asked to save a
file "containing exactly: Dentist Tuesday 3pm", it wrote ``"dentist Tuesday 3pm"`` (after a
quote, the lowercase word is one token and the capitalised one two). A string argument that
is not in the request, but that the request holds in other letter case, is put back as the
request spells it, where its property leaves case free (no ``enum``, ``pattern`` or
``format``: ``"science"`` stays the genre's value though the user wrote "Science"). The
action keeps what was changed (``Action.restored``)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Iterable

from envace_demo.calls import parse_action
from envace_demo.record import Action, ToolCall
from envace_demo.schemas import Tool, find_tool

# Keywords under which a string's exact spelling is the schema's, not the user's.
_FIXED = ("enum", "const", "pattern", "format")


def parse_dictated(text: str, names: Iterable[str], tools: list[Tool], requests: list[str], dictated: bool = True,
                   *, require: bool = False, cut: bool = False) -> Action:
    """An actor's output parsed (``calls.parse_action``), its dictated words as the user wrote them."""
    action = parse_action(text, names, require_call=require, cut=cut)
    return as_dictated(action, requests, tools) if dictated else action


def as_dictated(action: Action, requests: Iterable[str], tools: list[Tool]) -> Action:
    """``action`` with its calls' free string arguments spelt as the ``requests`` spell them."""
    said = [r for r in requests if r and len(r.lower()) == len(r)]  # a case change keeps every offset
    if not action.calls or not said:
        return action
    calls, restored = [], []
    for call in action.calls:
        tool = find_tool(tools, call.name)
        properties = tool.parameters.get("properties", {}) if tool is not None else {}
        arguments = dict(call.arguments)
        for name, value in call.arguments.items():
            prop = properties.get(name)
            if not isinstance(prop, dict) or any(k in prop for k in _FIXED):
                continue
            if (spelt := dictated(value, said)) is not None:
                arguments[name] = spelt
                restored.append(f"{call.name}.{name}: {json.dumps(value)} as the request spells it, {json.dumps(spelt)}")
        calls.append(ToolCall(call.name, arguments) if arguments != call.arguments else call)
    return replace(action, calls=calls, restored=restored) if restored else action


def dictated(value: Any, requests: list[str]) -> str | None:
    """The request's spelling of ``value`` where it differs only in letter case, else None."""
    if not isinstance(value, str) or not any(c.isalpha() for c in value) or len(value.lower()) != len(value):
        return None
    if any(value in r for r in requests):
        return None
    for request in requests:
        at = request.lower().find(value.lower())
        if at >= 0:
            return request[at:at + len(value)]
    return None
