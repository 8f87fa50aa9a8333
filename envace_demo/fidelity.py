"""How faithful a rehearsed response was to the real one: the outcome first, then the values.

A rehearsal is only useful to the actor if it predicts what *happens*: a success where the
real call failed (or a failure of another kind) misleads however plausible its values look.
So a call is judged in two steps:

1. **Outcome**: ``"success"`` or the error code (:func:`outcome`). A rehearsal that is
   missing, cut short or unparsable (``REHEARSAL_FAILED``) is a *miss*: it counts as a wrong
   outcome, not as a call left out, so a rehearser cannot score well by failing to answer.
2. **Values**: every leaf of the *real* response (a scalar, or an empty object/array; found
   by walking objects by key and arrays by index) is compared with the rehearsal's value at
   the same path, strictly: numbers equal within 1e-9 relative, strings equal once
   lower-cased and whitespace-collapsed, anything else by equality. No partial credit: an
   invented balance of 99.0 for a real 100.0 is as wrong as any other. An error's code is
   the outcome and is not scored again as a value; its message is.

Leaves are split by whether the rehearser could have known them (:class:`Context`): a value
shown to it (the call's arguments, results it was shown, the tool's description) is
*knowable*, anything else (a balance never seen, a generated id) is *unknowable*. Echoing
the arguments back earns the knowable leaves and nothing else; the split says which kind of
value a rehearser gets right.

:func:`fidelity` folds this into one number in [0, 1]: None without a real response, 0.0 for
a miss or a wrong outcome, else ``0.5 + 0.5 * share of real leaves right`` (an outcome right
is worth half). Keys or elements the rehearsal adds beyond the real response are not scored.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterator

_MAX_DEPTH = 32  # below this, a subtree is compared whole, as one leaf
FAILED = "REHEARSAL_FAILED"  # the engine's code for a rehearsal it could not use
SUCCESS = "success"
MISSING = "missing"  # the outcome of no result at all

Path = tuple[Any, ...]
_NUMBER_IN_TEXT = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?")


def _norm(s: str) -> str:
    return " ".join(s.lower().split())


def is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _as_error(value: Any) -> Any:
    """A call-level error in the common ``{"error": {"code", "message"}}`` form: the
    rehearsal contract wraps it as ``error_tool_call`` (with optional ``details``) where an
    environment answers ``error``; both mean the same failure."""
    inner = value.get("error_tool_call") if isinstance(value, dict) and len(value) == 1 else None
    if isinstance(inner, dict):
        return {"error": {k: v for k, v in inner.items() if k in ("code", "message")}}
    return value


def outcome(result: Any) -> str:
    """``"success"``, or the code of the error ``result`` is (``"ERROR"`` when it names
    none); ``"missing"`` for None. A result is an error when it is an object with an
    ``error`` or ``error_tool_call`` entry that is not null."""
    if result is None:
        return MISSING
    if isinstance(result, dict):
        for key in ("error", "error_tool_call"):
            inner = result.get(key)
            if inner is not None:
                code = inner.get("code") if isinstance(inner, dict) else None
                return str(code) if code else "ERROR"
    return SUCCESS


def is_miss(rehearsed: Any) -> bool:
    """No usable rehearsal: none at all, or one the engine replaced by ``REHEARSAL_FAILED``
    (cut short by the time, or not parsable)."""
    return outcome(rehearsed) in (MISSING, FAILED)


def error_right(rehearsed: Any, real: Any) -> bool:
    """Whether a rehearsal foresaw a failure where the real call failed and a success where
    it succeeded, whichever the error (the outcome as error or not); a missing, cut or
    unparsable rehearsal is wrong."""
    rehearsed_n, real_n = _as_error(rehearsed), _as_error(real)
    return not is_miss(rehearsed_n) and (outcome(rehearsed_n) == SUCCESS) == (outcome(real_n) == SUCCESS)


# --- what the rehearser could know -------------------------------------------------------


@dataclass(frozen=True)
class Knowable:
    """The leaf values a rehearser was shown: strings (normalized) and numbers (as float),
    plus the description's text, in which a string or number also counts when it appears
    as a whole word. Booleans, nulls and empty containers are never knowable: they carry no
    identity to trace back to what was shown."""

    strings: frozenset[str] = frozenset()
    numbers: frozenset[float] = frozenset()
    text: str = ""

    def holds(self, leaf: Any) -> bool:
        if isinstance(leaf, str):
            s = _norm(leaf)
            if not s:
                return False
            return s in self.strings or _word_in(s, self.text)
        if is_number(leaf):
            return float(leaf) in self.numbers
        return False


def _word_in(s: str, text: str) -> bool:
    return bool(text) and re.search(rf"(?<!\w){re.escape(s)}(?!\w)", text) is not None


@dataclass(frozen=True)
class Context:
    """What the rehearser was shown for one call: its ``arguments``, ``known`` JSON values
    (few-shot results, earlier tool results in the history) and the tool's ``description``."""

    arguments: dict = field(default_factory=dict)
    known: tuple = ()
    description: str = ""

    def knowable(self) -> Knowable:
        strings: set[str] = set()
        numbers: set[float] = set()
        for value in (self.arguments, *self.known):
            _collect(value, strings, numbers, 0)
        text = _norm(self.description or "")
        for token in _NUMBER_IN_TEXT.findall(text):
            numbers.add(float(token.replace(",", "")))
        return Knowable(frozenset(strings), frozenset(numbers), text)


def _collect(value: Any, strings: set[str], numbers: set[float], depth: int) -> None:
    """Every string (object keys included: an id is often a key) and number in ``value``."""
    if depth > _MAX_DEPTH:
        return
    if isinstance(value, dict):
        for k, v in value.items():
            strings.add(_norm(str(k)))
            _collect(v, strings, numbers, depth + 1)
    elif isinstance(value, list):
        for v in value:
            _collect(v, strings, numbers, depth + 1)
    elif isinstance(value, str):
        strings.add(_norm(value))
    elif is_number(value):
        numbers.add(float(value))


# --- comparing values ------------------------------------------------------------------------


def leaves(value: Any, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    """A JSON value's leaves with their paths (a real response's, where scored): scalars and
    empty containers (an empty list is a claim too: "no results"); below ``_MAX_DEPTH`` a
    subtree is one leaf."""
    if len(path) < _MAX_DEPTH and isinstance(value, dict) and value:
        for k, v in value.items():
            yield from leaves(v, (*path, k))
    elif len(path) < _MAX_DEPTH and isinstance(value, list) and value:
        for i, v in enumerate(value):
            yield from leaves(v, (*path, i))
    else:
        yield path, value


_ABSENT = object()


def _at(value: Any, path: Path) -> Any:
    """The value at ``path`` in ``value``, or ``_ABSENT``."""
    for step in path:
        if isinstance(value, dict) and step in value:
            value = value[step]
        elif isinstance(value, list) and isinstance(step, int) and step < len(value):
            value = value[step]
        else:
            return _ABSENT
    return value


def same_value(rehearsed: Any, real: Any) -> bool:
    """Strict equality of two leaves: numbers within 1e-9 relative, strings normalized."""
    if isinstance(rehearsed, bool) or isinstance(real, bool):
        return rehearsed is real
    if is_number(rehearsed) and is_number(real):
        return math.isclose(rehearsed, real, rel_tol=1e-9, abs_tol=0.0)
    if isinstance(rehearsed, str) and isinstance(real, str):
        return _norm(rehearsed) == _norm(real)
    return type(rehearsed) is type(real) and rehearsed == real


# --- scoring ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Score:
    """One call's judgement. ``knowable``/``unknowable``: the share of the real response's
    knowable/unknowable leaves the rehearsal got right (None: no such leaves; 0 when the
    outcome is wrong, whose values do not count as right). ``value``: the share of all real
    leaves right (1.0 when there are none; 0 when the outcome is wrong). ``missed``: there
    was no usable rehearsal."""

    outcome_right: bool
    knowable: float | None
    unknowable: float | None
    value: float
    missed: bool = False


def _share(hits: list[bool]) -> float | None:
    return sum(hits) / len(hits) if hits else None


def _wrong(knowable: list[bool], unknowable: list[bool], missed: bool) -> Score:
    return Score(
        outcome_right=False,
        knowable=0.0 if knowable else None,
        unknowable=0.0 if unknowable else None,
        value=0.0,
        missed=missed,
    )


def score(rehearsed: Any, real: Any, context: Context | None = None) -> Score:
    """Judge ``rehearsed`` against ``real`` (which must not be None): outcome, then values
    split by what ``context`` showed the rehearser (None: nothing, so every leaf is
    unknowable)."""
    if real is None:
        raise ValueError("no real response to score against")
    knowable_set = (context or Context()).knowable()
    real_n, rehearsed_n = _as_error(real), _as_error(rehearsed)
    is_error = outcome(real_n) != SUCCESS
    knowable: list[bool] = []
    unknowable: list[bool] = []
    missed = is_miss(rehearsed_n)
    right_outcome = not missed and outcome(rehearsed_n) == outcome(real_n)
    for path, leaf in leaves(real_n):
        if is_error and path[:2] in (("error", "code"), ("error_tool_call", "code")):
            continue  # the code is the outcome, already judged
        hit = right_outcome and _matches(_at(rehearsed_n, path), leaf)
        (knowable if knowable_set.holds(leaf) else unknowable).append(hit)
    if not right_outcome:
        return _wrong(knowable, unknowable, missed)
    hits = knowable + unknowable
    return Score(True, _share(knowable), _share(unknowable), _share(hits) if hits else 1.0)


def _matches(rehearsed: Any, real: Any) -> bool:
    return rehearsed is not _ABSENT and same_value(rehearsed, real)


def fidelity(rehearsed: Any, real: Any) -> float | None:
    """The score of one step in [0, 1]: None without a real response; 0.0 for a missing,
    cut or unparsable rehearsal and for a wrong outcome; else ``0.5 + 0.5 * share of the
    real leaves right``. Rounded to 4 decimals."""
    if real is None:
        return None
    s = score(rehearsed, real)
    if not s.outcome_right:
        return 0.0
    return round(0.5 + 0.5 * s.value, 4)


def mean_fidelity(scores: list[float | None]) -> float | None:
    known = [s for s in scores if s is not None]
    return round(sum(known) / len(known), 4) if known else None


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 3) if values else None


def summarize_parts(scores: list[Score]) -> dict:
    """The parts over many calls: ``calls``; ``outcome``, the share with the outcome right;
    ``missed``, how many had no usable rehearsal; ``knowable``/``unknowable``, the mean
    per-call share over the calls that have such leaves (each call weighs one, however many
    leaves it has, so one long listing does not drown the rest); ``value``, the mean value.
    Rounded to 3 decimals; None where there is nothing to average."""
    return {
        "calls": len(scores),
        "outcome": _mean([1.0 if s.outcome_right else 0.0 for s in scores]),
        "missed": sum(s.missed for s in scores),
        "knowable": _mean([s.knowable for s in scores if s.knowable is not None]),
        "unknowable": _mean([s.unknowable for s in scores if s.unknowable is not None]),
        "value": _mean([s.value for s in scores]),
    }
