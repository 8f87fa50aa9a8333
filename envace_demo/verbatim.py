"""Words the user dictated go into a call as the user wrote them.

Copying a request's words into a call, the small actor changes their case: asked to save a
file "containing exactly: Dentist Tuesday 3pm", it wrote ``"dentist Tuesday 3pm"`` (after a
quote, the lowercase word is one token and the capitalised one two). A string argument that
is not in the request, but that the request holds in other letter case, is put back as the
request spells it, where its property leaves case free (no ``enum``, ``pattern`` or
``format``: ``"science"`` stays the genre's value though the user wrote "Science").

The actor also cuts what the user dictated: asked to overwrite a stylesheet "so the whole
file is just: body { background: #111; color: #eee; }", it wrote ``"#111; color: #eee;"``,
and ``"Back soon"`` for "with: <h1>Back soon</h1>". So an argument of a call the environment
declares a write, whose value is most of a span the user dictated (the rest of a message after a colon,
or a quoted span), is given the whole span (``whole``). The action keeps what was changed
(``Action.restored``)."""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import replace
from typing import Any, Callable, Iterable

from envace_demo.calls import parse_action
from envace_demo.identifiers import identifier_patterns, shaped
from envace_demo.record import Action, ToolCall
from envace_demo.schemas import Tool, find_tool

# Keywords under which a string's exact spelling is the schema's, not the user's.
_FIXED = ("enum", "const", "pattern", "format")
# A value this share of a dictated span, or more, is the span cut short; less is a part of it.
MOST = 0.4
# A dictated span: the rest of a message after a colon and a space, or quoted text.
_AFTER_COLON = re.compile(r":\s+")
_QUOTED = re.compile(r"(?:^|(?<=[\s:(]))([\"'“‘])(.+?)([\"'”’])(?=$|[\s.,;:!?)])")


def parse_dictated(text: str, names: Iterable[str], tools: list[Tool], requests: list[str], dictated: bool = True,
                   *, require: bool = False, cut: bool = False, writes: Callable[[str], bool | None] | None = None,
                   ) -> Action:
    """An actor's output parsed (``calls.parse_action``), its dictated words as the user wrote them."""
    action = parse_action(text, names, require_call=require, cut=cut)
    return as_dictated(action, requests, tools, writes) if dictated else action


def as_dictated(action: Action, requests: Iterable[str], tools: list[Tool],
                writes: Callable[[str], bool | None] | None = None) -> Action:
    """``action`` with its calls' free string arguments spelt as the ``requests`` spell them, and,
    in a call the environment declares a write (``writes``), given the whole of a span the user
    dictated where they hold most of it."""
    said = [r for r in requests if r and len(r.lower()) == len(r)]  # a case change keeps every offset
    if not action.calls or not said:
        return action
    calls, restored = [], []
    for call in action.calls:
        tool = find_tool(tools, call.name)
        properties = tool.parameters.get("properties", {}) if tool is not None else {}
        arguments = dict(call.arguments)
        # Only a declared write: a tool of unknown effect (a pasted schema, a BFCL record) keeps its calls.
        may_write = writes is not None and writes(call.name) is True
        for name, value in call.arguments.items():
            prop = properties.get(name)
            if not isinstance(prop, dict) or any(k in prop for k in _FIXED):
                continue
            others = [v for k, v in call.arguments.items() if k != name]
            if (spelt := dictated(value, said)) is not None:
                arguments[name] = spelt
                restored.append(f"{call.name}.{name}: {json.dumps(value)} as the request spells it, {json.dumps(spelt)}")
            elif may_write and (span := whole(value, said, others, prop.get("maxLength"))) is not None:
                arguments[name] = span
                restored.append(f"{call.name}.{name}: {json.dumps(value)} is most of what the user dictated, "
                                f"{json.dumps(span)}")
        for name, value in bound(call, tool, said[-1]).items() if may_write and tool is not None else ():
            if arguments.get(name) != value:
                restored.append(f"{call.name}.{name}: {json.dumps(arguments.get(name))}, and the user wrote "
                                f"{json.dumps(value)} after its word")
                arguments[name] = value
        for name, value in named(call, properties, tool, said) if may_write else ():
            arguments[name] = value
            restored.append(f"{call.name}.{name}: not passed, and the user dictated it, {json.dumps(value)}")
        calls.append(ToolCall(call.name, arguments) if arguments != call.arguments else call)
    return replace(action, calls=calls, restored=restored) if restored else action


def named(call: ToolCall, properties: dict, tool: Tool | None, requests: list[str]) -> list[tuple[str, str]]:
    """The optional free-text arguments ``call`` leaves out that the last request dictates by
    name, one value each: "put "Birthday gift" as the description", "with memo Rent". The
    small actor deposited the amount and left the description out."""
    required = set((tool.parameters.get("required") or ()) if tool is not None else ())
    out = []
    for name, prop in properties.items():
        if (name in call.arguments or name in required or not isinstance(prop, dict)
                or prop.get("type") != "string" or any(k in prop for k in _FIXED)):
            continue
        given = [v for called in _called(name, prop) for v in dictated_as(called, requests[-1])] if requests else []
        if len(set(given)) == 1:  # two memos for two transfers: which is whose is not for the engine to say
            out.append((name, given[0]))
    return out


# The words before an identifier that say which argument it is: "from my savings ACC-1002".
_PREPOSITION_WORDS = {"from": ("from",), "to": ("to", "into")}
_ALL_PREPOSITIONS = {w for words in _PREPOSITION_WORDS.values() for w in words}


def bound(call: ToolCall, tool: Tool, request: str) -> dict[str, str]:
    """The identifiers ``request`` gives an argument named for a preposition (``from_account_id``,
    ``to_account_id``) by writing one of that shape within four words after it ("transfer $200
    into it from ACC-1001"; "from my savings ACC-1002 to my checking ACC-1001"), where it gives
    exactly one; an argument it leaves holding the value given to another takes the other's
    (swapped). Told to move money from savings to checking, the small actor passed savings as both."""
    patterns = identifier_patterns(tool)
    out: dict[str, str] = {}
    for name, pattern in patterns.items():
        lead = name.split("_", 1)[0].lower()
        if lead not in _PREPOSITION_WORDS:
            continue
        words = _PREPOSITION_WORDS[lead]
        found = set()
        for sentence in re.split(r"(?<=[.!?;])\s+", request):
            tokens = [t.strip(".,:!?\"'()") for t in sentence.split()]
            for i, token in enumerate(tokens):
                if token.lower() not in words:
                    continue
                after = list(itertools.takewhile(lambda t: t.lower() not in _ALL_PREPOSITIONS, tokens[i + 1:i + 5]))
                shapes = [v for t in after if (v := shaped(t, pattern)) and pattern.fullmatch(v)]
                found |= set(shapes[:1])
        if len(found) == 1:
            out[name] = found.pop()
    others = {k: v for k, v in call.arguments.items() if k in patterns and k not in out}
    for name, value in list(out.items()):
        for other, was in others.items():
            if was == value and call.arguments.get(name) not in out.values():
                out[other] = call.arguments.get(name)  # it held the value now given to ``name``
    return {k: v for k, v in out.items() if isinstance(v, str) and v != call.arguments.get(k)}


def _called(name: str, prop: dict) -> list[str]:
    """What an argument is called: its name, and the noun its description opens with
    ("Optional note shown in the transaction history": a ``description`` is a "note")."""
    head = re.match(r"(?:(?:optional|the|a|an|short|free)\s+)*([a-z]{3,})\b", str(prop.get("description", "")).lower())
    return list(dict.fromkeys([name, *([head.group(1)] if head else [])]))


_SPAN = r"(?:[\"“]([^\"”]+)[\"”]|'([^']+)'(?=[\s.,;:!?]|$))"
_CAPITALISED = r"((?-i:[A-Z])[\w'&-]*(?:\s+[\w'&-]+){0,5}?)(?=\s*(?:[,.;!?]|$)|\s+(?:then|and|please|instead)\b)"


def dictated_as(name: str, request: str) -> list[str]:
    """The values ``request`` dictates for an argument called ``name``: a quoted span or a
    capitalised run right after the name ("memo Car payment", "description: "Gift""), or a
    quoted span given "as the description"."""
    said = re.escape(name.replace("_", " "))
    lead = rf"\b{said}s?\s*(?:(?:it|them)\s+)?(?:of|:|=|as|is|to|reading|saying|that says|should be|to be)?\s*"
    out = []
    after_colon = _CAPITALISED.replace("(?-i:[A-Z])", "", 1)
    for m in re.finditer(lead + rf"(?:{_SPAN}|{_CAPITALISED})|\b{said}:\s*{after_colon}", request, re.IGNORECASE):
        out.append(next(g for g in m.groups() if g))
    for m in re.finditer(rf"{_SPAN}\s+(?:as|for)\s+(?:the|a|its|my)?\s*{said}\b", request, re.IGNORECASE):
        out.append(next(g for g in m.groups() if g))
    return [v.strip() for v in out if v.strip()]


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


def spans(request: str) -> list[tuple[int, int]]:
    """Where ``request`` dictates text: (start, end) of the rest after each colon and space,
    and of each quoted span."""
    out = [(m.end(), len(request.rstrip())) for m in _AFTER_COLON.finditer(request)]
    out += [m.span(2) for m in _QUOTED.finditer(request)]
    return [(a, b) for a, b in out if b > a]


def whole(value: Any, requests: list[str], others: Iterable[Any] = (), max_length: int | None = None) -> str | None:
    """The dictated span ``value`` is most of (the longest), else None. Not where ``value`` is the
    span already, where the user wrote ``value`` elsewhere as it is (a part of their own, unless
    the span is ``value`` in other case), or where another argument holds the span."""
    if not isinstance(value, str) or not value.strip():
        return None
    found: list[str] = []
    for request in requests:
        for start, end in spans(request):
            span = request[start:end]
            if span == value or value.casefold() not in span.casefold() or len(value) < MOST * len(span):
                continue
            rest = request[:start] + request[end:]
            if (value in rest and span.casefold() != value.casefold()) or span in others:
                continue
            if max_length is None or len(span) <= max_length:
                found.append(span)
    return max(found, key=len) if found else None
