"""One-row decoding that skips what the grammar forces and what earlier prompts computed.

Two savings that ``model.generate`` leaves on the table for a single row:

- **Jump-forward.** Under a grammar, much of a turn is forced: ``<execution_result>``,
  every key of a declared response, the ``", "`` between them, the prefix an id pattern
  fixes. xgrammar names those tokens (``find_jump_forward_tokens``); they enter the model
  with the next sampled token in one forward pass instead of one pass each. Replaying
  the showcase's rehearsals through their grammars, 42% of the tokens were forced; on a
  CPU a pass over a few tokens costs about what one token costs (reading the weights
  dominates).
- **Prefix reuse.** The actor's next turn is its last prompt plus what happened since,
  and every rehearsal starts with the same system prompt and tool list. The KV caches of
  the last few sequences are kept; the next prompt takes the one it shares most with,
  cut back to the shared part, and prefills only the rest.
- **Sibling replay.** A row on the same prompt as a recent one draws from the scores that
  row recorded for as long as it draws the same ids (:mod:`.replay`).

A constrained value is never cut mid-way by the token budget (:mod:`envace_demo.models.closing`).

Sampling is the backend's: its logits processors (temperature, top-k, top-p) run on the
grammar-masked scores and torch's RNG draws (the caller seeds it). Training does not use
this path: it needs the model's own tokenization of every token it learns from.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable, Literal

from envace_demo.models.closing import closer_tensors
from envace_demo.models.decoding import RowStreamer, finished, sampling_processors, seeded, shared_length
from envace_demo.models.kv import growing_cache
from envace_demo.models.loops import loop_guard
from envace_demo.models.replay import Trace, replay_row
from envace_demo.models.row_draw import RowDraw


# On a CPU, up to this many rows decode one after another here rather than batched: a row
# here reuses the kept prefix and jumps over forced tokens. Measured on 2 cores (the rehearsal
# phase, bench/parallel.py, 2026-12-04): at N = 4 one by one took 10.2 s against 23.2 s batched
# on bank/check-balance and 8.2 s against 10.8 s on deposit-cash; at N = 8 on deposit-cash
# batched won, 12.8 s against 15.2 s.
CPU_ROWS = 4
@dataclass
class Decoded:
    """New token ids (the stop token last, when one ended the row) and what they cost."""

    ids: list[int]
    finish_reason: Literal["stop", "length", "cancelled"]
    forward_passes: int
    reused_tokens: int  # prompt tokens whose KV came from an earlier call
    # Each new id's probability under the model and the grammar (the masked scores before
    # temperature and top-k/p): 1.0 for a token the grammar forced.
    probs: list[float] = field(default_factory=list)


class PrefixCache:
    """KV caches of the last ``entries`` decoded sequences (prompt and output) of each set
    of weights, and the scores of the last ``traces`` rows (``replay_row``).

    An episode alternates actor and rehearser calls: two entries keep the actor's growing
    conversation and the rehearser's fixed head apart. Where each role has weights of its
    own (a rehearser adapter), an entry is kept under the weights that computed it (``key``)
    and only a call on the same weights takes it. Call ``clear`` when the weights change
    (an adapter applied or removed): a kept cache would belong to the old model."""

    def __init__(self, entries: int = 2, traces: int = 4):
        self.entries, self.traces = entries, traces
        self._kept: list[tuple[object, list[int], object]] = []  # (key, ids, cache), most recent last
        # (weights, prompt ids) -> a row's trace (replay.py), most recent last: parallel's
        # lead imagined run goes first, and the others replay it in a later call.
        self._traces: dict[tuple, Trace] = {}
        self._traces_lock = threading.Lock()  # an episode starting forgets them from its own thread

    def take(self, ids: list[int], key: object = None):
        """(cache, tokens reused) for a call on ``ids`` by the weights ``key``: the kept
        cache of those weights sharing the longest prefix with ``ids``, cut to that prefix
        and removed from the store (the call extends it). The last prompt token is always
        left to run: it yields the logits."""
        best, best_shared = None, 0
        for index, (kept_key, kept_ids, _) in enumerate(self._kept):
            shared = _shared_prefix(kept_ids, ids, len(ids) - 1) if kept_key == key else 0
            if shared > best_shared:
                best, best_shared = index, shared
        if best is None:
            return None, 0
        _, _, cache = self._kept.pop(best)
        surplus = int(cache.get_seq_length()) - best_shared
        if surplus > 0:
            cache.crop(-surplus)  # a negative count removes that many tokens from the end
        return cache, best_shared

    def keep(self, ids: list[int], cache, key: object = None) -> None:
        """Keep ``ids``' cache under ``key``: at most ``entries`` a set of weights, so that
        an episode without rehearsal (the actor's alone) does not drop the rehearser's head."""
        self._kept.append((key, list(ids), cache))
        mine = [i for i, (k, _, _) in enumerate(self._kept) if k == key]
        for i in reversed(mine[: -self.entries]):
            del self._kept[i]

    def trace(self, key: tuple) -> Trace | None:
        with self._traces_lock:
            return self._traces.get(key)

    def keep_trace(self, key: tuple, trace: Trace) -> None:
        with self._traces_lock:
            self._traces.pop(key, None)
            self._traces[key] = trace
            while len(self._traces) > self.traces:
                del self._traces[next(iter(self._traces))]

    def clear_traces(self) -> None:
        with self._traces_lock:
            self._traces.clear()

    def clear(self) -> None:
        self._kept.clear()
        self.clear_traces()


def _shared_prefix(a: list[int], b: list[int], limit: int) -> int:
    limit = min(len(a), limit)
    shared = 0
    while shared < limit and a[shared] == b[shared]:
        shared += 1
    return shared


def decode_row(
    model,
    row: RowDraw,
    *,
    prefix: PrefixCache | None = None,
    weights: object = None,
    on_ids: Callable[[list[int]], None] | None = None,
    cancel: threading.Event | None = None,
    start: tuple | None = None,
    trace: Trace | None = None,
) -> Decoded:
    """Decode ``row`` (its prompt, grammar and sampler; ids it drew already are gone on
    from) with ``model`` (a transformers causal LM). ``on_ids`` gets the new ids so far
    after every pass; ``weights``: the key of ``model``'s active weights in ``prefix``;
    ``start``: (cache, tokens) of the prompt's head to start from (``shared_head``);
    ``trace`` records the scores for rows that replay this one (:mod:`.replay`). The
    caller holds ``torch.inference_mode`` and the seed."""
    import torch

    prompt_ids = row.prompt_ids
    if start is None:
        start = prefix.take(prompt_ids, weights) if prefix is not None else (None, 0)
    cache, reused = (growing_cache() if start[0] is None else start[0]), start[1]
    pending = prompt_ids[reused:] + row.out  # tokens not yet through the model
    passes = 0
    reason: Literal["stop", "length", "cancelled"] = "length"
    if trace is not None:
        trace.ids = row.out  # filled as the row draws
    while not row.full:
        if cancel is not None and cancel.is_set():
            reason = "cancelled"
            break
        ids = torch.tensor([pending], dtype=torch.long, device=model.device)
        result = model(ids, cache=cache, use_cache=True, logits_to_keep=1)
        passes += 1
        cache, pending = result.cache, []
        scores = result.logits[:, -1, :].float()
        if trace is not None:
            trace.scores.append((len(row.out), scores.clone()))
        drawn = row.draw(scores)
        if drawn is None:
            reason = "stop"
            break
        pending = drawn
        if on_ids is not None:
            on_ids(row.out)
    if prefix is not None and cache is not None:
        # The cache holds what went through the model; ``pending`` (and a stop token) did not.
        seen = prompt_ids + row.out[: len(row.out) - len(pending) - (reason == "stop")]
        prefix.keep(seen[: int(cache.get_seq_length())], cache, weights)
    return Decoded(row.out, reason, passes, reused, row.probs)


def row_by_row(backend, rows: int) -> bool:
    """Whether a TransformersBackend's call of ``rows`` rows takes this path."""
    if not backend.row_decoder or backend.compile_decode:  # the compiled step is model.generate's
        return False
    return rows == 1 or (backend.model.device.type == "cpu" and rows <= CPU_ROWS)


def decode_rows(backend, encoded: list[list[int]], sampling, constraints: list, on_token=None, cancel=None) -> list:
    """Generations of a TransformersBackend's rows decoded one after another, under its
    lock. On a CPU two rows decoded together cost about 1.5 times one row, a row here
    about half of one (jump-forward). The rows' shared prompt prefix is prefilled once
    (``shared_head``) and each row goes on from it; the last row's cache is kept for the
    next call. With ``backend.share_prefill`` off, each row prefills its whole prompt.
    Row i's seed is the base class's (``Backend.generate_many``)."""
    import time
    from dataclasses import replace

    share = backend.share_prefill or len(encoded) == 1
    head = shared_head(backend, encoded) if share and len(encoded) > 1 else None
    # On a GPU a call's rows are batched (row_by_row), so a recorded row would only serve a
    # later lone row on the same prompt, at a vocabulary of scores a token in GPU memory.
    replaying = backend.replay_siblings and backend.model.device.type == "cpu"
    out = []
    for row, (ids, constraint) in enumerate(zip(encoded, constraints)):
        start = time.perf_counter()
        if cancel is not None and cancel.is_set():
            out.append(finished(backend, [], ids, sampling.max_new_tokens, 0.0, True))
            continue
        seed = None if sampling.seed is None else sampling.seed + 1_000_003 * row
        stream = (lambda _, text, row=row: on_token(row, text)) if on_token is not None else None
        begin = None
        if head is not None:
            surplus = int(head[0].get_seq_length()) - head[1]  # what the row before added
            if surplus > 0:
                head[0].crop(-surplus)
            begin = head
        keep = share and (head is None or row == len(encoded) - 1)  # the head grows with each row: kept last
        # The first row on a prompt records the model's scores; a later one (here, or in a
        # later call: parallel's lead imagined run goes first) replays them (replay.py).
        key = (_weights_key(backend), tuple(ids))
        draft = backend.row_prefixes.trace(key) if replaying else None
        trace = Trace() if replaying and draft is None else None
        new = generate_row(backend, ids, replace(sampling, seed=seed), constraint, stream, cancel, begin, keep,
                           trace=trace, draft=draft)
        if trace is not None and trace.scores:
            backend.row_prefixes.keep_trace(key, trace)
        cancelled = cancel is not None and cancel.is_set()
        out.append(finished(backend, new, ids, sampling.max_new_tokens, time.perf_counter() - start, cancelled,
                            probs=backend.row_stats.probs))
    return out


def shared_head(backend, encoded: list[list[int]]) -> tuple | None:
    """(cache, length) of the prompt prefix all rows share (``decoding.shared_length``),
    prefilled once, from a kept prefix where there is one; None where they share nothing."""
    import torch

    shared = shared_length(encoded)
    if shared < 1:
        return None
    cache, reused = backend.row_prefixes.take(encoded[0][: shared + 1], _weights_key(backend))
    cache = growing_cache() if cache is None else cache
    if reused < shared:
        ids = torch.tensor([encoded[0][reused:shared]], dtype=torch.long, device=backend.model.device)
        with torch.inference_mode():
            cache = backend.model(ids, cache=cache, use_cache=True, logits_to_keep=1).cache
    return cache, shared


def _weights_key(backend) -> object:
    """The key of the weights serving now in the kept prefixes (peft's ``active_adapter``)."""
    return getattr(backend.model, "active_adapter", None)


def generate_row(
    backend, prompt_ids: list[int], sampling, constraint, on_token=None, cancel=None, start=None, keep=True,
    trace: Trace | None = None, draft: Trace | None = None,
) -> list[int]:
    """``decode_row`` with a TransformersBackend's grammar, sampling, seed, streaming and
    kept prefixes (those of the adapter active): from ``start`` (``decode_row``) where
    given, and kept afterwards if ``keep``; ``trace``: filled for rows that replay this one;
    ``draft``: an earlier row's trace on the same prompt, replayed first (:mod:`.replay`).
    New ids, stop token included."""
    import torch

    grammars = backend._grammar_cache() if constraint is not None else None
    matcher = closers = None
    if grammars is not None:
        import xgrammar as xgr

        matcher = xgr.GrammarMatcher(grammars.compile(constraint))
        closers = backend.closing_ids()
    streamed = [0]
    streamer = RowStreamer(backend.tokenizer, 1, backend.stop_ids, on_token) if on_token else None

    def stream(ids: list[int]) -> None:
        for token in ids[streamed[0] :]:
            streamer.put(torch.tensor([token]))
        streamed[0] = len(ids)

    if streamer is not None:
        streamer.put(torch.tensor(prompt_ids))  # the streamer skips the prompt it is first given
    on_ids = stream if streamer is not None else None
    row = RowDraw(
        prompt_ids,
        sampling.max_new_tokens,
        backend.stop_ids,
        backend.thinking_budget(sampling, [prompt_ids[-4:]]) + loop_guard(backend) + sampling_processors(sampling),
        matcher=matcher,
        tags=backend.tag_texts,
        decode=backend.tokenizer.decode,
        closers=closer_tensors(closers, backend.model.device),
        string_chars=grammars.string_chars(constraint) if grammars is not None else None,
    )
    with torch.inference_mode(), seeded(sampling.seed, backend.model.device):
        reason = replay_row(draft, row, cancel) if draft is not None else None
        if reason is not None:  # drawn as the earlier row drew, to the end: no model pass
            if on_ids is not None:
                on_ids(row.out)
            if keep and start is not None:  # the shared prompt, for the next call
                backend.row_prefixes.keep(prompt_ids[: start[1]], start[0], _weights_key(backend))
            backend.row_stats = Decoded(row.out, reason, 0, len(prompt_ids), row.probs)
            return row.out
        decoded = decode_row(
            backend.model,
            row,
            prefix=backend.row_prefixes if keep else None,
            weights=_weights_key(backend),
            on_ids=on_ids,
            cancel=cancel,
            start=start,
            trace=trace,
        )
    backend.row_stats = decoded
    return decoded.ids
