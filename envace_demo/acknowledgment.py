"""Whether an answer tells the user that a call failed.

An answer written right after a failure (a real error, or a call held on a foreseen one)
must say so: a small actor trained on a script that once answered "Hold placed" after a
refused hold learnt to claim a write that never happened. ``acknowledges`` reads the answer
for a word of the failure that the request, the tool's description and the call's
arguments do not already hold (``HOLD_LIMIT_REACHED: patron P-1077 already has 3 holds``
-> ``already``, ``3``, ``limit``…), or for a plain negation ("could not", "did not"). After
a failed read, an answer that tells what an earlier read found stands too. ``report`` is
the engine's own answer when the actor, asked twice, still leaves the failure out: the
failure as the tool returned it, or as rehearsal foresaw it for a call never run.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Iterable

from envace_demo.grounding import number_text
from envace_demo.record import ToolCall, error_code, is_error

_WORD = re.compile(r"[a-z0-9][a-z0-9._/-]*[a-z0-9]|[a-z0-9]")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")
_NEGATION = re.compile(r"\b(?:not|cannot|unable|failed|fails|refused|denied|\w+n't|\w+n’t)\b",
                       re.IGNORECASE)
# Words that carry nothing on their own: an answer sharing only these with the failure told nothing of it.
_STOP = frozenset(
    "a an the of to in on at is are was be been it its this that and or for with by from as no any has "
    "have had i you your my me we our so do does did can could would will just please now there their "
    "they error".split()
)


def _words(text: str) -> set[str]:
    # A plural and its singular are one word ("holds" in the message, "hold" in the request),
    # and a number one value ("40.00" in the message, 40 in the arguments).
    out = set()
    for w in _WORD.findall(_THOUSANDS.sub("", text.lower())):
        number = _number(w)
        out.add(number if number is not None else w.rstrip("s") or w)
    return out - _STOP


def _number(word: str) -> str | None:
    """A word that is a finite number, written one way ("40.00" -> "40"); None otherwise
    ("inf" and "nan" are words)."""
    try:
        x = float(word)
    except ValueError:
        return None
    if not math.isfinite(x):
        return None
    return number_text(x)


def _said(call: ToolCall, known: Iterable[str]) -> set[str]:
    """The words a failure's words must not be to tell anything: the call's arguments and ``known``."""
    said = _words(json.dumps(call.arguments, ensure_ascii=False))
    for text in known:
        said |= _words(text)
    return said


def failure_text(failure: Any) -> tuple[str, str]:
    """The code and message of a failure in the environments' or the contract's form."""
    err = failure.get("error", failure.get("error_tool_call")) if isinstance(failure, dict) else None
    message = err.get("message") if isinstance(err, dict) else err if isinstance(err, str) else None
    return error_code(failure), str(message or "")


def acknowledges(
    answer: str, call: ToolCall, failure: Any, known: Iterable[str], read: Iterable[Any] = ()
) -> bool:
    """Whether ``answer`` tells of ``failure`` (the result ``call`` got), or answers from what
    was ``read`` for real before it: a negation, or a word of the failure's code, a number of
    its message, two other words of it, or a word of a read, that neither the call's arguments
    nor the ``known`` texts hold (the requests, the tool's description: "USD" or "holds" there
    tell nothing of this failure). One other word of the message is not enough: "Hold placed on
    the desk" took "desk" from "cancel one at the desk first"."""
    if not is_error(failure) or _NEGATION.search(answer):
        return True
    said = _said(call, known)
    code, message = failure_text(failure)
    answered = _words(answer)
    worded = (_words(message) - said) & answered
    strong = (_words(code.replace("_", " ")) - said) | {w for w in worded if _number(w) is not None}
    seen = set().union(*(_words(json.dumps(r, ensure_ascii=False)) for r in read))
    return bool(strong & answered) or len(worded) >= 2 or bool((seen - said) & answered)


def report(call: ToolCall, failure: Any, ran: bool, with_message: bool = True) -> str:
    """The engine's answer for a failure the actor left out: what the tool returned (``ran``)
    or what rehearsal foresaw for a call that was never run; ``with_message`` False keeps
    the code alone (a foreseen message whose values nothing real backs)."""
    code, message = failure_text(failure)
    told = f"{code}: {message}" if message and with_message else code
    if ran:
        return f"That did not go through: {call.name} failed with {told}."
    return f"I did not run {call.name}: rehearsal foresaw that it would fail with {told}."


def tells_why(answer: str, call: ToolCall, failure: Any, known: Iterable[str], described: Iterable[str] = ()) -> bool:
    """Whether ``answer`` tells why ``call`` failed, not only that it did: every number of the
    message that neither the call's arguments nor the user's words (``known``) hold, and a word
    of the code, two other words of the message, or one beside those numbers, that the tool's
    description (``described``) does not hold either ("USD" or "account" tell nothing). "The
    transfer did not go through: ACC-1002 has 1000.00 USD" leaves out the daily limit; "Hold
    placed on hold limit" leaves out that the patron already has 3 holds."""
    said = _said(call, known)
    general = said.union(*(_words(text) for text in described))
    code, message = failure_text(failure)
    answered = _words(answer)
    numbers = {w for w in _words(message) - said if _number(w) is not None}
    worded = {w for w in (_words(message) - general) & answered if _number(w) is None}
    named = bool((_words(code.replace("_", " ")) - general) & answered) or len(worded) >= 2 or bool(worded and numbers)
    return named and numbers <= answered
