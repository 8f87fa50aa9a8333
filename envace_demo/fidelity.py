"""How faithful a rehearsed response was to the real one: a score in [0, 1].

Structure and values both count: objects are compared key by key over the union
of their keys (a key present on one side only scores 0), arrays element by element
over the longer length, scalars by equality (numbers by relative closeness,
strings by normalized equality with partial credit for similar text). An error
predicted for a success (or the reverse) therefore scores low.
"""

from __future__ import annotations

import difflib
from typing import Any

_MAX_DEPTH = 32


def _norm(s: str) -> str:
    return " ".join(s.lower().split())


def _scalar(a: Any, b: Any) -> float:
    if isinstance(a, bool) or isinstance(b, bool):
        return 1.0 if a is b else 0.0
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if a == b:
            return 1.0
        scale = max(abs(a), abs(b))
        return max(0.0, 1.0 - abs(a - b) / scale) * 0.5  # close numbers earn partial credit
    if isinstance(a, str) and isinstance(b, str):
        na, nb = _norm(a), _norm(b)
        if na == nb:
            return 1.0
        return 0.5 * difflib.SequenceMatcher(None, na[:500], nb[:500]).ratio()
    return 1.0 if a == b else 0.0


def _as_error(value: Any) -> Any:
    """A call-level error in the common ``{"error": {"code", "message"}}`` form: the
    rehearsal contract wraps it as ``error_tool_call`` (with optional ``details``) where an
    environment answers ``error``; both mean the same failure."""
    inner = value.get("error_tool_call") if isinstance(value, dict) and len(value) == 1 else None
    if isinstance(inner, dict):
        return {"error": {k: v for k, v in inner.items() if k in ("code", "message")}}
    return value


def similarity(rehearsed: Any, real: Any, depth: int = 0) -> float:
    if depth > _MAX_DEPTH:
        return 1.0 if rehearsed == real else 0.0
    if isinstance(rehearsed, dict) and isinstance(real, dict):
        keys = set(rehearsed) | set(real)
        if not keys:
            return 1.0
        total = sum(
            similarity(rehearsed[k], real[k], depth + 1) if k in rehearsed and k in real else 0.0
            for k in keys
        )
        return total / len(keys)
    if isinstance(rehearsed, list) and isinstance(real, list):
        length = max(len(rehearsed), len(real))
        if length == 0:
            return 1.0
        total = sum(similarity(x, y, depth + 1) for x, y in zip(rehearsed, real))
        return total / length
    if isinstance(rehearsed, (dict, list)) or isinstance(real, (dict, list)):
        return 0.0
    return _scalar(rehearsed, real)


def fidelity(rehearsed: Any, real: Any) -> float | None:
    """The score of one step, or None when either side is missing."""
    if rehearsed is None or real is None:
        return None
    return round(similarity(_as_error(rehearsed), _as_error(real)), 4)


def mean_fidelity(scores: list[float | None]) -> float | None:
    known = [s for s in scores if s is not None]
    return round(sum(known) / len(known), 4) if known else None
