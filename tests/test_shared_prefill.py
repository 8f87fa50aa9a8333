"""One prefill for N rows: rows that share a prompt prefix (the N rehearsals of a step)
prefill it once and decode from its key/value cache, in the row decoder and in the
batched ``model.generate`` path, with the same tokens as rows that prefill their whole
prompt (``TransformersBackend.share_prefill`` off)."""

from __future__ import annotations

import pytest
from helpers import tiny_backend_over

from envace_demo.models.base import Prompt, Sampling

SAMPLED = Sampling(temperature=1.0, top_p=0.9, top_k=20, max_new_tokens=10, seed=11)
TOOL = {"type": "function", "function": {"name": "get_balance", "description": "Balance of an account.",
                                         "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}}


@pytest.fixture(scope="module")
def tokenizer(cache_dir):
    from transformers import AutoTokenizer

    from envace_demo.models import embedded

    return AutoTokenizer.from_pretrained(embedded.ensure_embedded_model(cache_dir))


@pytest.fixture
def tiny(tokenizer):
    return tiny_backend_over(tokenizer, hidden_size=32, heads=2, kv_heads=1, max_position_embeddings=4096)


def _rehearsals(backend, n: int, differ: bool = False) -> list[Prompt]:
    """``n`` rehearser-like prompts: one prompt n times, or n that differ only at the end."""
    return [
        backend.prompt([{"role": "system", "content": "Predict the tool's result."},
                        {"role": "user", "content": f"Call get_balance with id ACC-{i if differ else 0}."}],
                       tools=[TOOL], thinking=False)
        for i in range(n)
    ]


def _passes(backend, monkeypatch) -> list[tuple[int, int]]:
    """Records the (rows, tokens) of every forward pass of ``backend``'s model."""
    shapes = []
    real = backend.model.forward

    def forward(*args, **kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        shapes.append(tuple(ids.shape))
        return real(*args, **kwargs)

    monkeypatch.setattr(backend.model, "forward", forward)
    return shapes


def _both(backend, prompts, sampling=SAMPLED):
    """(token ids with shared prefill, token ids with each row prefilled whole)."""
    backend.row_prefixes.clear()
    shared = [g.token_ids for g in backend.generate_many(prompts, sampling)]
    backend.share_prefill = False
    backend.row_prefixes.clear()
    try:
        whole = [g.token_ids for g in backend.generate_many(prompts, sampling)]
    finally:
        backend.share_prefill = True
    return shared, whole


@pytest.mark.parametrize("row_decoder", [True, False], ids=["row-decoder", "batched"])
@pytest.mark.parametrize("differ", [False, True], ids=["one-prompt", "shared-head"])
def test_shared_prefill_gives_the_tokens_of_whole_prefills(tiny, row_decoder, differ):
    tiny.row_decoder = row_decoder
    prompts = _rehearsals(tiny, 3, differ)
    shared, whole = _both(tiny, prompts)
    assert shared == whole
    assert len({tuple(ids) for ids in shared}) > 1  # each row its own seed


@pytest.mark.parametrize("row_decoder", [True, False], ids=["row-decoder", "batched"])
def test_the_shared_prefix_goes_through_the_model_once(tiny, monkeypatch, row_decoder):
    tiny.row_decoder = row_decoder
    tiny.replay_siblings = False  # one prompt three times: replayed, rows 2 and 3 would make no pass at all
    prompts = _rehearsals(tiny, 3)
    length = len(tiny.tokenizer(prompts[0].text, add_special_tokens=False).input_ids)
    greedy = Sampling(temperature=0, max_new_tokens=3)
    tiny.row_prefixes.clear()
    shapes = _passes(tiny, monkeypatch)
    tiny.generate_many(prompts, greedy)
    assert [s for s in shapes if s[1] > 1] == [(1, length - 1)]  # the prefix, one row, once
    shapes.clear()
    tiny.share_prefill = False
    tiny.row_prefixes.clear()
    tiny.generate_many(prompts, greedy)
    tiny.share_prefill = True
    whole = [(1, length)] * 3 if row_decoder else [(3, length)]
    assert [s for s in shapes if s[1] > 1] == whole


def test_the_last_rows_cache_is_kept_for_the_next_call(tiny):
    tiny.row_decoder = True
    tiny.row_prefixes.clear()
    prompts = _rehearsals(tiny, 2, differ=True)
    tiny.generate_many(prompts, SAMPLED)
    tiny.generate(prompts[1], SAMPLED)
    length = len(tiny.tokenizer(prompts[1].text, add_special_tokens=False).input_ids)
    assert tiny.row_stats.reused_tokens == length - 1  # all of the prompt but the token that starts it


@pytest.mark.slow
@pytest.mark.parametrize("rows", [2, 5], ids=["row-decoder", "batched"])  # CPU_ROWS = 4
def test_the_embedded_model_decodes_shared_rows_as_whole_ones(embedded_base_backend, rows):
    sampling = Sampling(temperature=0.7, top_p=0.95, top_k=20, max_new_tokens=8, seed=3)
    shared, whole = _both(embedded_base_backend, _rehearsals(embedded_base_backend, rows, differ=True), sampling)
    assert shared == whole
