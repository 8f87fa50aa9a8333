"""Training beside a served model without a second copy of its weights, and the KL term's
reference as the LoRA adapter switched off. On a TINY RANDOM model (mechanics only: the
memory of the 8B is the plan's arithmetic, tests/test_plan.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from envace_demo.train.shared import distinct_bytes, sharing_weights
from envace_demo.train.trainer import Trainer
from helpers import CONFIG, HELDOUT, TRAIN, tiny_llama, tiny_random_backend

pytestmark = pytest.mark.usefixtures("one_thread")


def test_a_copy_sharing_weights_holds_no_second_copy():
    model = tiny_llama(vocab_size=300)
    copy = sharing_weights(model)
    assert copy is not model and copy.model.layers[0] is not model.model.layers[0]
    assert distinct_bytes(model, copy) == distinct_bytes(model)
    # A deep copy, for comparison, doubles them: the measure can tell.
    import copy as copy_mod

    assert distinct_bytes(model, copy_mod.deepcopy(model)) == 2 * distinct_bytes(model)


def test_training_setup_shares_the_served_weights_and_leaves_its_modules(tmp_path):
    backend = tiny_random_backend()
    served = backend.model
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.no_grad():
        before = served(ids).logits
    trainer = Trainer(backend, TRAIN, HELDOUT, replace(CONFIG, beta=0.1), tmp_path)
    trainer._setup()
    # One set of weights: the policy's base tensors are the served model's own.
    assert distinct_bytes(served, trainer.model) < distinct_bytes(served) * 1.2  # + LoRA's few
    lora = [n for n, _ in trainer.model.named_parameters() if "lora_" in n]
    assert lora and not any("lora" in n for n, _ in served.named_modules())
    # LoRA learns something (B off zero); the served model still answers as before.
    with torch.no_grad():
        for name, p in trainer.model.named_parameters():
            if "lora_B" in name:
                p.add_(0.5)
        assert torch.equal(served(ids).logits, before)
        trained = trainer.model(input_ids=ids).logits
        # The reference: the adapter switched off is the served (base) model, exactly.
        with trainer.model.disable_adapter():
            reference = trainer.model(input_ids=ids).logits
    assert not torch.allclose(trained, before)
    assert torch.allclose(reference, before)


def test_the_kl_reference_is_the_base_model(tmp_path):
    """PolicyUpdate's reference log-probs (adapter off) equal the served model's."""
    backend = tiny_random_backend()
    trainer = Trainer(backend, TRAIN, HELDOUT, replace(CONFIG, beta=0.1), tmp_path)
    trainer._setup()
    prompts, completions = [[5, 6, 7, 8]], [[9, 10, 11]]
    with torch.no_grad():
        for name, p in trainer.model.named_parameters():
            if "lora_B" in name:
                p.add_(0.5)
    refs = trainer.update._reference(prompts, completions)
    policy = trainer.update._logprobs(prompts, completions)
    with torch.no_grad():
        logits = backend.model(torch.tensor([prompts[0] + completions[0]])).logits[0].float()
    base = torch.log_softmax(logits / CONFIG.temperature, -1)[3:6].gather(1, torch.tensor([[9], [10], [11]])).squeeze(1)
    assert torch.allclose(refs[0], base, atol=1e-5)
    assert not torch.allclose(policy[0], base, atol=1e-3)
