"""The policy being trained, served through the demo's own transformers backend.

Two additions over ``TransformersBackend``, both for training:

- prefix reuse: every actor prompt of one schema starts with the same system turn
  (all tool schemas, ~1k tokens), every rehearser prompt with the same system
  message and candidate tools. The key/value cache of the longest prompt prefix
  seen before is reused and only the rest is computed. The weights change at each
  optimizer step, so the trainer calls ``forget()`` after each one.
- exact token ids: ``last_token_ids`` holds the ids each row of the last
  ``generate`` or ``generate_many`` sampled (through its stop token), so training
  scores the very tokens the grammar let through, not a re-tokenization.

Both hook private methods of ``TransformersBackend`` (``_shared_prefill``,
``_finish``); ``tests/test_train_trainer.py`` pins their behaviour.
"""

from __future__ import annotations

from envace_demo.models.transformers_backend import TransformersBackend
from envace_demo.train.logprobs import common_prefix

MAX_PREFIXES = 4  # actor, rehearser, and the committed actor's memory prompt fit


class PolicyBackend(TransformersBackend):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._prefixes: list[tuple[list[int], list]] = []  # (ids, [(keys, values) per layer]), newest last
        self._rows: list[list[int]] = []
        self.last_token_ids: list[list[int]] = []

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

    def generate(self, *args, **kwargs):
        self._rows = []
        gens = super().generate(*args, **kwargs)
        rows = self._rows
        # Greedy decoding runs one row and copies it n times.
        self.last_token_ids = [rows[min(i, len(rows) - 1)] for i in range(len(gens))] if rows else []
        return gens

    def generate_many(self, *args, **kwargs):
        self._rows = []
        gens = super().generate_many(*args, **kwargs)
        rows = self._rows
        self.last_token_ids = rows if len(rows) == len(gens) else []
        return gens

    def _finish(self, ids, prompt_len, max_new, seconds, cancelled):
        gen = super()._finish(ids, prompt_len, max_new, seconds, cancelled)
        self._rows.append(list(ids[: gen.new_tokens]))
        return gen

    def _shared_prefill(self, input_ids, rows: int):
        from transformers import DynamicCache

        ids = input_ids[0, :-1].tolist()
        if len(ids) < 1:
            return super()._shared_prefill(input_ids, rows)
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
        return cache, input_ids.expand(rows, -1).contiguous()
