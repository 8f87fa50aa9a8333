"""Identifiers an actor may pass: only those the user's messages or the tool results hold.

Asked to reserve "Cosmos", the small embedded actor passes a catalog id it saw in training
(``BK-007``) instead of looking the title up; the call is valid, goes through, and reserves
the wrong book. An argument named as an identifier (``id``, ``*_id``, ``*Id``) whose schema
declares a ``pattern`` says what its values look like, so the actor's grammar can hold it
to the values of that shape found so far. A tool whose required identifier has no such
value is not on offer until a call finds one. Only decoding changes: the prompt shows every
tool as the model was trained (``EpisodeConfig.grounded_ids``).
"""

from __future__ import annotations

import copy
import re
from dataclasses import replace
from typing import Iterable

from envace_demo.schemas.tools import Tool

# Most values one identifier may take in a grammar: the latest found.
MAX_VALUES = 32
_NAME = re.compile(r"(?:^id|_id|Id|ID)$")
# Words of a message: split at spaces, quotes and brackets; trailing sentence marks dropped.
_SPLIT = re.compile(r"[\s\"'`,;()\[\]{}<>]+")
_TRAIL = ".:!?"


def names_identifier(argument: str) -> bool:
    """Whether an argument's name says it holds an identifier (``id``, ``*_id``, ``*Id``)."""
    return bool(_NAME.search(argument))


def identifier_patterns(tool: Tool) -> dict[str, re.Pattern]:
    """The tool's top-level string arguments named as identifiers that declare a pattern."""
    found = {}
    for name, schema in (tool.parameters.get("properties") or {}).items():
        if not (isinstance(schema, dict) and names_identifier(name) and isinstance(schema.get("pattern"), str)):
            continue
        if schema.get("type") != "string" or "enum" in schema or "const" in schema:
            continue
        try:
            found[name] = re.compile(schema["pattern"])
        except re.error:  # an ECMA pattern Python cannot read: left as declared
            continue
    return found


def words(messages: Iterable[dict]) -> list[str]:
    """The words of the user's messages and the tool results, in order: what an identifier
    may be taken from (never the actor's own calls, nor a rehearsal memory)."""
    out: list[str] = []
    for message in messages:
        if message.get("role") not in ("user", "tool") or not isinstance(message.get("content"), str):
            continue
        out += [w.rstrip(_TRAIL) for w in _SPLIT.split(message["content"]) if w.rstrip(_TRAIL)]
    return out


def shaped(word: str, pattern: re.Pattern) -> str | None:
    """``word`` as an identifier of ``pattern``'s shape: as written, or in capitals where only
    they fit ("card p-1042" is ``P-1042``: the actor, held to ids as written, found none); None."""
    if pattern.search(word):
        return word
    upper = word.upper()
    return upper if upper != word and pattern.fullmatch(upper) else None


def ground(tools: Iterable[Tool], messages: Iterable[dict]) -> tuple[Tool, ...]:
    """``tools`` with each identifier held to the values found in ``messages`` (the latest
    :data:`MAX_VALUES`); a tool whose required identifier has none is left out. Where that
    leaves no tool, the tools as given: the guard never takes away the only way to act."""
    tools = tuple(tools)
    found = words(messages)
    kept = []
    for tool in tools:
        patterns = identifier_patterns(tool)
        if not patterns:
            kept.append(tool)
            continue
        parameters = copy.deepcopy(tool.parameters)
        required = set(parameters.get("required") or ())
        offered = True
        for name, pattern in patterns.items():
            values = list(dict.fromkeys(v for w in reversed(found) if (v := shaped(w, pattern))))[:MAX_VALUES]
            if values:
                schema = parameters["properties"][name]
                schema.pop("pattern", None)
                schema["enum"] = values[::-1]
            elif name in required:
                offered = False
                break
            else:  # an optional identifier nothing names: not passed at all
                del parameters["properties"][name]
        if offered:
            kept.append(replace(tool, parameters=parameters))
    return tuple(kept) or tools
