"""One optimizer step of the GRPO loss over a batch of rollout rows, role by role."""

from __future__ import annotations

from envace_demo.train.config import TrainConfig
from envace_demo.train.rollout import ROLES, Row


class PolicyUpdate:
    """The LoRA weights' optimizer and the loss over rows (own tokens only).

    ``step`` may be called several times on one batch: the first call keeps each row's
    log-probs as pi_old, so later calls are clipped against the policy that sampled.
    """

    def __init__(self, model, policy, accelerator, config: TrainConfig, pad_id: int):
        import torch

        self.model, self.policy, self.accelerator = model, policy, accelerator
        self.config, self.pad_id = config, pad_id
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(self.params, lr=config.lr, weight_decay=0.0)

    def step(self, rows: list[Row]) -> dict:
        """One optimizer step on the GRPO loss of ``rows``; per-role loss statistics."""
        import torch

        from envace_demo.train.grpo import grpo_loss
        from envace_demo.train.logprobs import completion_logprobs

        cfg, acc = self.config, self.accelerator
        total = acc.reduce(torch.tensor(float(len(rows)), device=acc.device), reduction="sum").item()
        self.optimizer.zero_grad(set_to_none=True)
        stats: dict[str, dict[str, list[float]]] = {
            role: {"loss": [], "kl": [], "clipped": []} for role in ROLES
        }
        for role in ROLES:
            # A zero advantage and no KL term give a zero gradient: skip the compute.
            chosen = [r for r in rows if r.role == role and (r.advantage != 0.0 or cfg.beta > 0)]
            if not chosen:
                continue
            prompts = [r.prompt_ids for r in chosen]
            completions = [r.completion_ids for r in chosen]
            refs = self._reference(prompts, completions) if cfg.beta > 0 else None
            for batch in completion_logprobs(
                self.model, prompts, completions, cfg.micro_batch, self.pad_id, cfg.temperature
            ):
                advantages = torch.tensor(
                    [chosen[i].advantage for i in batch.indices], device=batch.logp.device
                )
                ref = None
                if refs is not None:
                    ref = torch.nn.utils.rnn.pad_sequence([refs[i] for i in batch.indices], batch_first=True)
                kept = [chosen[i].old_logp for i in batch.indices]
                if kept[0] is None:  # the batch's first update: these are the weights that sampled
                    old = batch.logp.detach()
                    if cfg.updates_per_batch > 1:
                        for b, i in enumerate(batch.indices):
                            chosen[i].old_logp = old[b, : len(chosen[i].completion_ids)]
                else:
                    old = torch.nn.utils.rnn.pad_sequence(kept, batch_first=True)
                parts = grpo_loss(batch.logp, old, advantages, batch.mask, cfg.clip_eps, cfg.beta, ref)
                acc.backward(parts.per_row.sum() / max(total, 1.0), retain_graph=True)
                stats[role]["loss"] += parts.per_row.detach().tolist()
                stats[role]["kl"] += parts.kl.tolist()
                stats[role]["clipped"] += parts.clipped.tolist()
        if acc.num_processes > 1:
            for p in self.params:  # sum the processes' shares of the mean over all rows
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
                p.grad = acc.reduce(p.grad, reduction="sum")
        grads = [p.grad for p in self.params if p.grad is not None]
        norm = 0.0
        if grads:
            if cfg.max_grad_norm > 0:
                norm = float(torch.nn.utils.clip_grad_norm_(self.params, cfg.max_grad_norm))
            else:
                norm = float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads])))
            self.optimizer.step()
            self.policy.forget()  # cached prompt prefixes belong to the old weights
        return {"stats": stats, "grad_norm": norm}

    def _reference(self, prompts: list[list[int]], completions: list[list[int]]) -> list:
        """Log-probs under the base model (adapter off), for the KL term."""
        with self.model.disable_adapter():
            return self._logprobs(prompts, completions)

    def _logprobs(self, prompts: list[list[int]], completions: list[list[int]]) -> list:
        import torch

        from envace_demo.train.logprobs import completion_logprobs

        out: list = [None] * len(prompts)
        with torch.no_grad():
            for batch in completion_logprobs(
                self.model,
                prompts,
                completions,
                self.config.micro_batch,
                self.pad_id,
                self.config.temperature,
            ):
                for b, i in enumerate(batch.indices):
                    out[i] = batch.logp[b, : len(completions[i])]
        return out
