"""Decode speed: tokens/s, its memory-bandwidth roofline, and the cost of constraints.

Per-token time is read from a clock placed in the logits-processor chain: it is
called once per decoding step, so the gaps between its calls are the step times
(forward pass + every processor + sampling), free of the prefill and of process
noise outside the loop. tokens/s = 1 / median step time.

Roofline: a batch-1 decoding step reads every weight once (tied embeddings count
once: the output projection reads the whole matrix, the input lookup one row), so
tokens/s can be at most ``bandwidth ÷ weight bytes``.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from envace_demo.models.base import Constraint


def weight_bytes(model) -> int:
    """Bytes of the distinct parameter tensors (shared storage counted once)."""
    seen: dict[int, int] = {}
    for param in model.parameters():
        seen.setdefault(param.data_ptr(), param.numel() * param.element_size())
    return sum(seen.values())


def roofline_tok_s(bandwidth_gbs: float, bytes_per_token: int) -> float:
    """The most tokens/s a memory-bound decoder can reach."""
    if bandwidth_gbs <= 0 or bytes_per_token <= 0:
        raise ValueError(f"roofline: bandwidth ({bandwidth_gbs}) and bytes ({bytes_per_token}) must be positive")
    return bandwidth_gbs * 1e9 / bytes_per_token


def roofline_fraction(tok_s: float, bandwidth_gbs: float, bytes_per_token: int) -> float:
    return tok_s / roofline_tok_s(bandwidth_gbs, bytes_per_token)


@dataclass
class DecodeRun:
    tokens: int  # new tokens decoded
    step_s: float  # median seconds per decoding step (after the first)
    mean_step_s: float

    @property
    def tok_s(self) -> float:
        return 1.0 / self.step_s


def _clock_class():
    from transformers import LogitsProcessor

    class StepClock(LogitsProcessor):
        """Records when each decoding step reaches the logits processors."""

        def __init__(self) -> None:
            self.times: list[float] = []

        def __call__(self, input_ids, scores):
            self.times.append(time.perf_counter())
            return scores

    return StepClock


def decode_once(backend, prompt: str, max_new_tokens: int, constraint: Constraint | None = None,
                min_new_tokens: int = 0) -> DecodeRun:
    """One greedy batch-1 generation of ``prompt`` through the backend's model (and its
    KV cache and grammar processor), timed per step.

    ``constraint``: decoded under the backend's grammar (as ``generate`` would).
    ``min_new_tokens``: forbid stopping earlier (unconstrained runs only: a grammar
    may allow nothing but the stop token)."""
    import torch
    from transformers import GenerationConfig, LogitsProcessorList

    ids = backend.tokenizer(prompt, return_tensors="pt", add_special_tokens=False).input_ids.to(backend.model.device)
    processors = LogitsProcessorList()
    if constraint is not None:
        processors.append(backend._grammar_cache().logits_processor(constraint))
    clock = _clock_class()()
    processors.append(clock)  # last: the step includes every other processor's work
    config = GenerationConfig(
        max_new_tokens=max_new_tokens,
        min_new_tokens=min_new_tokens or None,
        do_sample=False,
        eos_token_id=backend.stop_ids,
        pad_token_id=backend.pad_id,
        temperature=1.0,
        top_p=1.0,
        top_k=50,
    )
    with torch.inference_mode():
        out = backend.model.generate(
            ids, attention_mask=torch.ones_like(ids), generation_config=config, logits_processor=processors
        )
    gaps = [b - a for a, b in zip(clock.times, clock.times[1:])]
    if not gaps:
        raise RuntimeError(f"decode: only {len(clock.times)} step(s) decoded; raise max_new_tokens")
    return DecodeRun(tokens=out.shape[1] - ids.shape[1], step_s=statistics.median(gaps), mean_step_s=statistics.fmean(gaps))


def decode_tok_s(backend, prompt: str, tokens: int, repeats: int) -> list[DecodeRun]:
    """``repeats`` unconstrained runs of exactly ``tokens`` new tokens."""
    decode_once(backend, prompt, 4, min_new_tokens=4)  # warm-up (allocations, lazy imports)
    return [decode_once(backend, prompt, tokens, min_new_tokens=tokens) for _ in range(repeats)]


def constrained_ratio(backend, prompt: str, constraint: Constraint, tokens: int, repeats: int) -> dict:
    """Paired runs, constrained then unconstrained for as many tokens; the median of the
    pairs' tok/s ratios (pairing cancels slow drifts of a shared machine)."""
    decode_once(backend, prompt, 8, constraint)  # compiles the grammar: not a decoding cost
    ratios, with_c, without = [], [], []
    for _ in range(repeats):
        c = decode_once(backend, prompt, tokens, constraint)
        u = decode_once(backend, prompt, c.tokens, min_new_tokens=c.tokens)
        ratios.append(c.tok_s / u.tok_s)
        with_c.append(c.tok_s)
        without.append(u.tok_s)
    return {
        "ratio": statistics.median(ratios),
        "constrained_tok_s": statistics.median(with_c),
        "unconstrained_tok_s": statistics.median(without),
        "tokens": c.tokens,
        "repeats": repeats,
    }
