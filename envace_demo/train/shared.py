"""A second module tree over the same weight tensors: the model to put LoRA on while the
served model stays as it is, without a second copy of the weights.

``copy.deepcopy`` with every parameter and buffer already in its memo copies the modules
(small) and keeps the tensors (large) shared. peft then wraps the copy's projections in
LoRA layers; the served model's modules are untouched, and its weights are the very same
(frozen) tensors. The reference policy of the KL term is the copy with its adapter
switched off (``PeftModel.disable_adapter``): the base model again, with no third copy.
"""

from __future__ import annotations

import copy
import itertools


def sharing_weights(model):
    """A copy of ``model`` whose parameters and buffers are ``model``'s own tensors."""
    memo = {id(t): t for t in itertools.chain(model.parameters(), model.buffers())}
    return copy.deepcopy(model, memo)


def distinct_bytes(*models) -> int:
    """Bytes of the distinct tensors (by storage) of ``models`` together."""
    seen: dict[int, int] = {}
    for model in models:
        for t in itertools.chain(model.parameters(), model.buffers()):
            seen.setdefault(t.untyped_storage().data_ptr(), t.untyped_storage().nbytes())
    return sum(seen.values())
