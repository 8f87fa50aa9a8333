"""Role adapters (``models/adapters.py``): an adapter folder with a rehearser of its own
in ``rehearser/`` serves each role with its weights, on one copy of the base model.

Mechanics only, on a tiny random Llama whose two adapters are random (so they write
different tokens): which weights a prompt meets, batches mixing the roles, kept prefixes
never crossing from one adapter to the other, the base view, and training's fallback.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from helpers import tiny_llama, tiny_tokenizer

from envace_demo.models.adapters import REHEARSER_WEIGHTS, rehearser_adapter, role_weights, shared_weights
from envace_demo.models.base import Sampling
from envace_demo.models.transformers_backend import TransformersBackend

GREEDY = Sampling(temperature=0.0, max_new_tokens=8)


def _backend() -> TransformersBackend:
    tokenizer = tiny_tokenizer()
    model = tiny_llama(len(tokenizer), eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    return TransformersBackend(model, tokenizer, model_id="tiny-random")


def _save_lora(folder, seed: int) -> None:
    """A random LoRA adapter (B not zero: it changes the output) saved in ``folder``."""
    import torch
    from peft import LoraConfig, get_peft_model

    model = _backend().model
    torch.manual_seed(seed)  # after the model's own seeding
    config = LoraConfig(r=4, lora_alpha=64, target_modules=["q_proj", "v_proj", "down_proj"],
                        init_lora_weights=False)
    get_peft_model(model, config).save_pretrained(folder)


@pytest.fixture(scope="module")
def adapters(tmp_path_factory):
    """(the actor's folder holding the rehearser's in rehearser/, the rehearser's alone)."""
    root = tmp_path_factory.mktemp("roles")
    _save_lora(root / "pair", seed=1)
    _save_lora(root / "pair" / REHEARSER_WEIGHTS, seed=2)
    _save_lora(root / "rehearser-alone", seed=2)
    return root / "pair", root / "rehearser-alone"


def _prompts(backend):
    actor = backend.prompt([{"role": "user", "content": "What is the balance of ACC-1001?"}])
    rehearser = replace(actor, role="rehearser")  # the same text: only the role differs
    return actor, rehearser


def test_each_role_is_served_with_its_own_adapter(adapters):
    pair, alone = adapters
    assert rehearser_adapter(pair) == pair / REHEARSER_WEIGHTS and rehearser_adapter(alone) is None
    backend = _backend()
    backend.apply_adapter(pair)
    assert role_weights(backend.model)
    assert backend.info.extra["rehearser_adapter"] == str(pair / REHEARSER_WEIGHTS)
    actor, rehearser = _prompts(backend)
    as_actor = backend.generate(actor, GREEDY).token_ids
    as_rehearser = backend.generate(rehearser, GREEDY).token_ids

    actor_only = _backend()
    actor_only.apply_adapter(pair)
    shared_weights(actor_only.model)  # the rehearser's adapter dropped: the actor's serves both roles
    assert actor_only.generate(actor, GREEDY).token_ids == as_actor
    rehearser_only = _backend()
    rehearser_only.apply_adapter(alone)
    assert rehearser_only.generate(rehearser, GREEDY).token_ids == as_rehearser
    assert as_actor != as_rehearser  # the two adapters do write differently
    # The actor's adapter is active again after a rehearsal.
    assert backend.generate(actor, GREEDY).token_ids == as_actor


def test_a_batch_mixing_the_roles_gives_each_row_its_adapter(adapters):
    pair, _ = adapters
    backend = _backend()
    backend.apply_adapter(pair)
    actor, rehearser = _prompts(backend)
    alone = [backend.generate(p, GREEDY).token_ids for p in (rehearser, actor)]
    streamed: dict[int, str] = {}
    gens = backend.generate_many([rehearser, actor, rehearser], GREEDY,
                                 on_token=lambda row, text: streamed.__setitem__(row, text))
    assert [g.token_ids for g in gens] == [alone[0], alone[1], alone[0]]
    assert set(streamed) == {0, 1, 2}  # each row streamed under its own index


def test_each_role_decodes_at_its_own_temperature():
    """One set of weights, a rehearser temperature apart from the actor's: the batch is
    decoded in two calls, the rehearser's rows greedily, the actor's as sampled alone."""
    backend = _backend()
    actor, rehearser = _prompts(backend)
    hot = Sampling(temperature=1.5, top_k=0, top_p=1.0, max_new_tokens=8, seed=3)
    mixed = backend.generate_many([actor, rehearser], replace(hot, rehearse_temperature=0.0))
    assert mixed[0].token_ids == backend.generate(actor, hot).token_ids
    assert mixed[1].token_ids == backend.generate(rehearser, GREEDY).token_ids
    # Sampled, the rehearser's row would differ from its greedy one (else the test says nothing).
    assert backend.generate_many([actor, rehearser], hot)[1].token_ids != mixed[1].token_ids


def test_a_rehearser_of_its_own_rehearses_greedily_unless_asked(adapters):
    from envace_demo.engine import Episode, EpisodeConfig
    from envace_demo.models.adapters import rehearse_temperature, without_adapter
    from envace_demo.tasks import find_task

    pair, alone = adapters
    backend = _backend()
    assert rehearse_temperature(backend) is None  # no adapter: as EnvACE was evaluated
    backend.apply_adapter(alone)
    assert rehearse_temperature(backend) is None  # one adapter for both roles
    backend.apply_adapter(pair)
    assert rehearse_temperature(backend) == 0.0
    assert rehearse_temperature(without_adapter(backend)) is None  # Compare's base side
    task = find_task("bank", "check-balance")
    assert Episode(backend, task, EpisodeConfig()).sampling.rehearse_temperature == 0.0
    asked = EpisodeConfig(sampling=Sampling(rehearse_temperature=0.6))
    assert Episode(backend, task, asked).sampling.rehearse_temperature == 0.6


def test_kept_prefixes_never_cross_from_one_adapter_to_the_other(adapters):
    pair, _ = adapters
    backend = _backend()
    backend.apply_adapter(pair)
    actor, rehearser = _prompts(backend)
    backend.generate(actor, GREEDY)
    backend.generate(rehearser, GREEDY)  # the same text on the other weights: nothing reused
    assert backend.row_stats.reused_tokens == 0
    backend.generate(rehearser, GREEDY)
    assert backend.row_stats.reused_tokens > 0


def test_the_base_view_turns_both_adapters_off(adapters):
    from envace_demo.models.adapters import without_adapter

    pair, _ = adapters
    plain = _backend()
    actor, rehearser = _prompts(plain)
    base_text = plain.generate(rehearser, GREEDY).token_ids
    backend = _backend()
    backend.apply_adapter(pair)
    view = without_adapter(backend)
    assert "rehearser_adapter" not in view.info.extra
    assert view.generate(rehearser, GREEDY).token_ids == base_text
    assert view.generate(actor, GREEDY).token_ids == plain.generate(actor, GREEDY).token_ids
    backend.remove_adapter()
    assert not role_weights(backend.model) and backend.generate(rehearser, GREEDY).token_ids == base_text


def test_training_goes_on_from_the_actors_adapter_alone(adapters, tmp_path):
    """A served pair continued by training: the rehearser's adapter is dropped on the
    trained copy (the rollouts' log-probs are the trained weights'), the served model keeps it."""
    from envace_demo.tasks import find_task
    from envace_demo.train.config import TrainConfig
    from envace_demo.train.trainer import Trainer

    pair, _ = adapters
    backend = _backend()
    backend.apply_adapter(pair)
    config = TrainConfig.cpu_recipe(steps=1, group_size=2, max_new_tokens=8, max_turns=1, eval_rehearsals=0)
    trainer = Trainer(backend, [find_task("bank", "check-balance")], [], config, tmp_path,
                      copy_model=True, continue_adapter=True)
    trainer._setup()
    assert not role_weights(trainer.model) and role_weights(backend.model)
