"""The growing key/value cache (models/kv.py) against transformers' DynamicCache, on a tiny
random Llama (mechanics only: the values are random)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from envace_demo.models.kv import SPARE, growing_cache  # noqa: E402


@pytest.fixture(scope="module")
def model():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024)
    return LlamaForCausalLM(config).eval()


def _greedy(model, cache, prompt, steps):
    """Logits of each greedy step after ``prompt``, decoding one token a pass."""
    out = model(prompt, cache=cache, use_cache=True)
    logits = [out.logits[:, -1]]
    for _ in range(steps):
        token = logits[-1].argmax(-1, keepdim=True)
        out = model(token, cache=out.cache, use_cache=True)
        logits.append(out.logits[:, -1])
    return torch.cat(logits), out.cache


def test_it_decodes_what_a_dynamic_cache_decodes_past_its_spare_room(model):
    from transformers import DynamicCache

    prompt = torch.randint(0, 97, (1, SPARE - 3))  # the buffer regrows a few steps in
    with torch.inference_mode():
        expected, _ = _greedy(model, DynamicCache(), prompt, 12)
        got, cache = _greedy(model, growing_cache(), prompt, 12)
    assert torch.equal(expected, got)
    layer = cache.layers[0]
    assert cache.get_seq_length() == SPARE - 3 + 12 and layer._keys.shape[-2] > SPARE


def test_a_cropped_cache_goes_on_as_a_fresh_one_from_the_kept_part(model):
    """The row decoder's kept prefixes: crop back to a shared head, then a new continuation
    overwrites what was cropped."""
    from transformers import DynamicCache

    head, first, second = (torch.randint(0, 97, (1, n)) for n in (40, 9, 6))
    with torch.inference_mode():
        cache = model(torch.cat([head, first], 1), cache=growing_cache(), use_cache=True).cache
        cache.crop(-first.shape[1])
        assert cache.get_seq_length() == 40
        got = model(second, cache=cache, use_cache=True).logits
        expected = model(torch.cat([head, second], 1), cache=DynamicCache(), use_cache=True).logits[:, -6:]
    assert torch.allclose(got, expected, atol=1e-5)


def test_rows_repeated_from_one_cache_decode_each_on_its_own(model):
    prompt = torch.randint(0, 97, (1, 20))
    with torch.inference_mode():
        cache = model(prompt, cache=growing_cache(), use_cache=True).cache
        cache.batch_repeat_interleave(2)
        tokens = torch.tensor([[5], [7]])
        got = model(tokens, cache=cache, use_cache=True).logits[:, -1]
        alone = [model(torch.cat([prompt, t[None]], 1), use_cache=False).logits[:, -1] for t in tokens]
    assert torch.allclose(got, torch.cat(alone), atol=1e-5)
    assert cache.get_seq_length() == 21
