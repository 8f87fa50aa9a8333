"""Strict JSON: only what ``json.dumps`` could have written.

``json.loads`` also reads ``NaN``, ``Infinity`` and ``-Infinity`` (and ``1e999`` as an
infinite float); none of them is JSON, and ``json.dumps`` cannot write them back as JSON.
Every reader of untrusted JSON text refuses them through :func:`refuse_constant`.
"""

from __future__ import annotations

import math
from typing import NoReturn

__all__ = ["NonFiniteNumber", "finite_float", "refuse_constant"]


class NonFiniteNumber(ValueError):
    """NaN or ±Infinity in JSON text; ``token`` is the text as written."""

    def __init__(self, token: str):
        super().__init__(token)
        self.token = token

    def __str__(self) -> str:
        return f"{self.token} is not valid JSON"


def refuse_constant(token: str) -> NoReturn:
    """``json.loads(..., parse_constant=refuse_constant)``: NaN and ±Infinity are refused."""
    raise NonFiniteNumber(token)


def finite_float(token: str) -> float:
    """``json.loads(..., parse_float=finite_float)``: a number too large for a float is refused."""
    value = float(token)
    if not math.isfinite(value):  # e.g. 1e999 parses to inf
        raise NonFiniteNumber(token)
    return value
