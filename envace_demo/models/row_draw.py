"""Drawing one row's next tokens from the model's scores: the grammar's mask, values closed
near the budget, the backend's sampler, then what the grammar forces. Shared by the row
decoder (scores from the model) and sibling replay (scores an earlier row recorded)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from envace_demo.errors import ModelError
from envace_demo.models.closing import CLOSING_TOKENS, close_scores


@dataclass
class RowDraw:
    """One row's state while it draws: what it drew and how sure the model was of each id.

    ``matcher``: an xgrammar GrammarMatcher (None: free text); ``processors``: logits
    processors run after the grammar mask (none: greedy); ``tags``: texts the tokenizer has
    one special token for (``decode``: ids to text); ``closers``: the ids that close a value,
    preferred in the last ``closing`` tokens while a call or a result is open, and in a
    string once it holds ``string_chars`` characters."""

    prompt_ids: list[int]
    max_new_tokens: int
    stop_ids: list[int]
    processors: list
    matcher: object = None
    tags: tuple[str, ...] = ()
    decode: Callable[[list[int]], str] | None = None
    closers: object = None
    closing: int = CLOSING_TOKENS
    string_chars: int | None = None
    out: list[int] = field(default_factory=list)
    # Each id's probability under the model and the grammar (the masked scores before
    # temperature and top-k/p): 1.0 for a token the grammar forced.
    probs: list[float] = field(default_factory=list)
    bitmask: object = None

    @property
    def full(self) -> bool:
        return len(self.out) >= self.max_new_tokens

    def draw(self, logits) -> list[int] | None:
        """Draw the next id from the model's ``logits`` (1 × vocabulary, float; changed in
        place), then take what the grammar forces after it: the new ids, or None where a
        stop id ended the row."""
        scores = logits
        if self.matcher is not None:
            self.bitmask = _mask(scores, self.matcher, self.bitmask)
            ending = self.max_new_tokens - len(self.out) <= self.closing
            if self.closers is not None and self.decode is not None and (ending or self.string_chars is not None):
                scores = close_scores(scores, self.closers, self.decode(self.out), ending, self.string_chars)
        dist = scores[0].softmax(dim=-1)  # before a processor changes the scores in place
        token = _pick(scores, self.processors, self.prompt_ids, self.out)
        if self.matcher is not None and not self.matcher.accept_token(token):
            raise ModelError(f"constrained decoding: sampled token {token} its grammar forbids")
        self.out.append(token)
        self.probs.append(float(dist[token]))
        if token in self.stop_ids:
            return None
        forced = self._forced() if self.matcher is not None else []
        self.out.extend(forced)
        self.probs.extend([1.0] * len(forced))
        return [token, *forced]

    def _forced(self) -> list[int]:
        """The ids the grammar forces next (as many as the budget holds), accepted."""
        forced = self.matcher.find_jump_forward_tokens()[: self.max_new_tokens - len(self.out)]
        forced = _before_tags(forced, self.decode, self.tags) if self.tags and forced else forced
        for forced_token in forced:
            self.matcher.accept_token(forced_token)
        return forced


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
