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

A constrained value is never cut mid-way by the token budget (:mod:`envace_demo.models.closing`).

Sampling is the backend's: its logits processors (temperature, top-k, top-p) run on the
grammar-masked scores and torch's RNG draws (the caller seeds it). Training does not use
this path: it needs the model's own tokenization of every token it learns from.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable, Literal

from envace_demo.errors import ModelError
from envace_demo.models.closing import CLOSING_TOKENS, close_scores, closer_tensors
from envace_demo.models.decoding import RowStreamer, finished, sampling_processors, seeded, shared_length
from envace_demo.models.kv import growing_cache
from envace_demo.models.loops import loop_guard


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
    of weights.

    An episode alternates actor and rehearser calls: two entries keep the actor's growing
    conversation and the rehearser's fixed head apart. Where each role has weights of its
    own (a rehearser adapter), an entry is kept under the weights that computed it (``key``)
    and only a call on the same weights takes it. Call ``clear`` when the weights change
    (an adapter applied or removed): a kept cache would belong to the old model."""

    def __init__(self, entries: int = 2):
        self.entries = entries
        self._kept: list[tuple[object, list[int], object]] = []  # (key, ids, cache), most recent last

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

    def clear(self) -> None:
        self._kept.clear()


def _shared_prefix(a: list[int], b: list[int], limit: int) -> int:
    limit = min(len(a), limit)
    shared = 0
    while shared < limit and a[shared] == b[shared]:
        shared += 1
    return shared


def decode_row(
    model,
    prompt_ids: list[int],
    *,
    max_new_tokens: int,
    stop_ids: list[int],
    processors: list,
    matcher=None,
    prefix: PrefixCache | None = None,
    weights: object = None,
    on_ids: Callable[[list[int]], None] | None = None,
    cancel: threading.Event | None = None,
    tags: tuple[str, ...] = (),
    decode: Callable[[list[int]], str] | None = None,
    closers=None,
    closing: int = CLOSING_TOKENS,
    start: tuple | None = None,
    string_chars: int | None = None,
) -> Decoded:
    """Decode one row after ``prompt_ids`` with ``model`` (a transformers causal LM).

    ``matcher``: an xgrammar GrammarMatcher (None: free text); ``processors``: logits
    processors run after the grammar mask (none: greedy); ``on_ids`` gets the new ids so
    far after every pass; ``weights``: the key of ``model``'s active weights in ``prefix``
    (the role adapter serving the row, or None); ``tags``: texts the tokenizer has one special token for (with
    ``decode``, ids to text); ``closers``: the ids that close a value (``closing_ids``, a
    tensor; with ``decode``), preferred in the last ``closing`` tokens while a call or a
    result is open, and in a string once it holds ``string_chars`` characters; ``start``:
    (cache, tokens) of the prompt's first tokens to start from instead of a kept prefix
    (the rows' shared prefix, ``shared_head``). The caller holds
    ``torch.inference_mode`` and the seed."""
    import torch

    if start is None:
        start = prefix.take(prompt_ids, weights) if prefix is not None else (None, 0)
    cache, reused = start
    cache = growing_cache() if cache is None else cache
    pending = prompt_ids[reused:]  # tokens not yet through the model
    out, probs, passes, bitmask = [], [], 0, None
    reason: Literal["stop", "length", "cancelled"] = "length"
    while len(out) < max_new_tokens:
        if cancel is not None and cancel.is_set():
            reason = "cancelled"
            break
        ids = torch.tensor([pending], dtype=torch.long, device=model.device)
        result = model(ids, cache=cache, use_cache=True, logits_to_keep=1)
        passes += 1
        cache, pending = result.cache, []
        scores = result.logits[:, -1, :].float()
        if matcher is not None:
            bitmask = _mask(scores, matcher, bitmask)
            ending = max_new_tokens - len(out) <= closing
            if closers is not None and decode is not None and (ending or string_chars is not None):
                scores = close_scores(scores, closers, decode(out), ending, string_chars)
        dist = scores[0].softmax(dim=-1)  # before a processor changes the scores in place
        token = _pick(scores, processors, prompt_ids, out)
        if matcher is not None and not matcher.accept_token(token):
            raise ModelError(f"constrained decoding: sampled token {token} its grammar forbids")
        out.append(token)
        probs.append(float(dist[token]))
        if token in stop_ids:
            reason = "stop"
            break
        pending = [token]
        if matcher is not None:
            forced = matcher.find_jump_forward_tokens()[: max_new_tokens - len(out)]
            forced = _before_tags(forced, decode, tags) if tags and forced else forced
            for forced_token in forced:
                matcher.accept_token(forced_token)
            out.extend(forced)
            probs.extend([1.0] * len(forced))
            pending.extend(forced)
        if on_ids is not None:
            on_ids(out)
    if prefix is not None and cache is not None:
        # The cache holds what went through the model; ``pending`` (and a stop token) did not.
        seen = prompt_ids + out[: len(out) - len(pending) - (reason == "stop")]
        prefix.keep(seen[: int(cache.get_seq_length())], cache, weights)
    return Decoded(ids=out, finish_reason=reason, forward_passes=passes, reused_tokens=reused, probs=probs)


def _mask(scores, matcher, bitmask):
    """Mask ``scores`` in place by ``matcher``'s grammar; the bitmask, allocated on first
    use as wide as the logits (which the grammar was compiled for)."""
    import xgrammar as xgr

    if bitmask is None:
        bitmask = xgr.allocate_token_bitmask(1, scores.shape[-1])
    matcher.fill_next_token_bitmask(bitmask)
    xgr.apply_token_bitmask_inplace(scores, bitmask.to(scores.device))
    return bitmask


def _before_tags(forced: list[int], decode: Callable[[list[int]], str], tags: tuple[str, ...]) -> list[int]:
    """The forced ids that stop short of any of ``tags``: xgrammar spells a forced tag
    such as Qwen3's ``<tool_call>`` out of ordinary tokens, while the model writes (and
    was trained on) its one special token. The model samples the tag itself."""
    text = decode(forced)
    if "<" not in text:
        return forced
    kept = len(forced)
    while kept:
        head = decode(forced[:kept])
        if not any(tag in head for tag in tags) and not _ends_inside_tag(head, tags):
            break
        kept -= 1
    return forced[:kept]


def _ends_inside_tag(text: str, tags: tuple[str, ...]) -> bool:
    return any(text.endswith(tag[:k]) for tag in tags for k in range(1, len(tag)))


def _pick(scores, processors: list, prompt_ids: list[int], out: list[int]) -> int:
    import torch

    if not processors:
        return int(scores.argmax(dim=-1)[0])
    history = torch.tensor([prompt_ids + out], dtype=torch.long, device=scores.device)
    for processor in processors:
        scores = processor(history, scores)
    if all(getattr(p, "forcing", False) for p in processors):  # greedy, with tokens forced at times
        return int(scores.argmax(dim=-1)[0])
    return int(torch.multinomial(scores.softmax(dim=-1), 1)[0, 0])


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
        new = generate_row(backend, ids, replace(sampling, seed=seed), constraint, stream, cancel, begin, keep)
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
    backend, prompt_ids: list[int], sampling, constraint, on_token=None, cancel=None, start=None, keep=True
) -> list[int]:
    """``decode_row`` with a TransformersBackend's grammar, sampling, seed, streaming and
    kept prefixes (those of the adapter active): from ``start`` (``decode_row``) where
    given, and kept afterwards if ``keep``. New ids, stop token included."""
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
    with torch.inference_mode(), seeded(sampling.seed, backend.model.device):
        decoded = decode_row(
            backend.model,
            prompt_ids,
            max_new_tokens=sampling.max_new_tokens,
            stop_ids=backend.stop_ids,
            processors=backend.thinking_budget(sampling, [prompt_ids[-4:]]) + loop_guard(backend)
            + sampling_processors(sampling),
            matcher=matcher,
            prefix=backend.row_prefixes if keep else None,
            weights=_weights_key(backend),
            on_ids=stream if streamer is not None else None,
            cancel=cancel,
            tags=backend.tag_texts,
            decode=backend.tokenizer.decode,
            closers=closer_tensors(closers, backend.model.device),
            start=start,
            string_chars=grammars.string_chars(constraint) if grammars is not None else None,
        )
    backend.row_stats = decoded
    return decoded.ids
