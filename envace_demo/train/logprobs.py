"""Log-probabilities of generated tokens, with the shared prompt prefix computed once.

Rows of one role share most of their prompt: the actor's system turn carries every
tool schema, the rehearser's system message and candidate tools are the same for
each call. On CPU that prefix (~1k tokens) costs far more than the completions, so
it runs once per batch and its key/value cache is broadcast to every row; autograd
flows through the broadcast, so gradients are exact (the prefix's own activations
get the summed gradient of all rows).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch


@dataclass
class TokenLogprobs:
    indices: list[int]  # which input rows, in order
    logp: torch.Tensor  # (B, T) log pi(token) of each generated token
    mask: torch.Tensor  # (B, T) 1 on real generated tokens, 0 on padding


def common_prefix(seqs: list[list[int]]) -> int:
    if not seqs:
        return 0
    first, length = seqs[0], min(len(s) for s in seqs)
    for seq in seqs[1:]:
        i = 0
        while i < length and seq[i] == first[i]:
            i += 1
        length = i
    return length


def completion_logprobs(
    model,
    prompts: list[list[int]],
    completions: list[list[int]],
    micro_batch: int,
    pad_id: int = 0,
    temperature: float = 1.0,
) -> Iterator[TokenLogprobs]:
    """Yield the log-probs of ``completions`` given ``prompts``, ``micro_batch`` rows at a time,
    under the softmax at ``temperature`` (the one the rollouts sampled from).

    Under ``torch.no_grad`` it is a plain evaluation; with gradients on, each yielded
    batch keeps its graph (and the shared prefix's), so the caller may call
    ``backward(retain_graph=True)`` per batch.
    """
    from transformers import DynamicCache

    if len(prompts) != len(completions) or any(not c for c in completions):
        raise ValueError("completion_logprobs: one non-empty completion per prompt")
    device = next(model.parameters()).device
    # Every row keeps at least its last prompt token: it predicts the first generated one.
    shared = min(common_prefix(prompts), min(len(p) for p in prompts) - 1)
    prefix: list[tuple[torch.Tensor, torch.Tensor]] = []
    if shared > 0:
        ids = torch.tensor([prompts[0][:shared]], device=device)
        out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
        prefix = [(layer.keys, layer.values) for layer in out.cache.layers]

    for start in range(0, len(prompts), micro_batch):
        idx = list(range(start, min(len(prompts), start + micro_batch)))
        rows = len(idx)
        suffixes = [prompts[i][shared:] + completions[i] for i in idx]
        offsets = [len(prompts[i]) - shared for i in idx]  # where each completion starts in its suffix
        lengths = [len(completions[i]) for i in idx]
        width = max(len(s) for s in suffixes)
        input_ids = torch.full((rows, width), pad_id, dtype=torch.long, device=device)  # (B, S)
        attention = torch.zeros((rows, shared + width), dtype=torch.long, device=device)  # (B, P + S)
        attention[:, :shared] = 1
        for b, suffix in enumerate(suffixes):
            input_ids[b, : len(suffix)] = torch.tensor(suffix, device=device)
            attention[b, shared : shared + len(suffix)] = 1
        cache = None
        if prefix:
            cache = DynamicCache(
                ddp_cache_data=[(k.expand(rows, -1, -1, -1), v.expand(rows, -1, -1, -1)) for k, v in prefix]
            )
        # Token j of a completion at offset s is predicted by the logits at suffix position s - 1 + j.
        lo = min(offsets) - 1
        hi = max(s + n for s, n in zip(offsets, lengths)) - 1
        out = model(
            input_ids=input_ids,
            attention_mask=attention,
            cache=cache,
            use_cache=cache is not None,
            logits_to_keep=torch.arange(lo, hi, device=device),
        )
        logits = out.logits  # (B, hi - lo, V)
        steps = max(lengths)
        positions = torch.zeros((rows, steps), dtype=torch.long, device=device)
        targets = torch.zeros((rows, steps), dtype=torch.long, device=device)
        mask = torch.zeros((rows, steps), dtype=torch.float32, device=device)
        for b, i in enumerate(idx):
            n = lengths[b]
            positions[b, :n] = torch.arange(offsets[b] - 1 - lo, offsets[b] - 1 - lo + n, device=device)
            targets[b, :n] = torch.tensor(completions[i], device=device)
            mask[b, :n] = 1
        picked = logits[torch.arange(rows, device=device).unsqueeze(1), positions]  # (B, T, V)
        logp = selective_log_softmax(picked, targets, temperature)  # (B, T)
        yield TokenLogprobs(indices=idx, logp=logp * mask, mask=mask)


def selective_log_softmax(logits: torch.Tensor, index: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """log softmax(logits / temperature)[index], one row at a time: with a 151k vocabulary a
    full (B, T, V) float32 log-softmax is gigabytes; a row's (T, V) is the most held at once."""
    out = []
    for row, ids in zip(logits, index):  # (T, V), (T,)
        scaled = row.float() / temperature
        out.append(scaled.gather(-1, ids.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(scaled, dim=-1))
    return torch.stack(out)
