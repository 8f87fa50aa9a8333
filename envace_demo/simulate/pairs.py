"""Real (call, result) pairs given by the user: ``--examples`` files and the ``rehearse``
endpoint's history and examples.

One pair is an object ``{"name": ..., "arguments": {...}, "result": ...}``; ``tool`` may
stand for ``name``, ``response`` for ``result``, and ``{"call": {"name", "arguments"}, ...}``
is accepted too. A file is a JSON array of pairs, or JSONL (one pair a line). Every
problem is a located ``InputError``: the file, the line or index, and what is wrong.
"""

from __future__ import annotations

import json
from typing import Any

from envace_demo.errors import InputError
from envace_demo.record import ToolCall
from envace_demo.schemas import Tool, find_tool

Pair = tuple[ToolCall, Any]


def parse_pairs(text: str, tools: list[Tool], where: str, max_pairs: int | None = None) -> list[Pair]:
    """The pairs in ``text`` (a JSON array, or JSONL), each naming one of ``tools``;
    an empty text holds none. ``where`` names the source in messages."""
    stripped = text.strip()
    if not stripped:
        return []
    if stripped.startswith("["):
        try:
            items = json.loads(stripped)
        except ValueError as err:
            raise InputError(f"{where}: not valid JSON ({err})") from None
        located = [(f"{where}[{i}]", item) for i, item in enumerate(items)]
    else:
        located = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                located.append((f"{where} line {number}", json.loads(line)))
            except ValueError as err:
                raise InputError(f"{where} line {number}: not valid JSON ({err})") from None
    if max_pairs is not None and len(located) > max_pairs:
        raise InputError(f"{where}: {len(located)} call/result pairs, at most {max_pairs}")
    return [_pair(item, loc, tools) for loc, item in located]


def _pair(item: Any, loc: str, tools: list[Tool]) -> Pair:
    if not isinstance(item, dict):
        raise InputError(f'{loc}: expected an object {{"name", "arguments", "result"}}')
    call = item.get("call") if isinstance(item.get("call"), dict) else item
    name = call.get("name", call.get("tool"))
    if not isinstance(name, str) or not name:
        raise InputError(f'{loc}: the pair has no tool "name"')
    tool = find_tool(tools, name)
    if tool is None:
        known = ", ".join(t.name for t in tools)
        raise InputError(f"{loc}: no tool named {name!r} in the schema (tools: {known})")
    arguments = call.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            raise InputError(f"{loc}: the arguments string is not JSON") from None
    if not isinstance(arguments, dict):
        raise InputError(f'{loc}: "arguments" must be a JSON object')
    for key in ("result", "response"):
        if key in item:
            return ToolCall(tool.name, arguments), item[key]
    raise InputError(f'{loc}: the pair has no "result"')


def call_key(call: ToolCall) -> str:
    """What makes two calls identical: the tool and its arguments, key order aside."""
    return json.dumps([call.name, call.arguments], sort_keys=True, ensure_ascii=False)
