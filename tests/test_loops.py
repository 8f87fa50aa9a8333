"""``models/loops.py``: a phrase written twice in a row is not started a third time."""

from __future__ import annotations

import torch

from envace_demo.models.loops import loop_guard_class, looping_token


def test_the_token_that_would_start_a_third_copy():
    shelf = [7]
    assert looping_token([1, 2] + shelf * 2) == 7  # "shelf shelf" -> not "shelf" again
    phrase = [11, 12, 13]  # "no such directory:" twice
    assert looping_token([5] + phrase * 2) == 11
    assert looping_token([1, 2, 3, 4]) is None
    assert looping_token([1, 2, 1, 3]) is None
    assert looping_token([9] + [4, 5] * 2, max_period=1) is None  # longer phrases than the period pass
    digits = frozenset({0, 1})  # "1000": the tokenizer writes digits one by one
    assert looping_token([1, 0, 0], letterless=digits) is None


def test_letterless_tokens_of_the_embedded_tokenizer(embedded_backend):
    from envace_demo.models.loops import letterless_tokens

    tok = embedded_backend.tokenizer
    letterless = letterless_tokens(tok)
    for text in ("1000.00", '"}, {"', "  "):
        assert all(i in letterless for i in tok(text, add_special_tokens=False).input_ids), text
    assert not any(i in letterless for i in tok(" shelf", add_special_tokens=False).input_ids)


def test_the_guard_removes_it_per_row_and_keeps_a_grammars_only_token():
    guard = loop_guard_class()(frozenset({8}))
    ids = torch.tensor([[3, 4, 7, 7], [1, 2, 8, 8], [8, 8, 5, 5]])
    scores = torch.zeros(3, 10)
    scores[2] = float("-inf")
    scores[2, 5] = 0.0  # the grammar allows token 5 alone
    out = guard(ids, scores.clone())
    assert out[0, 7] == float("-inf") and torch.isfinite(out[0]).sum() == 9
    assert torch.isfinite(out[1]).all()  # a letterless "loop": untouched
    assert out[2, 5] == 0.0  # the only way on stays
