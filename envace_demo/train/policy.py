"""The policy being trained, served through the demo's own transformers backend.

One addition over ``TransformersBackend``, for training: prefix reuse. Every actor
prompt of one schema starts with the same system turn (all tool schemas, ~1k tokens),
every rehearser prompt with the same system message and candidate tools. When a batch
decodes one prompt (alone or repeated), the key/value cache of the longest prefix seen
before is reused and only the rest is computed. The weights change at each optimizer
step, so the trainer calls ``forget()`` after each one.

It hooks the backend's prefill (``_prefill``); ``tests/test_train_trainer.py`` pins
its behaviour. The sampled token ids come back on each ``Generation`` (``token_ids``).
"""

from __future__ import annotations

from envace_demo.models.transformers_backend import TransformersBackend
from envace_demo.train.logprobs import common_prefix

MAX_PREFIXES = 4  # actor, rehearser, and the committed actor's memory prompt fit


class PolicyBackend(TransformersBackend):
    # Training learns from the model's own tokenization of every token: no jump-forward.
    row_decoder = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._prefixes: list[tuple[list[int], list]] = []  # (ids, [(keys, values) per layer]), newest last

    @classmethod
    def like(cls, served: TransformersBackend, model, model_id: str) -> PolicyBackend:
        """A policy over ``model`` that decodes under the same bounds as ``served``
        (constraints, reasoning length, calls per turn)."""
        policy = cls(
            model,
            served.tokenizer,
            model_id=model_id,
            quantization=served.quantization,
            constrained=served.supports_constraints,
            max_think_chars=served.max_think_chars,
            max_calls=served.max_calls,
        )
        policy.requires_first_call = served.requires_first_call
        return policy

    def forget(self) -> None:
        """Drop cached prefixes (call after the weights change)."""
        self._prefixes.clear()

    def _prefill(self, encoded: list[list[int]]):
        import torch
        from transformers import DynamicCache

        rows = len(encoded)
        ids = encoded[0][:-1]
        if len(ids) < 1 or any(other != encoded[0] for other in encoded[1:]):
            return super()._prefill(encoded)
        input_ids = torch.tensor([encoded[0]], dtype=torch.long, device=self.model.device)
        best, reuse = None, 0
        for entry in self._prefixes:
            n = common_prefix([entry[0], ids])
            if n > reuse:
                best, reuse = entry, n
        # Slices are views; DynamicCache grows by concatenation, so stored tensors stay intact.
        data = [(k[:, :, :reuse], v[:, :, :reuse]) for k, v in best[1]] if best else None
        cache = DynamicCache(ddp_cache_data=data) if data else None
        if reuse < len(ids):
            cache = self.model(input_ids[:, reuse:-1], cache=cache, use_cache=True, logits_to_keep=1).cache
        if best is not None:
            self._prefixes.remove(best)
        self._prefixes.append((ids, [(layer.keys, layer.values) for layer in cache.layers]))
        del self._prefixes[:-MAX_PREFIXES]
        if rows > 1:
            cache.batch_repeat_interleave(rows)
        batch = input_ids.expand(rows, -1).contiguous()
        return cache, batch, torch.ones_like(batch)
