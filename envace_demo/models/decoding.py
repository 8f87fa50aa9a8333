"""The pieces of one batched ``model.generate`` call: prefill of a shared prompt prefix,
logits processors (sampling, per-row grammars), cancellation, streaming, seeding.

Classes that subclass transformers' own are defined on first use: importing its
generation code takes seconds.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache

from envace_demo.errors import ModelError
from envace_demo.models.base import Constraint, Generation, Sampling, StreamCallback
from envace_demo.models.closing import CLOSING_TOKENS, close_scores
from envace_demo.models.grammar import GrammarCache

# A torch RNG fork is process-wide state: two seeded calls must not interleave.
_RNG_LOCK = threading.Lock()


@cache
def cancel_criteria_class():
    """Defined on first use: importing transformers' generation code takes seconds."""
    import torch
    from transformers import StoppingCriteria

    class CancelCriteria(StoppingCriteria):
        """Stops every row once ``cancel`` is set (checked once per decoding step)."""

        def __init__(self, cancel: threading.Event):
            self.cancel = cancel

        def __call__(self, input_ids, scores, **kwargs):
            return torch.full(
                (input_ids.shape[0],), self.cancel.is_set(), dtype=torch.bool, device=input_ids.device
            )

    return CancelCriteria


@cache
def row_grammars_class():
    """Defined on first use, like the criteria above."""
    import xgrammar as xgr
    from transformers import LogitsProcessor

    class RowGrammars(LogitsProcessor):
        """A grammar per batch row (None: that row is free); one instance per ``generate``.
        xgrammar's own HF processor takes per-row grammars too, but not free rows.
        ``closing``: (closer ids, new-token budget, prompt width, ids -> text, each row's
        string bound): in the budget's last tokens an open value is closed, and a string at
        its row's bound, as the row decoder does."""

        def __init__(self, compiled: list, closing: tuple | None = None):
            self.matchers = [xgr.GrammarMatcher(c) if c is not None else None for c in compiled]
            vocab = next(c for c in compiled if c is not None).tokenizer_info.vocab_size
            self.bitmask = xgr.allocate_token_bitmask(len(compiled), vocab)
            self.started = False
            self.closing, self.steps = closing, 0

        def __call__(self, input_ids, scores):
            live = []
            last = input_ids[:, -1].tolist() if self.started else None
            for row, matcher in enumerate(self.matchers):
                if matcher is None or matcher.is_terminated():
                    continue  # free, or finished (generate pads finished rows)
                if last is not None and not matcher.accept_token(last[row]):
                    raise ModelError(f"constrained decoding: row {row} sampled token {last[row]} its grammar forbids")
                if not matcher.is_terminated():
                    matcher.fill_next_token_bitmask(self.bitmask, row)
                    live.append(row)
            self.started = True
            if live:
                xgr.apply_token_bitmask_inplace(scores, self.bitmask.to(scores.device), indices=live)
                scores = self._close(input_ids, scores, live)
            self.steps += 1
            return scores

        def _close(self, input_ids, scores, live: list[int]):
            if self.closing is None:
                return scores
            closers, budget, width, decode, strings = self.closing
            ending = budget - self.steps <= CLOSING_TOKENS
            for row in live:
                if not ending and strings[row] is None:
                    continue
                text = decode(input_ids[row, width:].tolist())
                scores[row : row + 1] = close_scores(scores[row : row + 1], closers, text, ending, strings[row])
            return scores

    return RowGrammars


def logits_processors(
    grammars: Callable[[], GrammarCache],
    sampling: Sampling,
    constraints: list[Constraint | None],
    closing: tuple | None = None,
    forcing: list = (),
):
    """Grammar first (it removes forbidden tokens), then ``forcing`` (the reasoning budget),
    then sampling. ``grammars`` gives the backend's grammar cache, or None when constraints
    are off; ``closing``: see ``RowGrammars`` (rows of a batch close an open value in the
    budget's last tokens)."""
    from transformers import LogitsProcessorList

    processors = LogitsProcessorList()
    if any(c is not None for c in constraints):
        cache_ = grammars()
        if cache_ is not None and len(constraints) == 1 and closing is None:
            processors.append(cache_.logits_processor(constraints[0]))
        elif cache_ is not None:
            compiled = [cache_.compile(c) if c is not None else None for c in constraints]
            processors.append(row_grammars_class()(compiled, closing))
    processors.extend(forcing)
    processors.extend(sampling_processors(sampling))
    return processors


def sampling_processors(sampling: Sampling) -> list:
    """Temperature, then top-k, then top-p, as one processor (none when greedy).

    transformers' top-p warper sorts the whole vocabulary of every row at every step,
    even after top-k has left 20 candidates. Here top-p runs on the top-k values only:
    in 4-row rehearsals on CPU sampling fell from 2.8% to 0.3% of the time
    (bench/ANALYSIS.md). It comes after the grammar, which removes forbidden tokens first."""
    if sampling.temperature <= 0:
        return []
    return [_warper_class()(sampling.temperature, sampling.top_k, sampling.top_p)]


@cache
def _warper_class():
    import torch
    from transformers import LogitsProcessor

    class Warper(LogitsProcessor):
        def __init__(self, temperature: float, top_k: int, top_p: float):
            self.temperature, self.top_k, self.top_p = temperature, top_k, top_p

        def __call__(self, input_ids, scores):
            scores = scores / self.temperature
            vocab = scores.shape[-1]
            k = self.top_k if 0 < self.top_k < vocab else vocab
            if k == vocab and self.top_p >= 1.0:
                return scores
            values, indices = torch.topk(scores, k, dim=-1)  # descending
            if self.top_p < 1.0:
                probs = values.softmax(dim=-1)
                before = probs.cumsum(dim=-1) - probs  # mass of the better candidates
                values = values.masked_fill(before > self.top_p, float("-inf"))  # the best one always stays
            return torch.full_like(scores, float("-inf")).scatter_(-1, indices, values)

    return Warper


def common_prefix(seqs: list[list[int]]) -> int:
    """Length of the longest common prefix of ``seqs``."""
    shortest = min(seqs, key=len)
    for i, token in enumerate(shortest):
        if any(seq[i] != token for seq in seqs):
            return i
    return len(shortest)


class RowStreamer:
    """A ``generate`` streamer for batches: calls ``on_token(row, text so far)``.

    transformers' own streamers accept one row only.
    """

    def __init__(self, tokenizer, rows: int, stop_ids: list[int], on_token: StreamCallback):
        self.tokenizer = tokenizer
        self.stop_ids = set(stop_ids)
        self.on_token = on_token
        self.ids: list[list[int]] = [[] for _ in range(rows)]
        self.texts = [""] * rows
        self.done = [False] * rows
        self.prompt_seen = False

    def put(self, value) -> None:
        if not self.prompt_seen:  # generate first pushes the prompt
            self.prompt_seen = True
            return
        for row, token in enumerate(value.reshape(-1).tolist()):
            if self.done[row]:
                continue
            if token in self.stop_ids:
                self.done[row] = True
                continue
            self.ids[row].append(token)
            text = self.tokenizer.decode(self.ids[row], skip_special_tokens=True)
            # A trailing U+FFFD is half a multi-byte character: wait for the rest.
            if text != self.texts[row] and not text.endswith("\ufffd"):
                self.texts[row] = text
                self.on_token(row, text)

    def end(self) -> None:
        pass


@contextmanager
def seeded(seed: int | None, device) -> Iterator[None]:
    """Seed torch inside a fork of its RNG (restored afterwards)."""
    if seed is None:
        yield
        return
    import torch

    devices = list(range(torch.cuda.device_count())) if getattr(device, "type", device) == "cuda" else []
    with _RNG_LOCK, torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


def shared_length(encoded: list[list[int]]) -> int:
    """How many leading tokens all rows share and can prefill once: their common prefix,
    short of each row's last token (a row's decoding starts from one token of its own)."""
    return max(0, min(common_prefix(encoded), min(len(ids) for ids in encoded) - 1))


def prefix_prefill(model, pad_id: int, encoded: list[list[int]], share: bool = True):
    """(cache, ids, attention mask) for a batch of prompts' token ids.

    Layout of row r: the common prefix, pads, then the rest of prompt r. The prefix's
    KV cache is computed once and repeated; ``generate`` prefills only the rests.
    Masked pads are skipped by the position ids (``generate`` derives them from the
    mask), so every row sees its own prompt at its own positions. At least one token
    per row is left to ``generate``: it needs one to start from. A single row is
    left whole to ``generate``, and so is every row when ``share`` is False (each row
    left-padded, its whole prompt prefilled)."""
    import torch

    rows = len(encoded)
    shared = shared_length(encoded) if share else 0
    rests = [ids[shared:] for ids in encoded]
    width = shared + max(len(rest) for rest in rests)
    ids = torch.full((rows, width), pad_id, dtype=torch.long)
    mask = torch.zeros((rows, width), dtype=torch.long)
    ids[:, :shared] = torch.tensor(encoded[0][:shared], dtype=torch.long)
    mask[:, :shared] = 1
    for r, rest in enumerate(rests):
        ids[r, width - len(rest) :] = torch.tensor(rest, dtype=torch.long)
        mask[r, width - len(rest) :] = 1
    ids, mask = ids.to(model.device), mask.to(model.device)
    if shared < 1 or rows == 1:
        return None, ids, mask
    cache = model(ids[:1, :shared], use_cache=True, logits_to_keep=1).cache
    if not hasattr(cache, "batch_repeat_interleave"):  # an engine without it: prefill whole rows
        return None, ids, mask
    cache.batch_repeat_interleave(rows)
    return cache, ids, mask


def finished(backend, ids: list[int], prompt_ids: list[int], max_new: int, seconds: float, cancelled: bool,
             probs: list[float] | None = None) -> Generation:
    """The Generation of a row of ``backend`` (a TransformersBackend) that sampled ``ids``:
    its text stops before the first stop token; "length" where none came, "cancelled"
    where a cancelled row was cut short. ``probs``: each id's probability, where the
    decoder reports them (kept with where each token ends in the text)."""
    stop = next((i for i, token in enumerate(ids) if token in backend.stop_ids), None)
    if stop is not None:
        kept, count, reason = ids[:stop], stop + 1, "stop"
    else:
        kept, count = ids, len(ids)
        reason = "cancelled" if cancelled and count < max_new else "length"
    decode = backend.tokenizer.decode
    text = decode(kept, skip_special_tokens=True)
    ends = [len(decode(kept[: k + 1], skip_special_tokens=True)) for k in range(len(kept))] if probs else []
    return Generation(
        text=text,
        new_tokens=count,
        prompt_tokens=len(prompt_ids),
        seconds=seconds,
        finish_reason=reason,
        prompt_ids=list(prompt_ids),
        token_ids=ids[:count],
        token_probs=list(probs[: len(kept)]) if probs else [],
        token_ends=ends,
    )
