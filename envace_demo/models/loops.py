"""A guard against a small model's loops: no phrase a third time in a row.

The embedded 135M model, sampling an answer, sometimes falls into a loop ("is on shelf
shelf shelf shelf ...", "no such directory: no such directory: ...") and writes it until
its token budget ends: the answer is lost and the episode pays for every token. Once the
last ``2n`` tokens are one ``n``-token phrase twice (``n`` up to ``MAX_PERIOD``), the
token that would start it a third time is removed. Copying from the prompt is untouched
(only what was just written counts), a phrase without a letter is never a loop (the
embedded tokenizer writes numbers digit by digit: ``1000`` is ``1 0 0 0``; JSON's
punctuation repeats by nature), and a grammar's only allowed token is never removed.
"""

from __future__ import annotations

from functools import cache

MAX_PERIOD = 8


def looping_token(tail: list[int], max_period: int = MAX_PERIOD, letterless: frozenset[int] = frozenset()) -> int | None:
    """The token that would start a third copy of the phrase ``tail`` ends with twice,
    or None (the shortest such phrase: ``a a`` before ``a b a b``); a phrase made only of
    ``letterless`` tokens (digits, punctuation, spaces) does not count."""
    for n in range(1, max_period + 1):
        if len(tail) >= 2 * n and tail[-2 * n : -n] == tail[-n:]:
            if all(t in letterless for t in tail[-n:]):
                continue
            return tail[-n]
    return None


def letterless_tokens(tokenizer) -> frozenset[int]:
    """The ids of ``tokenizer``'s tokens whose text has no letter."""
    vocab = tokenizer.get_vocab()
    ids = list(vocab.values())
    texts = tokenizer.batch_decode([[i] for i in ids])
    return frozenset(i for i, text in zip(ids, texts) if not any(c.isalpha() for c in text))


@cache
def loop_guard_class():
    import torch
    from transformers import LogitsProcessor

    class LoopGuard(LogitsProcessor):
        """Per row, removes ``looping_token`` of its last tokens (after the grammar)."""

        # Like the reasoning budget's forcing, it leaves a greedy generation greedy
        # (``row_draw._pick``): it removes a token, it does not sample.
        forcing = True

        def __init__(self, letterless: frozenset[int] = frozenset(), max_period: int = MAX_PERIOD):
            self.letterless, self.max_period = letterless, max_period

        def __call__(self, input_ids, scores):
            window = 2 * self.max_period
            for row, ids in enumerate(input_ids[:, -window:].tolist()):
                token = looping_token(ids, self.max_period, self.letterless)
                if token is None or not torch.isfinite(scores[row, token]):
                    continue
                allowed = torch.isfinite(scores[row])
                if int(allowed.sum()) > 1:  # never the grammar's only way on
                    scores[row, token] = float("-inf")
            return scores

    return LoopGuard


def loop_guard(backend) -> list:
    """``[LoopGuard]`` for ``backend``'s tokenizer (its letterless tokens found once)."""
    letterless = getattr(backend, "_letterless", None)
    if letterless is None:
        letterless = backend._letterless = letterless_tokens(backend.tokenizer)
    return [loop_guard_class()(letterless)]
