"""``train/sft.py``'s frozen bottom: with LoRA on the last layers, a batch's states below
the adapter are computed once and later steps run only the adapted layers. Mechanics on a
tiny random Llama (4 layers, LoRA on the last 2): the same loss and the same gradients as
the whole model's forward, on the first step and after updates."""

from __future__ import annotations

import torch
from helpers import tiny_llama

from envace_demo.train.sft import FrozenBottom, SftBatch, attach_lora, target_loss, train_sft

PAD = 0


def _batch() -> SftBatch:
    shared = [5, 9, 14, 3, 22, 8, 17]  # a common prompt prefix, then rows of other lengths
    prompts = [shared + [30, 31, 32], shared + [40], shared + [41, 42, 43, 44, 45]]
    completions = [[50, 51, 2], [52, 2], [53, 54, 55, 2]]
    return SftBatch("rehearser", prompts, completions)


def _model(layers: int | None = 2):
    return attach_lora(tiny_llama(64, layers=4), rank=4, layers=layers)


def _grads(model) -> list[torch.Tensor]:
    return [p.grad.detach().clone() for p in model.parameters() if p.requires_grad]


def test_the_kept_bottom_gives_the_whole_models_loss_and_gradients():
    model, batch = _model(), _batch()
    bottom = FrozenBottom(model)
    assert bottom.start == 2  # LoRA on layers 2 and 3
    for step in range(3):  # the first step computes and keeps the bottom, the next ones reuse it
        model.zero_grad()
        whole, tokens = target_loss(model, batch.prompt_ids, batch.completion_ids, PAD)
        whole.backward()
        expected = _grads(model)
        model.zero_grad()
        kept, kept_tokens = bottom.target_loss(batch, PAD)
        kept.backward()
        assert kept_tokens == tokens == 9
        assert torch.allclose(kept, whole, atol=1e-5), (step, float(kept), float(whole))
        assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(_grads(model), expected))
        assert len(bottom.kept) == 1 and bottom.bytes > 0
        with torch.no_grad():  # an update changes the adapted layers only
            for p in model.parameters():
                if p.requires_grad:
                    p.add_(torch.randn_like(p) * 0.05)


def test_without_a_frozen_bottom_every_step_runs_the_whole_model():
    everywhere = _model(layers=None)  # LoRA from the first layer: nothing below it to keep
    assert FrozenBottom(everywhere).start is None
    assert FrozenBottom(torch.nn.Linear(2, 2)).start is None
    over_limit = FrozenBottom(_model(), limit_bytes=0)
    loss, _ = over_limit.target_loss(_batch(), PAD)
    assert torch.isfinite(loss) and over_limit.kept == {}  # computed, not kept


def test_training_with_the_kept_bottom_lowers_the_loss():
    model, batch = _model(), _batch()
    before = float(target_loss(model, batch.prompt_ids, batch.completion_ids, PAD)[0].detach())
    steps = list(train_sft(model, [batch], epochs=8, lr=1e-2, pad_id=PAD))
    after = float(target_loss(model, batch.prompt_ids, batch.completion_ids, PAD)[0].detach())
    assert len(steps) == 8 and after < before


def test_outcome_tokens_weigh_more_and_weights_of_one_change_nothing():
    from envace_demo.train.sft import token_weights
    from envace_demo.train.warmstart import decision_span

    refusal = '<think>\n</think>\n\n<execution_result>\n{"error": {"code": "NOT_FOUND", "message": "x"}}\n</execution_result>'
    success = '<think>\n</think>\n\n<execution_result>\n{"path": "/a", "created": true}\n</execution_result>'
    start, end = decision_span(refusal)
    assert refusal[start:end] == '{"error": {"code": "NOT_FOUND"'
    start, end = decision_span(success)
    assert success[start:end] == '{"path"'
    assert decision_span("no result here") is None
    start, end = decision_span(success)
    # A target that reasons from the facts decides at its thought's outcome word.
    reasoned = ('<think>\nACC-1005: active, balance 15.5; amount 40.0. Outcome: INSUFFICIENT_FUNDS.\n</think>\n\n'
                '<execution_result>\n{"error": {"code": "INSUFFICIENT_FUNDS", "message": "x"}}\n</execution_result>')
    said, decided = decision_span(reasoned)
    assert reasoned[said:decided] == "INSUFFICIENT_FUNDS"
    chars = lambda text: [ord(c) for c in text]  # noqa: E731  one token a character
    weights = token_weights(success, chars, 5.0)
    assert len(weights) == len(success) + 1  # and the stop token
    assert [i for i, w in enumerate(weights) if w == 5.0] == list(range(start, end))
    # Facts the engine states at run time may leave the loss: the grammar's "<think>\n" and
    # the facts weigh 0, the outcome word and the response keep theirs.
    weights = token_weights(reasoned, chars, 5.0, facts_weight=0.0)
    zero = [i for i, w in enumerate(weights) if w == 0.0]
    assert reasoned[zero[0]:zero[-1] + 1] == "ACC-1005: active, balance 15.5; amount 40.0. Outcome:"
    assert [i for i, w in enumerate(weights) if w == 5.0] == list(range(said, decided))
    assert token_weights(success, chars, 5.0, facts_weight=0.0) == token_weights(success, chars, 5.0)  # no facts
    model, batch = _model(), _batch()
    plain, _ = target_loss(model, batch.prompt_ids, batch.completion_ids, PAD)
    ones = [[1.0] * len(c) for c in batch.completion_ids]
    same, _ = target_loss(model, batch.prompt_ids, batch.completion_ids, PAD, ones)
    assert torch.allclose(plain, same)
    # All the weight on one token: the loss is that token's cross-entropy alone.
    only = [[0.0] * len(c) for c in batch.completion_ids]
    only[1][0] = 1.0
    first, _ = target_loss(model, batch.prompt_ids, batch.completion_ids, PAD, only)
    alone, _ = target_loss(model, [batch.prompt_ids[1]], [batch.completion_ids[1][:1]], PAD)
    assert torch.allclose(first, alone, atol=1e-5)
    bottom = FrozenBottom(model)
    weighted = SftBatch("rehearser", batch.prompt_ids, batch.completion_ids, only)
    assert torch.allclose(bottom.target_loss(weighted, PAD)[0], alone, atol=1e-5)
