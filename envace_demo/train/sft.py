"""Supervised warm start: cross-entropy on the target tokens only, LoRA weights only.

Rows (``warmstart.SftRow``) are tokenized as the backend tokenizes prompts
(``add_special_tokens=False``); the target gets the end-of-turn token, so the model
learns where to stop. Rows are grouped by role and prompt so that each micro-batch
shares a long prompt prefix (the tool schemas, the rehearser's instruction). That
prefix runs once per micro-batch, without gradient: the adapter learns from the rest of
each prompt and the target (on CPU the prefix's backward would cost more than all the
rest). Only the target positions go through the output layer. One AdamW step per
micro-batch; the loss is the mean over the batch's target tokens.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from envace_demo.train.warmstart import SftRow

USER_TURN = "<|im_start|>user"
LORA_TARGETS_SFT = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@dataclass
class SftBatch:
    role: str
    prompt_ids: list[list[int]]
    completion_ids: list[list[int]]


@dataclass
class SftStep:
    """One optimizer step's figures (a row of ``sft_metrics.jsonl``)."""

    step: int
    total: int
    epoch: int
    role: str
    loss: float
    tokens: int
    seconds: float

    def to_dict(self) -> dict:
        return {"stage": "sft", "step": self.step, "epoch": self.epoch, f"loss/{self.role}": round(self.loss, 4),
                "role": self.role, "tokens": self.tokens, "seconds": round(self.seconds, 2)}


def attach_lora(model, rank: int, layers: int | None = None, targets: list[str] | None = None):
    """``model`` with a fresh trainable LoRA adapter (alpha = 2r, no dropout), in eval mode
    (no dropout anywhere: training log-probs equal those sampled)."""
    from peft import LoraConfig, get_peft_model

    n = model.config.get_text_config().num_hidden_layers
    lora = LoraConfig(
        r=rank,
        lora_alpha=2 * rank,
        lora_dropout=0.0,
        target_modules=targets or LORA_TARGETS_SFT,
        layers_to_transform=list(range(max(0, n - layers), n)) if layers else None,
        bias="none",
    )
    return get_peft_model(model, lora).eval()


def batches(
    rows: list[SftRow], tokenize: Callable[[str], list[int]], stop_id: int, micro_batch: int, seed: int
) -> list[SftBatch]:
    """Micro-batches of one role and one system turn each (the actor's tools, with or
    without a rehearsal memory; the rehearser's instruction), rows of similar prompts
    together, in shuffled order."""
    groups: dict[tuple[str, str], list[SftRow]] = {}
    for row in rows:
        system = row.prompt.split(USER_TURN, 1)[0]
        groups.setdefault((row.role, system), []).append(row)
    out: list[SftBatch] = []
    for key in sorted(groups):
        mine = sorted(groups[key], key=lambda r: r.prompt)
        for start in range(0, len(mine), micro_batch):
            chunk = mine[start : start + micro_batch]
            out.append(
                SftBatch(
                    key[0],
                    [tokenize(r.prompt) for r in chunk],
                    [tokenize(r.completion) + [stop_id] for r in chunk],
                )
            )
    random.Random(seed).shuffle(out)
    return out


def epoch_plan(batches_: list[SftBatch], epochs: int, role_epochs: dict[str, int] | None = None) -> list[list[SftBatch]]:
    """The batches of each epoch: a role in ``role_epochs`` takes part in that many epochs
    (the first ones), the others in ``epochs``."""
    role_epochs = role_epochs or {}
    count = max([epochs, *role_epochs.values()])
    return [[b for b in batches_ if e < role_epochs.get(b.role, epochs)] for e in range(count)]


def bf16_autocast_available() -> bool:
    """Whether this CPU computes bfloat16 natively (AVX-512 BF16 or AMX): there a training
    step under autocast took 0.6-0.8 of its float32 time on the embedded model."""
    import torch

    try:
        return bool(torch.backends.cpu.get_cpu_capability() in ("AVX512_BF16", "AMX") or
                    torch.cpu._is_avx512_bf16_supported())  # noqa: SLF001
    except (AttributeError, RuntimeError):
        return False


def train_sft(
    model,
    batches_: list[SftBatch],
    *,
    epochs: int,
    lr: float,
    pad_id: int,
    max_grad_norm: float = 1.0,
    seed: int = 0,
    stop: threading.Event | None = None,
    seconds: float | None = None,
    role_epochs: dict[str, int] | None = None,
    final_lr: float = 1.0,
    autocast: bool = False,
) -> Iterator[SftStep]:
    """Train the trainable (LoRA) weights of ``model`` on ``batches_``; one ``SftStep`` per
    optimizer step. ``seconds``: no step starts after that long (a time-boxed warm start).
    ``role_epochs``: epochs of a role that differs from ``epochs`` (see :func:`epoch_plan`).
    ``final_lr``: the learning rate falls linearly to ``lr * final_lr`` at the last step.
    ``autocast``: compute in bfloat16 (the LoRA weights and optimizer stay float32)."""
    import contextlib

    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    plan = epoch_plan(batches_, epochs, role_epochs)
    total = sum(len(e) for e in plan)
    order = random.Random(seed)
    step = 0
    deadline = None if seconds is None else time.monotonic() + seconds
    for epoch, mine in enumerate(plan, start=1):
        for batch in order.sample(mine, len(mine)):
            if (stop is not None and stop.is_set()) or (deadline is not None and time.monotonic() > deadline):
                return
            t0 = time.monotonic()
            for group in optimizer.param_groups:
                group["lr"] = lr * (1.0 - (1.0 - final_lr) * step / max(total - 1, 1))
            optimizer.zero_grad(set_to_none=True)
            ctx = torch.autocast("cpu", dtype=torch.bfloat16) if autocast else contextlib.nullcontext()
            with ctx:
                loss, tokens = target_loss(model, batch.prompt_ids, batch.completion_ids, pad_id)
            loss.backward()
            if max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
            optimizer.step()
            step += 1
            yield SftStep(step, total, epoch, batch.role, float(loss.detach()), int(tokens), time.monotonic() - t0)


def target_loss(model, prompts: list[list[int]], completions: list[list[int]], pad_id: int):
    """(mean cross-entropy of ``completions`` given ``prompts``, number of target tokens);
    the rows' common prompt prefix runs once, without gradient."""
    import torch
    from transformers import DynamicCache

    from envace_demo.train.logprobs import common_prefix

    lm = model.get_base_model() if hasattr(model, "get_base_model") else model
    device = next(model.parameters()).device
    rows = len(prompts)
    shared = min(common_prefix(prompts), min(len(p) for p in prompts) - 1)
    cache = None
    if shared > 0:
        with torch.no_grad():
            out = lm.model(input_ids=torch.tensor([prompts[0][:shared]], device=device), use_cache=True)
        layers = [(layer.keys, layer.values) for layer in out.cache.layers]
        cache = DynamicCache(ddp_cache_data=[(k.expand(rows, -1, -1, -1), v.expand(rows, -1, -1, -1)) for k, v in layers])
    suffixes = [p[shared:] + c for p, c in zip(prompts, completions)]
    width = max(len(s) for s in suffixes)
    input_ids = torch.full((rows, width), pad_id, dtype=torch.long, device=device)
    attention = torch.zeros((rows, shared + width), dtype=torch.long, device=device)
    attention[:, :shared] = 1
    positions, targets, batch_index = [], [], []
    for b, (prompt, completion, suffix) in enumerate(zip(prompts, completions, suffixes)):
        input_ids[b, : len(suffix)] = torch.tensor(suffix, device=device)
        attention[b, shared : shared + len(suffix)] = 1
        start = len(prompt) - shared  # where the target starts in the suffix
        positions += range(start - 1, start - 1 + len(completion))
        targets += completion
        batch_index += [b] * len(completion)
    hidden = lm.model(input_ids=input_ids, attention_mask=attention, cache=cache, use_cache=cache is not None)
    picked = hidden.last_hidden_state[torch.tensor(batch_index), torch.tensor(positions)]  # (N, H)
    logits = lm.lm_head(picked).float()
    loss = torch.nn.functional.cross_entropy(logits, torch.tensor(targets, device=device))
    return loss, len(targets)
