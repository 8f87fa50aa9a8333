"""Rehearsers with no model: the floor a model's fidelity figures should be read against.

A fidelity number alone does not say whether the model learned anything: a success with the
declared keys and blank values, or the arguments sent back, already earns the outcome of
every call that succeeds and whatever values the arguments hold. Scored with the same
:func:`envace_demo.fidelity.score` beside the model's, these baselines show what is left for
the model to earn (mostly the unknowable values and the failures).

- ``schema-only``: knows only the tool's declared response schema; always predicts a success
  shaped by it, with placeholder values.
- ``echo``: predicts a success that is the call's arguments.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Iterable, Protocol

from envace_demo.fidelity import Context, Score, score, summarize_parts
from envace_demo.schemas import Tool, find_tool

_MAX_DEPTH = 16
_PLACEHOLDERS: dict[str, Any] = {
    "string": "",
    "number": 0,
    "integer": 0,
    "boolean": False,
    "array": [],
    "null": None,
}


def placeholder(schema: Any, depth: int = 0) -> Any:
    """A value of ``schema``'s shape: its ``const`` or first ``enum`` value, else a blank of
    its type (``""``, ``0``, ``False``, ``[]``, ``None``); an object gets every declared
    property, recursively. A union (``anyOf``/``oneOf``, a list of types) takes its first
    non-null branch: a rehearser with nothing else to go on guesses the first."""
    if not isinstance(schema, dict) or depth > _MAX_DEPTH:
        return None
    if "const" in schema:
        return copy.deepcopy(schema["const"])
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return copy.deepcopy(schema["enum"][0])
    for key in ("anyOf", "oneOf"):
        branches = [b for b in schema.get(key) or [] if isinstance(b, dict) and b.get("type") != "null"]
        if branches and "type" not in schema and "properties" not in schema:
            return placeholder(branches[0], depth + 1)
    kind = _type_of(schema)
    if kind == "object":
        props = schema.get("properties")
        props = props if isinstance(props, dict) else {}
        return {name: placeholder(sub, depth + 1) for name, sub in props.items()}
    return copy.deepcopy(_PLACEHOLDERS.get(kind))


def _type_of(schema: dict) -> str | None:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else None)
    if kind is None and isinstance(schema.get("properties"), dict):
        return "object"
    return kind if isinstance(kind, str) else None


def schema_only(tool: Tool | None, arguments: dict) -> Any:
    """A success shaped by ``tool``'s declared response schema; ``{}`` when it declares none."""
    if tool is None or tool.response is None:
        return {}
    value = placeholder(tool.response)
    return {} if value is None else value


def echo(tool: Tool | None, arguments: dict) -> Any:
    """The call's arguments, as a success."""
    return copy.deepcopy(dict(arguments))


Baseline = Callable[[Tool | None, dict], Any]
BASELINES: dict[str, Baseline] = {"schema-only": schema_only, "echo": echo}


class _Call(Protocol):
    name: str
    arguments: dict


class _Step(Protocol):  # envace_demo.record.CallStep, as far as a baseline reads it
    call: _Call
    real: Any


def baseline_scores(
    steps: Iterable[_Step],
    context_of: Callable[[_Step], Context | None],
    tools: list[Tool] | None = None,
) -> dict[str, list[Score]]:
    """Each baseline's :class:`Score` for every step that has a real response (a step
    without one has nothing to be scored against and is skipped). ``context_of(step)``
    says what the model's rehearser was shown for it, so that the knowable/unknowable split
    is the same as the model's; ``tools`` supplies the response schemas."""
    scored = [s for s in steps if s.real is not None]
    out: dict[str, list[Score]] = {}
    for name, baseline in BASELINES.items():
        out[name] = [
            score(baseline(find_tool(tools or [], s.call.name), s.call.arguments), s.real, context_of(s))
            for s in scored
        ]
    return out


def baseline_parts(
    steps: Iterable[_Step],
    context_of: Callable[[_Step], Context | None],
    tools: list[Tool] | None = None,
) -> dict[str, dict]:
    """:func:`envace_demo.fidelity.summarize_parts` of each baseline over ``steps``
    (see :func:`baseline_scores`), by baseline name."""
    scores = baseline_scores(steps, context_of, tools)
    return {name: summarize_parts(s) for name, s in scores.items()}
