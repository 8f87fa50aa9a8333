"""A reasoning budget: once a row has thought for its budget of tokens, the engine closes
the thought itself, the way Qwen3's documentation describes a thinking budget (an
early-stop sentence, then ``</think>``), and the answer keeps its own tokens.

A plain token limit would cut the thought instead, and the turn would end with no call or
no result at all (a rehearsal cut inside ``<think>`` cannot be parsed).
"""

from __future__ import annotations

from functools import cache

# Qwen3's documentation (the "thinking budget" example of its deployment guides) closes an
# over-long thought with this sentence.
EARLY_STOP = "\n\nConsidering the limited time by the user, I have to give the solution based on the thinking directly now.\n</think>\n\n"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
# Tokens looked back at to see whether a row closed its thought (the tag may take several).
_TAIL = 8


def answer_tokens(max_new_tokens: int, think_tokens: int | None, closing_tokens: int) -> int:
    """Tokens left for the answer after a thought that used its whole budget."""
    return max_new_tokens - (think_tokens or 0) - closing_tokens


def budget_processors(tokenizer, think_tokens: int | None, prompt_tails: list[list[int]]) -> list:
    """The reasoning budget's processor (a list of one), or none without a budget;
    ``prompt_tails``: each row's last prompt ids (a template may open the thought there)."""
    if think_tokens is None:
        return []
    closing = tokenizer.encode(EARLY_STOP, add_special_tokens=False)
    opened = all(tokenizer.decode(ids).rstrip().endswith(THINK_OPEN) for ids in prompt_tails)
    return [thinking_budget_class()(think_tokens, closing, tokenizer.decode, opened)]


@cache
def thinking_budget_class():
    import torch
    from transformers import LogitsProcessor

    class ThinkingBudget(LogitsProcessor):
        """Forces ``EARLY_STOP``'s tokens on a row that has thought ``budget`` new tokens
        without closing its thought. A row that did not open one (in its first tokens, or
        in the prompt: ``opened``) is left alone; so is a token the grammar forbids (its
        score is already -inf): the grammar's own bound holds there.

        Rows' generated ids are ``input_ids[:, prompt_length:]``, the prompt length being
        the width of the first call's ids (transformers passes the whole sequence)."""

        forcing = True  # sets scores, samples nothing (the row decoder stays greedy without a sampler)

        def __init__(self, budget: int, closing_ids: list[int], decode, opened: bool = False):
            self.budget, self.closing_ids, self.decode, self.opened = budget, list(closing_ids), decode, opened
            self.prompt_length: int | None = None
            self.done: set[int] = set()  # rows whose thought is closed (or never opened)
            self.forced: dict[int, int] = {}  # row -> closing tokens forced so far
            self.scanned: dict[int, int] = {}  # row -> new tokens already searched for the tag

        def __call__(self, input_ids, scores):
            if self.prompt_length is None:
                self.prompt_length = input_ids.shape[1]
            for row in range(input_ids.shape[0]):
                if row in self.done:
                    continue
                new = input_ids[row, self.prompt_length :].tolist()
                at = self.forced.get(row)
                if at is None:  # not forcing yet
                    if self._thought_over(row, new):
                        self.done.add(row)
                        continue
                    if len(new) < self.budget:
                        continue
                    at = 0
                if at >= len(self.closing_ids):
                    self.done.add(row)
                    continue
                token = self.closing_ids[at]
                if not torch.isfinite(scores[row, token]):
                    self.done.add(row)  # the grammar forbids it: its own bound ends the thought
                    continue
                self.forced[row] = at + 1
                kept = scores[row, token].clone()
                scores[row, :] = float("-inf")
                scores[row, token] = kept
            return scores

        def _thought_over(self, row: int, new: list[int]) -> bool:
            """Whether ``row`` closed its thought, or answers without one (judged once, on its
            first tokens). Only the tokens not searched yet are decoded."""
            if not new:
                return False
            if not self.opened and row not in self.scanned:
                head = self.decode(new[:_TAIL]).lstrip()
                if len(head) < len(THINK_OPEN):
                    return False  # too early to tell
                if not head.startswith(THINK_OPEN):
                    return True
            start = max(0, self.scanned.get(row, 0) - _TAIL)
            self.scanned[row] = len(new)
            return THINK_CLOSE in self.decode(new[start:])

    return ThinkingBudget
