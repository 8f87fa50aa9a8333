"""Supervised warm start: cross-entropy on the target tokens only, LoRA weights only.

Rows (``warmstart.SftRow``) are tokenized as the backend tokenizes prompts
(``add_special_tokens=False``); the target gets the end-of-turn token, so the model
learns where to stop. Rows are grouped by role and prompt so that each micro-batch
shares a long prompt prefix (the tool schemas, the rehearser's instruction). That
prefix runs once per micro-batch, without gradient: the adapter learns from the rest of
each prompt and the target (on CPU the prefix's backward would cost more than all the
rest). Only the target positions go through the output layer. One AdamW step per
micro-batch; the loss is the mean over the batch's target tokens.

With LoRA on the last layers only (the recipe's 8 of 30), the layers below the adapter
compute the same hidden states in every epoch: ``FrozenBottom`` keeps each batch's
states where the adapter starts, from its first step on, and later epochs run only the
adapted layers (about half a step's time; the same loss, tested).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from envace_demo.train.warmstart import SftRow

USER_TURN = "<|im_start|>user"
LORA_TARGETS_SFT = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@dataclass
class SftBatch:
    role: str
    prompt_ids: list[list[int]]
    completion_ids: list[list[int]]
    # Per target token, its weight in the loss (None: all 1): see ``batches``.
    weights: list[list[float]] | None = None


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


def token_weights(
    completion: str, tokenize: Callable[[str], list[int]], weight: float, facts_weight: float = 1.0
) -> list[float]:
    """Weights of ``completion``'s tokens (and the stop token after them): ``weight`` on
    the tokens of a rehearser target's outcome (``warmstart.decision_span``), 1 elsewhere.
    Success or which refusal is one or two tokens among some sixty, and the one a
    rehearsal is judged on first; weighted, it is not drowned by the values that follow.
    ``facts_weight`` on a reasoning target's deciding facts, before its outcome word: 0
    where the engine states them at run time (``EpisodeConfig.state_facts``), so the loss
    is the step from the facts to the outcome and the response."""
    from envace_demo.certainty import OUTCOME_SAID
    from envace_demo.train.warmstart import decision_span

    count = len(tokenize(completion)) + 1
    out = [1.0] * count
    span = decision_span(completion)
    if span is not None and weight != 1.0:
        first, last = len(tokenize(completion[: span[0]])), len(tokenize(completion[: span[1]]))
        for i in range(first, min(last, count)):
            out[i] = weight
    if span is not None and facts_weight != 1.0 and completion[: span[0]].endswith(OUTCOME_SAID):
        # The "<think>\n" the grammar writes and the facts, whole tokens only: the token that
        # ends the lead may carry the outcome's first characters.
        start = len(tokenize(EMPTY_OPEN)) if completion.startswith(EMPTY_OPEN) else 0
        for i in range(start, min(len(tokenize(completion[: span[0]])) - 1, count)):
            out[i] = facts_weight
    return out


EMPTY_OPEN = "<think>\n"


def batches(
    rows: list[SftRow], tokenize: Callable[[str], list[int]], stop_id: int, micro_batch: int, seed: int,
    outcome_weight: float = 1.0, facts_weight: float = 1.0,
) -> list[SftBatch]:
    """Micro-batches of one role and one system turn each (the actor's tools, with or
    without a rehearsal memory; the rehearser's instruction), rows of similar prompts
    together, in shuffled order. ``outcome_weight``, ``facts_weight``: the weights of a
    rehearser target's outcome tokens and of its deciding facts in the loss (``token_weights``)."""
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
                    [token_weights(r.completion, tokenize, outcome_weight, facts_weight) for r in chunk]
                    if key[0] == "rehearser" and (outcome_weight, facts_weight) != (1.0, 1.0) else None,
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
                    torch.cpu._is_avx512_bf16_supported())
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
    bottom = FrozenBottom(model, store_dtype=torch.bfloat16 if autocast else None)
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
                loss, tokens = bottom.target_loss(batch, pad_id)
            loss.backward()
            if max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
            optimizer.step()
            step += 1
            yield SftStep(step, total, epoch, batch.role, float(loss.detach()), int(tokens), time.monotonic() - t0)


def target_loss(model, prompts: list[list[int]], completions: list[list[int]], pad_id: int, weights=None):
    """(mean cross-entropy of ``completions`` given ``prompts``, weighted by ``weights``
    per target token where given; number of target tokens); the rows' common prompt
    prefix runs once, without gradient."""
    import torch
    from transformers import DynamicCache

    lm = _causal_lm(model)
    layout = _Layout.of(prompts, completions, pad_id, next(model.parameters()).device, weights)
    rows, shared = len(prompts), layout.shared
    cache = None
    if shared > 0:
        with torch.no_grad():
            out = lm.model(input_ids=layout.prefix_ids, use_cache=True)
        layers = [(layer.keys, layer.values) for layer in out.cache.layers]
        cache = DynamicCache(ddp_cache_data=[(k.expand(rows, -1, -1, -1), v.expand(rows, -1, -1, -1)) for k, v in layers])
    hidden = lm.model(input_ids=layout.input_ids, attention_mask=layout.attention, cache=cache,
                      use_cache=cache is not None).last_hidden_state
    return layout.loss(lm, hidden)


def _causal_lm(model):
    return model.get_base_model() if hasattr(model, "get_base_model") else model


@dataclass(frozen=True)
class _Layout:
    """A micro-batch as the model reads it: the shared prefix, the rows' suffixes padded
    on the right, and where each target token is predicted."""

    prefix_ids: Any  # (1, shared) token ids, or None without a shared prefix
    input_ids: Any  # (rows, width)
    attention: Any  # (rows, shared + width)
    positions: Any
    targets: Any
    batch_index: Any
    shared: int
    weights: Any = None  # (N,) per target token, or None: the plain mean

    @classmethod
    def of(cls, prompts: list[list[int]], completions: list[list[int]], pad_id: int, device, weights=None) -> _Layout:
        import torch

        from envace_demo.train.logprobs import common_prefix

        rows = len(prompts)
        shared = min(common_prefix(prompts), min(len(p) for p in prompts) - 1)
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
        prefix_ids = torch.tensor([prompts[0][:shared]], device=device) if shared > 0 else None
        flat = None
        if weights is not None:
            flat = torch.tensor([w for row in weights for w in row], device=device)
            if flat.numel() != len(targets):
                raise ValueError(f"{flat.numel()} token weights for {len(targets)} target tokens")
        return cls(prefix_ids, input_ids, attention, torch.tensor(positions), torch.tensor(targets, device=device),
                   torch.tensor(batch_index), shared, flat)

    def loss(self, lm, hidden):
        import torch

        picked = hidden[self.batch_index, self.positions]  # (N, H): only the target positions
        logits = lm.lm_head(picked).float()
        if self.weights is None:
            return torch.nn.functional.cross_entropy(logits, self.targets), len(self.targets)
        each = torch.nn.functional.cross_entropy(logits, self.targets, reduction="none")
        return (each * self.weights).sum() / self.weights.sum(), len(self.targets)


class _Reached(Exception):
    """Raised by the hook at the first adapted layer: the frozen pass is complete."""


class FrozenBottom:
    """The hidden states entering the first adapted layer, kept per micro-batch.

    Where every trainable weight lies in the decoder layers from ``start`` on (LoRA on
    the last layers), the layers below see no change while training: a batch's states
    at ``start`` (its prefix's and its rows') are computed once, on its first step, by
    the model's own forward stopped at that layer, and kept (in ``store_dtype``, up to
    ``limit_bytes``). Every later step runs only the layers from ``start``: the prefix
    without gradient, then the rows. Where that does not hold (trainable embeddings, a
    model not made of ``model.layers``), every step runs the whole model."""

    def __init__(self, model, store_dtype=None, limit_bytes: int = 3 << 30):
        self.model, self.store_dtype, self.limit_bytes = model, store_dtype, limit_bytes
        self.lm = _causal_lm(model)
        self.start = self._first_adapted_layer()
        self.kept: dict[int, tuple] = {}
        self.bytes = 0

    def _first_adapted_layer(self) -> int | None:
        inner = getattr(self.lm, "model", None)
        layers = getattr(inner, "layers", None)
        if layers is None or not all(hasattr(inner, a) for a in ("rotary_emb", "norm", "config")):
            return None
        if any(t != "full_attention" for t in getattr(inner.config, "layer_types", None) or []):
            return None  # sliding windows: the masks below assume full attention
        in_layers = {id(p) for layer in layers for p in layer.parameters()}
        trainable = [p for p in self.model.parameters() if p.requires_grad]
        if not trainable or any(id(p) not in in_layers for p in trainable):
            return None
        start = min(i for i, layer in enumerate(layers) if any(p.requires_grad for p in layer.parameters()))
        return start or None

    def target_loss(self, batch, pad_id: int):
        """The loss of ``batch`` (an ``SftBatch``), as :func:`target_loss` computes it."""
        if self.start is None:
            return target_loss(self.model, batch.prompt_ids, batch.completion_ids, pad_id, batch.weights)
        layout = _Layout.of(batch.prompt_ids, batch.completion_ids, pad_id, next(self.model.parameters()).device,
                            batch.weights)
        kept = self.kept.get(id(batch))
        if kept is None:
            kept = self._bottom(layout)
            size = sum(t.numel() * t.element_size() for t in kept if t is not None)
            if self.bytes + size <= self.limit_bytes:
                self.kept[id(batch)], self.bytes = kept, self.bytes + size
        prefix, rows = (None if t is None else t.to(self.lm.dtype) for t in kept)
        return layout.loss(self.lm, self._top(layout, prefix, rows))

    def _hidden_at_start(self, **forward) -> object:
        captured = {}

        def stop(module, args, kwargs):
            captured["hidden"] = args[0] if args else kwargs["hidden_states"]
            raise _Reached

        handle = self.lm.model.layers[self.start].register_forward_pre_hook(stop, with_kwargs=True)
        try:
            self.lm.model(**forward)
        except _Reached:
            pass
        finally:
            handle.remove()
        return captured["hidden"]

    def _bottom(self, layout: _Layout) -> tuple:
        import torch
        from transformers import DynamicCache

        rows = layout.input_ids.shape[0]
        with torch.no_grad():
            prefix, cache = None, None
            if layout.shared > 0:
                below = DynamicCache(config=self.lm.model.config)
                prefix = self._hidden_at_start(input_ids=layout.prefix_ids, cache=below, use_cache=True)
                cache = DynamicCache(ddp_cache_data=[
                    (layer.keys.expand(rows, -1, -1, -1), layer.values.expand(rows, -1, -1, -1))
                    for layer in below.layers[: self.start]
                ])
            hidden = self._hidden_at_start(input_ids=layout.input_ids, attention_mask=layout.attention, cache=cache,
                                           use_cache=cache is not None)
        if self.store_dtype is not None:
            prefix = None if prefix is None else prefix.to(self.store_dtype)
            hidden = hidden.to(self.store_dtype)
        return prefix, hidden

    def _layers_from_start(self, hidden, position_ids, attention, cache):
        from transformers.masking_utils import create_causal_mask

        inner = self.lm.model
        mask = create_causal_mask(config=inner.config, inputs_embeds=hidden, attention_mask=attention, cache=cache,
                                  position_ids=position_ids)
        embeddings = inner.rotary_emb(hidden, position_ids=position_ids)
        for layer in inner.layers[self.start : inner.config.num_hidden_layers]:
            hidden = layer(hidden, attention_mask=mask, position_embeddings=embeddings, position_ids=position_ids,
                           cache=cache, use_cache=cache is not None)
        return inner.norm(hidden)

    def _top(self, layout: _Layout, prefix, rows):
        import torch
        from transformers import DynamicCache

        n, width, device = rows.shape[0], rows.shape[1], rows.device
        cache = None
        if prefix is not None:
            mine = DynamicCache(config=self.lm.model.config)
            with torch.no_grad():
                self._layers_from_start(prefix, torch.arange(layout.shared, device=device)[None], None, mine)
            # The layers below the adapter never run again: placeholders of the prefix's
            # length keep the cache's length (positions, mask sizes) right.
            top = mine.layers[self.start]
            hole = torch.zeros_like(top.keys[:1]).expand(n, -1, -1, -1)
            cache = DynamicCache(ddp_cache_data=[
                (hole, hole) if i < self.start else
                (layer.keys.expand(n, -1, -1, -1), layer.values.expand(n, -1, -1, -1))
                for i, layer in enumerate(mine.layers)
            ])
        positions = (torch.arange(width, device=device) + layout.shared)[None]
        return self._layers_from_start(rows, positions, layout.attention, cache)
