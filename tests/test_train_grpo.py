"""The GRPO loss and the shared-prefix log-probs it is computed on (tiny random model)."""

from __future__ import annotations

import pytest
import torch

from envace_demo.train.grpo import grpo_loss, k3_kl, masked_mean
from envace_demo.train.logprobs import common_prefix, completion_logprobs

pytestmark = pytest.mark.usefixtures("one_thread")


def test_masked_mean_ignores_masked_values():
    values = torch.tensor([[1.0, 3.0, 100.0], [2.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    assert masked_mean(values, mask, dim=1).tolist() == [2.0, 2.0]
    assert masked_mean(values, mask).item() == pytest.approx(2.0)


def test_k3_is_zero_at_equality_and_positive_otherwise():
    logp = torch.log(torch.tensor([0.2, 0.5, 0.9]))
    assert torch.allclose(k3_kl(logp, logp), torch.zeros(3))
    assert (k3_kl(logp, torch.log(torch.tensor([0.3, 0.1, 0.8]))) > 0).all()


def test_on_policy_loss_is_minus_advantage_times_mean_logprob_gradient():
    """With pi_old = pi (one update per batch) the gradient is -A * mean_t grad log pi."""
    logp = torch.log(torch.tensor([[0.5, 0.25, 0.9], [0.1, 0.2, 0.3]])).requires_grad_()
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    adv = torch.tensor([2.0, -1.0])
    parts = grpo_loss(logp, logp.detach(), adv, mask)
    parts.per_row.sum().backward()
    expected = -adv.unsqueeze(1) * mask / mask.sum(1, keepdim=True)
    assert torch.allclose(logp.grad, expected)
    assert parts.per_row.tolist() == pytest.approx([-2.0, 1.0])  # ratio 1: loss = -A
    assert parts.clipped.tolist() == [0.0, 0.0]


def test_clip_stops_the_gradient_past_the_trust_region():
    old = torch.zeros(1, 2)
    logp = torch.tensor([[0.5, 0.0]]).requires_grad_()  # ratio e^0.5 ~ 1.65 on token 0, 1.0 on token 1
    parts = grpo_loss(logp, old, torch.tensor([1.0]), torch.ones(1, 2), clip_eps=0.2)
    parts.per_row.sum().backward()
    assert logp.grad[0, 0] == 0.0  # clipped: positive advantage, ratio above 1 + eps
    assert logp.grad[0, 1] != 0.0
    assert parts.clipped.item() == 0.5


def test_kl_term_needs_a_reference_and_adds_its_weight():
    logp = torch.log(torch.tensor([[0.5, 0.5]]))
    ref = torch.log(torch.tensor([[0.25, 0.5]]))
    mask = torch.ones(1, 2)
    with pytest.raises(ValueError, match="ref_logp"):
        grpo_loss(logp, logp, torch.zeros(1), mask, beta=0.1)
    parts = grpo_loss(logp, logp, torch.zeros(1), mask, beta=0.1, ref_logp=ref)
    kl = k3_kl(logp, ref).mean()
    assert parts.kl.item() == pytest.approx(kl.item())
    assert parts.per_row.item() == pytest.approx(0.1 * kl.item())


# ---- log-probs with a shared prefix ---------------------------------------------


@pytest.fixture(scope="module")
def tiny_lm():
    from helpers import tiny_llama

    return tiny_llama(64, hidden_size=32).eval()


def plain_logprobs(model, prompt: list[int], completion: list[int]) -> torch.Tensor:
    logits = model(torch.tensor([prompt + completion])).logits[0]
    positions = torch.arange(len(prompt) - 1, len(prompt) + len(completion) - 1)
    return torch.log_softmax(logits, -1)[positions, torch.tensor(completion)]


PROMPTS = [[1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6], [1, 2, 3, 9, 9], [1, 2, 3, 4, 5, 6, 7]]
COMPLETIONS = [[7, 8], [10, 11, 12], [13], [14, 15]]


def test_common_prefix():
    assert common_prefix(PROMPTS) == 3
    assert common_prefix([[1, 2], [1, 2]]) == 2
    assert common_prefix([[1], [2]]) == 0


@pytest.mark.parametrize("micro_batch", [1, 3, 8])
def test_shared_prefix_logprobs_equal_a_plain_forward(tiny_lm, micro_batch):
    seen = []
    with torch.no_grad():
        for batch in completion_logprobs(tiny_lm, PROMPTS, COMPLETIONS, micro_batch):
            for b, i in enumerate(batch.indices):
                n = len(COMPLETIONS[i])
                assert batch.mask[b].tolist() == [1.0] * n + [0.0] * (batch.mask.shape[1] - n)
                assert torch.allclose(
                    batch.logp[b, :n], plain_logprobs(tiny_lm, PROMPTS[i], COMPLETIONS[i]), atol=1e-5
                )
                seen.append(i)
    assert sorted(seen) == [0, 1, 2, 3]


def test_shared_prefix_gradients_equal_a_plain_forward(tiny_lm):
    params = list(tiny_lm.parameters())
    tiny_lm.zero_grad()
    for batch in completion_logprobs(tiny_lm, PROMPTS, COMPLETIONS, micro_batch=2):
        batch.logp.sum().backward(retain_graph=True)
    shared = [p.grad.clone() for p in params]
    tiny_lm.zero_grad()
    sum(plain_logprobs(tiny_lm, p, c).sum() for p, c in zip(PROMPTS, COMPLETIONS)).backward()
    for a, p in zip(shared, params):
        assert torch.allclose(a, p.grad, atol=1e-5)


def test_temperature_rescales_the_logits(tiny_lm):
    with torch.no_grad():
        (hot,) = completion_logprobs(tiny_lm, PROMPTS[:1], COMPLETIONS[:1], 4, temperature=2.0)
        logits = tiny_lm(torch.tensor([PROMPTS[0] + COMPLETIONS[0]])).logits[0] / 2.0
    expected = torch.log_softmax(logits, -1)[torch.tensor([5, 6]), torch.tensor(COMPLETIONS[0])]
    assert torch.allclose(hot.logp[0], expected, atol=1e-5)


def test_empty_completion_is_refused(tiny_lm):
    with pytest.raises(ValueError, match="non-empty completion"):
        list(completion_logprobs(tiny_lm, [[1, 2]], [[]], 1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_selective_log_softmax_equals_a_full_log_softmax(dtype):
    from envace_demo.train.logprobs import selective_log_softmax

    torch.manual_seed(0)
    logits = torch.randn(3, 5, 11).to(dtype)
    index = torch.randint(0, 11, (3, 5))
    full = torch.log_softmax(logits.float() / 0.7, -1).gather(-1, index.unsqueeze(-1)).squeeze(-1)
    assert torch.allclose(selective_log_softmax(logits, index, 0.7), full, atol=1e-5)
