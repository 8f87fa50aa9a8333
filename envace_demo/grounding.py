"""Whether an answer tells the user only what is real.

A rehearsal is a prediction: its values (a balance, a count of copies, an id) must never
reach the user as facts. ``ungrounded`` finds the values of an answer that some rehearsal
had and nothing real did: no real tool result, not the request, not the arguments of a
call. Values are numbers (``$1,250.00`` and ``1250`` are one value) and identifiers with a
letter prefix and digits (``ACC-1003``, ``BK-012``, ``TX-5003``).
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable

_IDENT = re.compile(r"\b[A-Za-z]{1,6}-\d+\b")
_NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?(?![\w])")


def values(text: str) -> set[str]:
    """The values written in ``text``, normalized: identifiers upper-cased, numbers as the
    shortest float text (``15.50`` -> ``15.5``, ``1,250`` -> ``1250``)."""
    found = {m.group(0).upper() for m in _IDENT.finditer(text)}
    bare = _IDENT.sub(" ", text)
    for m in _NUMBER.finditer(bare):
        raw = m.group(0).replace(",", "")
        try:
            number = float(raw)
        except ValueError:
            continue
        found.add(number_text(number))
    return found


_CODE = re.compile(r"(?<![\w-])[a-z]+(?:_[a-z]+)+(?![\w-])")


def codes(text: str) -> set[str]:
    """The snake_case codes written in ``text`` ("stolen_card", "suspected_fraud"): the values
    of a schema's choices, which a failure message gives as its reason."""
    return set(_CODE.findall(text))


def number_text(x: float) -> str:
    """A number written one way: ``15.50`` -> ``15.5``, ``1250.0`` -> ``1250``."""
    return str(int(x)) if x == int(x) and abs(x) < 1e15 else repr(x)


def values_of(items: Iterable[Any]) -> set[str]:
    """The values of JSON items (results, arguments) and texts (the request)."""
    out: set[str] = set()
    for item in items:
        if item is None:
            continue
        out |= values(item if isinstance(item, str) else json.dumps(item, ensure_ascii=False))
    return out


def ungrounded(answer: str | None, rehearsed: Iterable[Any], real: Iterable[Any]) -> list[str]:
    """The values of ``answer`` that the ``rehearsed`` items hold and the ``real`` items do
    not (sorted): a rehearsed value told as if it were real."""
    if not answer:
        return []
    said = values(answer)
    return sorted((said & values_of(rehearsed)) - values_of(real))
