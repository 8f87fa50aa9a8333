"""What the rehearser reads before it predicts a call.

A rehearser can only foresee what its context makes knowable: whether $20 can leave an
account depends on its balance, whether a file can be written on its directory. Before a
committed call is rehearsed, the engine makes the reads the environment names for it
(``Environment.context_reads``: real calls that change nothing) and puts their results
last in the rehearser's few-shot block, after the real results of the run so far. Training
rows are built the same way (``train/``), so the model learns to read them.
"""

from __future__ import annotations

from typing import Any, Callable

from envace_demo.record import ToolCall

# At most this many reads per call: a context, not a crawl.
MAX_READS = 3


def read_context(
    reads: list[tuple[str, dict[str, Any]]], execute: Callable[[str, dict[str, Any]], Any]
) -> list[tuple[ToolCall, Any]]:
    """The (call, real result) pairs of ``reads``, each executed by ``execute``."""
    return [(ToolCall(name, dict(arguments)), execute(name, arguments)) for name, arguments in reads[:MAX_READS]]


def shots(
    known: list[tuple[ToolCall, Any]] | tuple[tuple[ToolCall, Any], ...],
    real_results: list[tuple[ToolCall, Any]],
    context: list[tuple[ToolCall, Any]],
) -> list[tuple[ToolCall, Any]]:
    """The rehearser's few-shot: earlier known reads, the run's real results, then this
    call's context reads; a pair already there (same call, same result) is not repeated."""
    out: list[tuple[ToolCall, Any]] = []
    for call, result in [*known, *real_results, *context]:
        if not any(c == call and r == result for c, r in out):
            out.append((call, result))
    return out
