"""Sibling replay: a row drawn from the scores an earlier row on the same prompt recorded.

Parallel's imagined runs start from the same prompt with different seeds, and where the
embedded model's turns are sharp they draw the same tokens: on bank/deposit-cash four runs'
actions and rehearsals came out as the same text. The model's scores after a
prompt and the ids drawn so far are the same whoever draws next, so a later row (in the
same call, or a later one: the lead imagined run goes first, the others after) draws its
own tokens, with its own seed and grammar, from the scores the first row recorded, for as
long as its ids are the first row's; where they part, the model takes over from there. A
row so drawn has the tokens it would have had alone (the same scores, the same draws)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Literal

from envace_demo.models.row_draw import RowDraw


@dataclass
class Trace:
    """What one row's model passes gave: the ids it drew, and the raw scores (1 ×
    vocabulary, before any mask) at each position where it drew one."""

    ids: list[int] = field(default_factory=list)
    scores: list[tuple[int, object]] = field(default_factory=list)  # (ids drawn before, scores)


def replay_row(trace: Trace, row: RowDraw, cancel: threading.Event | None = None) -> Literal["stop", "length"] | None:
    """Draw ``row`` (the caller seeds its sampler) from ``trace`` while its ids are the
    trace's: why it ended, or None where it parted from them (or the trace ran out, or
    ``cancel`` was set) and the model must go on from ``row.out``."""
    for position, scores in trace.scores:
        if row.full:
            return "length"
        if cancel is not None and cancel.is_set():
            return None
        if len(row.out) != position or row.out != trace.ids[:position]:
            return None  # another id drawn, or another grammar forcing other ids
        if row.draw(scores.clone()) is None:
            return "stop"
    return "length" if row.full else None
