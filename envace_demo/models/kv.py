"""A key/value cache that appends a token without copying the ones before it.

transformers' ``DynamicCache`` grows by ``torch.cat``: every decoding step copies each
layer's whole cache. On a CPU that copy was a fifth of a decoding pass of the embedded
model at 1,100 cached tokens (15 of 64 ms, torch's profiler: ``aten::cat``) and more at a
rehearser prompt's 2,400. Here each layer writes into a buffer with room to spare and
hands attention a view of the part in use; the buffer grows by ``SPARE`` tokens at a time.
Cropping (the row decoder's kept prefixes, ``row_decoder.PrefixCache``) only shortens the
view, and the next token overwrites what was cropped, so a cache serves one row at a time.
"""

from __future__ import annotations

from functools import cache

# Room a buffer keeps past what it holds: a regrowth (one copy) every this many tokens.
SPARE = 256


@cache
def growing_layer_class():
    """Defined on first use: importing transformers' cache code takes a while."""
    import torch
    from transformers.cache_utils import DynamicLayer

    class GrowingLayer(DynamicLayer):
        """A ``DynamicLayer`` whose ``keys`` and ``values`` are views of larger buffers."""

        def lazy_initialization(self, key_states, value_states) -> None:
            super().lazy_initialization(key_states, value_states)
            self._keys = self._values = None
            self._length = 0

        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            end = self._length + key_states.shape[-2]
            if self._keys is None or end > self._keys.shape[-2] or self._keys.shape[0] != key_states.shape[0]:
                self._keys, self._values = (self._grown(self._keys, key_states, end),
                                            self._grown(self._values, value_states, end))
            self._keys[..., self._length:end, :] = key_states
            self._values[..., self._length:end, :] = value_states
            self._length = end
            self.keys, self.values = self._keys[..., :end, :], self._values[..., :end, :]
            return self.keys, self.values

        def _grown(self, buffer, states, end: int):
            """A buffer with room for ``end`` tokens and ``SPARE`` more, holding what ``buffer`` held."""
            shape = (*states.shape[:-2], end + SPARE, states.shape[-1])
            grown = torch.empty(shape, dtype=states.dtype, device=states.device)
            if buffer is not None and self._length:
                grown[..., : self._length, :] = buffer[..., : self._length, :]
            return grown

        def crop(self, tokens_to_remove: int) -> None:
            super().crop(tokens_to_remove)  # checks the argument and shortens the views
            if self.is_initialized and self._keys is not None:
                self._length = self.keys.shape[-2]

        def reset(self) -> None:
            super().reset()
            self._keys = self._values = None
            self._length = 0

        def batch_repeat_interleave(self, repeats: int) -> None:
            super().batch_repeat_interleave(repeats)
            self._adopt()

        def batch_select_indices(self, indices) -> None:
            super().batch_select_indices(indices)
            self._adopt()

        def _adopt(self) -> None:
            """Take the views the base class replaced as the buffers (no room to spare)."""
            if self.keys is not None and self.keys.numel():
                self._keys, self._values = self.keys.contiguous(), self.values.contiguous()
                self._length = self._keys.shape[-2]

    return GrowingLayer


def growing_cache():
    """An empty ``DynamicCache`` whose layers are ``GrowingLayer`` s (one made per model
    layer as it fills)."""
    from transformers import DynamicCache

    kv = DynamicCache()
    kv.layer_class_to_replicate = growing_layer_class()
    return kv
