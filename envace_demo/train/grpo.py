"""The GRPO objective, as in the paper (method doc §4) and DeepSeekMath's GRPO.

For a row (one generation) with tokens o_1..o_T and advantage A:

    ratio_t = pi(o_t | ...) / pi_old(o_t | ...)
    L_t     = -min(ratio_t * A, clip(ratio_t, 1 - eps, 1 + eps) * A) + beta * KL_t
    L_row   = mean over the row's own generated tokens of L_t   (prompt, history: masked)
    L       = mean over rows

KL_t is the k3 estimator of KL(pi || pi_ref), always >= 0 and unbiased
(http://joschu.net/blog/kl-approx.html): r = pi_ref / pi, KL_t = r - log r - 1.

pi_old is the policy that sampled the rollouts. With one optimizer step per batch
(the paper's reference run, and the trainer's default) pi_old is the policy itself,
ratio = 1 and the gradient is exactly A * grad log pi; with ``updates_per_batch`` > 1
the trainer keeps the rollout's log-probs as pi_old and the clip bounds the later steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def masked_mean(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean of ``values`` where ``mask`` is 1 (over ``dim``, or everything)."""
    if dim is None:
        return (values * mask).sum() / mask.sum().clamp(min=1)
    return (values * mask).sum(dim) / mask.sum(dim).clamp(min=1)


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(pi || pi_ref) from log-probs of sampled tokens."""
    log_ratio = ref_logp - logp
    return torch.exp(log_ratio) - log_ratio - 1


@dataclass
class LossParts:
    per_row: torch.Tensor  # (B,) loss of each row, with its graph
    kl: torch.Tensor  # (B,) mean KL of each row (detached; zeros when beta = 0)
    clipped: torch.Tensor  # (B,) fraction of the row's tokens whose ratio was clipped (detached)


def grpo_loss(
    logp: torch.Tensor,  # (B, T) log pi of the generated tokens
    old_logp: torch.Tensor,  # (B, T) log pi_old, detached
    advantages: torch.Tensor,  # (B,)
    mask: torch.Tensor,  # (B, T) 1 on the row's own generated tokens
    clip_eps: float = 0.2,
    beta: float = 0.0,
    ref_logp: torch.Tensor | None = None,  # (B, T), required when beta > 0
) -> LossParts:
    ratio = torch.exp(logp - old_logp)  # (B, T)
    adv = advantages.unsqueeze(1)  # (B, 1)
    surr1 = ratio * adv
    surr2 = torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * adv
    per_token = -torch.min(surr1, surr2)  # (B, T)
    kl = torch.zeros_like(per_token)
    if beta > 0:
        if ref_logp is None:
            raise ValueError("grpo_loss: beta > 0 needs ref_logp")
        kl = k3_kl(logp, ref_logp)
        per_token = per_token + beta * kl
    clipped = ((surr2 < surr1) & (mask > 0)).float()
    return LossParts(
        per_row=masked_mean(per_token, mask, dim=1),
        kl=masked_mean(kl, mask, dim=1).detach(),
        clipped=masked_mean(clipped, mask, dim=1).detach(),
    )
