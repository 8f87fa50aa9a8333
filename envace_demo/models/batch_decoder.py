"""Rows decoded together in one ``model.generate`` (TransformersBackend's batched path).

The rows' common prompt prefix is prefilled once and its key/value cache repeated for
every row (``decoding.prefix_prefill``). With ``compile_decode`` the cache is a static
one whose length is rounded up to a multiple of ``BUCKET`` and the decoding step is
compiled (transformers' own ``compile_config``; its prefill stays eager): shapes repeat
from call to call, so a step compiled once serves every later call of the same batch
size and bucket.
"""

from __future__ import annotations

import threading
import time

from envace_demo.models.base import Constraint, Generation, Sampling, StreamCallback
from envace_demo.models.closing import closer_tensors
from envace_demo.models.decoding import RowStreamer, cancel_criteria_class, finished, logits_processors, seeded
from envace_demo.models.loops import loop_guard

# A static cache holds the prompt and the new tokens, rounded up to a multiple of this:
# a compiled step is specialized to its cache's length, so lengths come in few sizes.
BUCKET = 256


def decode_batch(
    backend,
    encoded: list[list[int]],
    sampling: Sampling,
    constraints: list[Constraint | None],
    on_token: StreamCallback | None,
    cancel: threading.Event | None,
    started: float,
) -> list[Generation]:
    """Generations of ``encoded`` (the rows' prompt ids) in one ``model.generate`` of
    ``backend`` (its lock held by the caller); ``started``: when the call began."""
    import torch
    from transformers import StoppingCriteriaList

    model = backend.model
    criteria = StoppingCriteriaList([cancel_criteria_class()(cancel)] if cancel is not None else [])
    streamer = RowStreamer(backend.tokenizer, len(encoded), backend.stop_ids, on_token) if on_token else None
    with torch.inference_mode(), seeded(sampling.seed, model.device):
        cache, ids, mask = backend._prefill(encoded)  # (rows, width) ids and mask
        if backend.compile_decode:
            cache = static_cache(model, cache, len(encoded), ids.shape[1] + sampling.max_new_tokens)
        output = model.generate(
            ids,
            attention_mask=mask,
            cache=cache,
            generation_config=generation_config(backend, sampling),
            logits_processor=logits_processors(
                backend._grammar_cache,
                sampling,
                constraints,
                closing(backend, sampling, ids.shape[1], constraints),
                backend.thinking_budget(sampling, [row[-4:] for row in encoded]) + loop_guard(backend),
            ),
            stopping_criteria=criteria,
            streamer=streamer,
        )
    seconds = time.perf_counter() - started
    cancelled = cancel is not None and cancel.is_set()
    return [
        finished(backend, row, encoded[r], sampling.max_new_tokens, seconds, cancelled)
        for r, row in enumerate(output[:, ids.shape[1] :].tolist())
    ]


def static_cache(model, prefix, rows: int, length: int):
    """A static cache of ``rows`` rows for ``length`` tokens (rounded up to ``BUCKET``),
    holding ``prefix``'s keys and values (a dynamic cache of the shared prompt prefix, one
    row or ``rows`` rows) where there is one."""
    from transformers import StaticCache

    bucket = -(-length // BUCKET) * BUCKET
    cache = StaticCache(config=model.config, max_cache_len=bucket)
    if prefix is not None:
        for index, layer in enumerate(prefix.layers):
            keys, values = layer.keys, layer.values  # (1 or rows, kv heads, prefix, head dim)
            cache.update(keys.expand(rows, -1, -1, -1), values.expand(rows, -1, -1, -1), index)
    return cache


def generation_config(backend, sampling: Sampling):
    """The ``GenerationConfig`` of a call: neutral values, since temperature, top-k and top-p
    are applied by ``sampling_processors`` (unset ones would be filled from the model's
    generation config). top_k=0 turns transformers' own top-k off when sampling; greedy
    gets its default, 50, which draws no "flag ignored" warning. With ``compile_decode``,
    the decoding step is compiled (on a CPU too, where the caller opted in)."""
    from transformers import GenerationConfig

    greedy = sampling.temperature <= 0
    compiled = compile_config(backend.model.device.type, backend.compile_backend) if backend.compile_decode else None
    return GenerationConfig(
        max_new_tokens=sampling.max_new_tokens,
        do_sample=not greedy,
        eos_token_id=backend.stop_ids,
        pad_token_id=backend.pad_id,
        temperature=1.0,
        top_p=1.0,
        top_k=50 if greedy else 0,
        compile_config=compiled,
    )


def compile_config(device_type: str, backend="inductor"):
    """transformers' ``CompileConfig`` of the decoding step: static shapes (the cache's
    bucket fixes them); on CUDA with CUDA graphs. transformers compiles on CUDA only unless
    told otherwise: a caller that asks for it on a CPU is told (``_compile_all_devices``)."""
    from transformers import CompileConfig

    cuda = device_type == "cuda"
    config = CompileConfig(fullgraph=False, dynamic=False, backend=backend, mode="reduce-overhead" if cuda else "default")
    config._compile_all_devices = not cuda
    return config


def closing(backend, sampling: Sampling, width: int, constraints: list[Constraint | None]) -> tuple | None:
    """What a batch's grammars need to close an open value in the budget's last tokens, and
    a string at each row's bound (``decoding.RowGrammars``); None without constraints or closers."""
    if not any(c is not None for c in constraints) or backend._grammar_cache() is None:
        return None
    closers = closer_tensors(backend.closing_ids(), backend.model.device)
    if closers is None:
        return None
    grammars = backend._grammar_cache()
    strings = [grammars.string_chars(c) if c is not None else None for c in constraints]
    return closers, sampling.max_new_tokens, width, backend.tokenizer.decode, strings
