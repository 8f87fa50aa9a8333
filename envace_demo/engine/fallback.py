"""The other value a request gives for when its first one fails: "If that location isn't
writable, save it as /notes/maintenance.txt instead"; "if a file with that name is already
there, call the new one /notes/todo-2.txt" (``EpisodeConfig.repair_candidates``).

Shown the foreseen failure of the first write, the small actor reported it and stopped: the
user's fallback was never tried. A held write whose path argument the request's conditional
sentence offers another path for is tried again with that path (``Repairs`` rehearses it and
commits it only where a success is foreseen). Only paths: an amount "whatever's left" names
no value the user gave."""

from __future__ import annotations

import posixpath
import re

from envace_demo.record import ToolCall

# A sentence that sets a condition or an alternative.
_CONDITION = re.compile(r"\b(?:if|unless|otherwise|else|in case|instead)\b", re.IGNORECASE)
# A path ("/notes/todo-2.txt") or a file name with an extension ("todo-2.txt").
_PATH = re.compile(r"(?<![\w/.-])(?:/[\w.-]+)+/?|(?<![\w/.-])[\w-]+\.[A-Za-z0-9]{1,5}\b")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def fallbacks(request: str) -> list[str]:
    """The paths the conditional sentences of ``request`` give, after their condition word."""
    out: list[str] = []
    for sentence in _SENTENCE.split(request):
        if (m := _CONDITION.search(sentence)) is None:
            continue
        # "... call it /notes/todo-2.txt instead": "instead" follows the value it gives.
        start = 0 if re.search(r"\binstead\b", sentence, re.IGNORECASE) else m.end()
        out += [p.group(0).rstrip(".") for p in _PATH.finditer(sentence, start)
                if not re.search(r"\binstead of\s+$", sentence[:p.start()], re.IGNORECASE)]
    return list(dict.fromkeys(out))


def fallback_calls(held: ToolCall, requests: list[str]) -> list[ToolCall]:
    """``held`` with one path argument given a path the last request offers instead (a bare
    file name in the held path's folder), for each such path it does not pass already."""
    given = {v for v in held.arguments.values() if isinstance(v, str)}
    out: list[ToolCall] = []
    for value in fallbacks(requests[-1]) if requests else []:
        for name, arg in held.arguments.items():
            if not isinstance(arg, str) or not arg.startswith("/"):
                continue
            path = value if value.startswith("/") else posixpath.join(posixpath.dirname(arg), value)
            if path not in given:
                out.append(ToolCall(held.name, {**held.arguments, name: path}))
    return list({c.key(): c for c in out}.values())
