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

from typing import Any

from envace_demo.engine.condition import branches, sums
from envace_demo.engine.items import FILE_WRITTEN, PATH_WRITTEN, inside_path
from envace_demo.fidelity import is_number, leaves
from envace_demo.grounding import number_text, values
from envace_demo.record import ToolCall

# A sentence that sets a condition or an alternative.
_CONDITION = re.compile(r"\b(?:if|unless|otherwise|else|in case|instead)\b", re.IGNORECASE)
# What is left: the amount a condition falls back to.
_REST = re.compile(r"\b(?:whatever(?:'s| is)? (?:left|there|in there|available)|what(?:'s| is) (?:left|there)|the rest"
                   r"|all (?:of )?(?:it|that's left|there is)|everything(?: there is)?|the remain(?:ing|der)"
                   r"|as much as (?:there is|i can|possible|(?:it|they|the bank|you)(?: will| would| can)? (?:allow|let)s?)"
                   r"|what(?:ever)? (?:it|they|the bank|you)(?: will| would| can)? (?:allow|let)s?"
                   r"|the max(?:imum)?|the most (?:it|they|the bank|you|i can)\b)\b", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def fallbacks(request: str) -> list[str]:
    """The paths the conditional sentences of ``request`` give, after their condition word."""
    out: list[str] = []
    for sentence in _SENTENCE.split(request):
        if (m := _CONDITION.search(sentence)) is None:
            continue
        # "... call it /notes/todo-2.txt instead": "instead" follows the value it gives.
        start = 0 if re.search(r"\binstead\b", sentence, re.IGNORECASE) else m.end()
        # A path ("/notes/todo-2.txt") or a file name with an extension ("todo-2.txt"), as items reads them.
        found = [(m.start(), m.group(0).rstrip(".")) for m in PATH_WRITTEN.finditer(sentence, start)]
        found += [(m.start(), m.group(0)) for m in FILE_WRITTEN.finditer(sentence, start)
                  if not inside_path(sentence, m.start())]
        out += [value for at, value in sorted(found)
                if not re.search(r"\binstead of\s+$", sentence[:at], re.IGNORECASE)]
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


def amount_calls(held: ToolCall, requests: list[str]) -> list[ToolCall]:
    """``held`` with its amount given each other sum a branch of the last request asks for
    instead ("If there isn't enough in the account for that, withdraw $300 instead"): from the
    branch's action, never its condition ("if it has more than $5,000")."""
    amount = held.arguments.get("amount")
    if not isinstance(amount, (int, float)) or isinstance(amount, bool) or not requests:
        return []
    given = [s for b in branches(requests[-1]) for s in sums(b.action)]
    return [ToolCall(held.name, {**held.arguments, "amount": s}) for s in dict.fromkeys(given) if 0 < s != amount]


def rest_calls(held: ToolCall, requests: list[str], foreseen: Any, context: list[dict]) -> list[ToolCall]:
    """``held`` with its amount given what is left, where the last request's conditional
    sentence falls back to it (``_REST``): the one number of the real context reads (the
    balance) that the foreseen failure's message names too, above 0 and below the amount."""
    sentences = _SENTENCE.split(requests[-1]) if requests else []
    if not any(_CONDITION.search(s) and _REST.search(s) for s in sentences):
        return []
    error = foreseen.get("error") if isinstance(foreseen, dict) else None
    named = values(error.get("message", "")) if isinstance(error, dict) and isinstance(error.get("message"), str) else set()
    real = [float(leaf) for c in context for _, leaf in leaves(c.get("result")) if is_number(leaf)]
    out = []
    for name, amount in held.arguments.items():
        if not is_number(amount) or isinstance(amount, bool) or amount <= 0:
            continue
        fits = {x for x in real if 0 < x < amount and number_text(x) in named}
        if len(fits) == 1:
            out.append(ToolCall(held.name, {**held.arguments, name: fits.pop()}))
    return out
