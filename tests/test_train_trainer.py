"""The training loop and the adapter on a TINY RANDOM model (the ``train`` command: test_train_cli.py).

Mechanics only: a 2-layer Llama (hidden 64) built offline from ``LlamaConfig``,
with a byte-level BPE tokenizer trained here on a few strings and the Qwen3 chat
template. A few supervised steps teach it the call and result format, so its
constrained rollouts contain both roles and differ in reward (it picks "a" or
"b" at random). Nothing here says anything about quality.
"""

from __future__ import annotations

import json
import threading
from dataclasses import replace

import pytest
import torch

from envace_demo.prompts import Conversation, actor_prompt
from envace_demo.train.config import TrainConfig
from envace_demo.train.events import Evaluated, Progress, StepFinished, TrainFinished, TrainStarted
from envace_demo.train.trainer import Trainer
from helpers import CONFIG, HELDOUT, TOOLS, TRAIN, teach_format, tiny_random_backend

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tiny_backend():
    backend = tiny_random_backend()
    teach_format(backend.model, backend.tokenizer, backend)
    return backend


@pytest.fixture(scope="module")
def finished_run(tiny_backend, tmp_path_factory):
    """Two training steps; the events, the base weights before, the trainer."""
    base_before = {n: p.detach().clone() for n, p in tiny_backend.model.named_parameters()}
    out = tmp_path_factory.mktemp("run")
    trainer = Trainer(tiny_backend, TRAIN, HELDOUT, CONFIG, out)
    events = list(trainer.run())
    return events, base_before, trainer, out


def test_two_steps_show_role_wise_baselines(finished_run):
    events, _, _, _ = finished_run
    steps = [e for e in events if isinstance(e, StepFinished)]
    assert [s.step for s in steps] == [1, 2]
    roles_seen = set()
    for step in steps:
        rows = [r for g in step.groups for r in g.rows]
        for g in step.groups:
            for role in ("actor", "rehearser"):
                mine = [r for r in g.rows if r.role == role]
                if not mine:
                    continue
                roles_seen.add(role)
                baseline = sum(r.reward for r in mine) / len(mine)
                for r in mine:  # each row is baselined by its own role's mean in its own group
                    assert r.advantage == pytest.approx(r.reward - baseline)
                    assert r.reward == pytest.approx(g.scores[r.episode].value - (0.1 if r.empty else 0.0))
        assert all(r.completion_ids and r.prompt_ids for r in rows)
        assert step.metrics["rows/actor"] == sum(r.role == "actor" for r in rows)
    assert roles_seen == {"actor", "rehearser"}
    # The rewards differed somewhere, or no gradient would exist.
    assert any(r.advantage != 0 for s in steps for g in s.groups for r in g.rows)


def test_lora_weights_changed_and_served_model_untouched(finished_run, tiny_backend):
    _, base_before, trainer, _ = finished_run
    lora_b = {n: p for n, p in trainer.model.named_parameters() if "lora_B" in n}
    assert lora_b and all(p.abs().sum() > 0 for p in lora_b.values())  # LoRA B starts at zero
    for name, value in tiny_backend.model.named_parameters():
        assert torch.equal(value, base_before[name]), name
    assert not any("lora" in n for n, _ in tiny_backend.model.named_parameters())


def test_events_metrics_and_files(finished_run):
    events, _, _, out = finished_run
    assert isinstance(events[0], TrainStarted) and isinstance(events[-1], TrainFinished)
    phases = [e.phase for e in events if isinstance(e, Evaluated)]
    assert phases == ["before", "after"]
    before = next(e.result for e in events if isinstance(e, Evaluated))
    assert before.tasks == 1 and len(before.episodes) == 2  # without and with rehearsal
    assert {e["mode"] for e in before.episodes} == {"none", "parallel"}
    stages = {e.stage for e in events if isinstance(e, Progress)}
    assert {"eval_before", "rollout", "update", "eval_after", "save"} <= stages
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    for key in (
        "reward/actor",
        "reward/rehearser",
        "advantage_std/actor",
        "loss/actor",
        "gen_len/rehearser",
        "valid_call_rate",
    ):
        assert key in rows[0], key
    result = events[-1].result
    assert result.adapter_dir == out / "adapter" and (out / "adapter" / "adapter_config.json").is_file()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps_done"] == 2 and summary["before"]["tasks"] == 1


def test_apply_and_remove_adapter(finished_run, tiny_backend):
    from envace_demo.train.adapter import apply_adapter, has_adapter, remove_adapter

    _, _, trainer, out = finished_run
    ids = torch.tensor([[5, 6, 7, 8]])
    with torch.no_grad():
        base = tiny_backend.model(ids).logits
        trained = trainer.model(ids).logits
        apply_adapter(tiny_backend, out / "adapter")
        assert has_adapter(tiny_backend) and tiny_backend.adapter == out / "adapter"
        assert tiny_backend.info.extra["adapter"] == str(out / "adapter")
        applied = tiny_backend.model(ids).logits
        remove_adapter(tiny_backend)
        restored = tiny_backend.model(ids).logits
    assert not torch.allclose(base, trained)
    assert torch.allclose(applied, trained, atol=1e-5)
    assert torch.equal(restored, base) and not has_adapter(tiny_backend) and tiny_backend.adapter is None


def test_adapters_are_refused_by_a_backend_without_local_weights(tmp_path):
    from conftest import ScriptedBackend
    from envace_demo.errors import ConfigError
    from envace_demo.train.adapter import apply_adapter, has_adapter

    with pytest.raises(ConfigError, match="local transformers models only"):
        apply_adapter(ScriptedBackend(), tmp_path)
    assert not has_adapter(ScriptedBackend())


def test_stop_ends_the_run_without_a_step(tiny_backend, tmp_path):
    stop = threading.Event()
    trainer = Trainer(tiny_backend, TRAIN, HELDOUT, CONFIG, tmp_path, stop=stop)
    events = []
    for event in trainer.run():
        events.append(event)
        if isinstance(event, Progress) and event.stage == "rollout":
            stop.set()
    result = events[-1].result
    assert result.stopped and result.steps_done == 0 and result.adapter_dir is None and result.after is None
    assert not any(isinstance(e, StepFinished) for e in events)


# ---- the policy backend: prefix reuse and exact token ids ------------------------------


def test_policy_backend_reuses_prefixes_without_changing_outputs(tiny_backend):
    from envace_demo.models.base import Sampling
    from envace_demo.models.transformers_backend import TransformersBackend
    from envace_demo.train.policy import PolicyBackend

    policy = PolicyBackend(tiny_backend.model, tiny_backend.tokenizer, model_id="tiny", constrained=False)
    plain_backend = TransformersBackend(tiny_backend.model, tiny_backend.tokenizer, model_id="tiny")
    plain_backend.row_decoder = False  # the policy decodes with model.generate: compare like with like
    prompts = [actor_prompt(tiny_backend, Conversation(f"pick {x}"), TOOLS) for x in ("a", "b", "a")]
    greedy = Sampling(temperature=0, max_new_tokens=12)
    sampled = Sampling(temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=12, seed=3)
    for prompt in prompts:
        for sampling, n in ((greedy, 1), (sampled, 3)):
            plain = plain_backend.generate_many([prompt] * n, sampling)
            mine = policy.generate_many([prompt] * n, sampling)
            assert [g.text for g in mine] == [g.text for g in plain]
            assert [g.token_ids for g in mine] == [g.token_ids for g in plain]
    assert len(policy._prefixes) == 1  # one shared prompt family, kept as one entry
    policy.forget()
    assert policy._prefixes == []


def test_policy_backend_reports_the_sampled_token_ids(tiny_backend):
    from envace_demo.models.base import Sampling
    from envace_demo.train.policy import PolicyBackend

    policy = PolicyBackend(tiny_backend.model, tiny_backend.tokenizer, model_id="tiny", constrained=True)
    prompt = actor_prompt(tiny_backend, Conversation("pick a"), TOOLS)
    gens = policy.generate_many(
        [prompt] * 3, Sampling(temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=40, seed=1)
    )
    assert len(gens) == 3
    for gen in gens:
        ids = gen.token_ids
        assert len(ids) == gen.new_tokens
        if gen.finish_reason == "stop":
            assert ids[-1] in policy.stop_ids
            ids = ids[:-1]
        assert tiny_backend.tokenizer.decode(ids) == gen.text
    greedy = policy.generate_many([prompt] * 2, Sampling(temperature=0, max_new_tokens=40))
    assert len(greedy) == 2 and greedy[0].token_ids == greedy[1].token_ids


# ---- the background job the UI drives --------------------------------------------------


def test_training_job_runs_in_the_background_one_at_a_time(tiny_backend, tmp_path):
    from envace_demo.errors import ConfigError
    from envace_demo.train.job import TrainingSlot

    seen = []
    release = threading.Event()

    def hold(event) -> None:  # keeps the job running until the second start has been tried
        seen.append(event)
        release.wait(timeout=120)

    slot = TrainingSlot()
    config = TrainConfig(steps=1, group_size=2, prompts_per_step=1, max_new_tokens=40, eval_rehearsals=0)
    job = slot.start(tiny_backend, TRAIN, HELDOUT, config, tmp_path, on_event=hold)
    assert job.running
    with pytest.raises(ConfigError, match="already running"):  # a second job while the first runs
        slot.start(tiny_backend, TRAIN, HELDOUT, config, tmp_path / "other")
    release.set()
    result = job.wait(timeout=120)
    assert job.error is None and not job.running
    assert result is not None and result.steps_done == 1 and result.adapter_dir.is_dir()
    assert len(job.metrics) == 1 and "reward/actor" in job.metrics[0]
    assert job.before is not None and job.after is not None and job.progress is not None
    assert isinstance(seen[-1], TrainFinished)
    # Finished: the slot takes the next job.
    slot.start(tiny_backend, TRAIN, HELDOUT, config, tmp_path / "next").wait(timeout=120)


def test_training_job_reports_a_failure_instead_of_dying_silently(tiny_backend, tmp_path, monkeypatch):
    from envace_demo.train import trainer as trainer_mod
    from envace_demo.train.job import TrainingJob

    def broken(*args, **kwargs):
        raise RuntimeError("rollout exploded")

    monkeypatch.setattr(trainer_mod, "rollout_group", broken)
    job = TrainingJob(
        tiny_backend, TRAIN, HELDOUT, TrainConfig(steps=1, eval_rehearsals=0, max_new_tokens=8), tmp_path
    )
    job.start().wait(timeout=120)
    assert isinstance(job.error, RuntimeError) and job.result is None


def test_policy_backend_reports_token_ids_of_batched_prompts(tiny_backend):
    from envace_demo.models.base import Sampling
    from envace_demo.models.transformers_backend import TransformersBackend
    from envace_demo.train.policy import PolicyBackend

    policy = PolicyBackend(tiny_backend.model, tiny_backend.tokenizer, model_id="tiny", constrained=False)
    plain_backend = TransformersBackend(tiny_backend.model, tiny_backend.tokenizer, model_id="tiny")
    plain_backend.row_decoder = False  # the policy decodes with model.generate: compare like with like
    prompts = [actor_prompt(tiny_backend, Conversation(f"pick {x}"), TOOLS) for x in ("a", "b", "a b")]
    gens = policy.generate_many(
        prompts, Sampling(temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=12, seed=2)
    )
    assert len(gens) == 3
    for prompt, gen in zip(prompts, gens):
        ids = gen.token_ids
        assert len(ids) == gen.new_tokens
        kept = ids[:-1] if gen.finish_reason == "stop" else ids
        assert tiny_backend.tokenizer.decode(kept) == gen.text
        assert gen.prompt_ids == tiny_backend.tokenizer(prompt.text, add_special_tokens=False).input_ids


def test_one_update_per_batch_is_on_policy_so_nothing_is_clipped(finished_run):
    events, _, _, _ = finished_run
    steps = [e for e in events if isinstance(e, StepFinished)]
    assert len(steps) == CONFIG.steps
    for role in ("actor", "rehearser"):
        ratios = [s.metrics[f"clip_ratio/{role}"] for s in steps]
        # Measured in each step that updated on this role's rows (with no KL term: the rows
        # with a nonzero advantage), and in one step at least; none measured would prove nothing.
        updated = [any(r.role == role and r.advantage != 0 for g in s.groups for r in g.rows) for s in steps]
        assert [r is not None for r in ratios] == updated, (role, ratios)
        assert any(updated), f"no step updated on {role} rows"
        assert all(r == 0.0 for r in ratios if r is not None), (role, ratios)


def test_later_updates_on_a_batch_are_clipped_against_the_rollout_logprobs(tmp_path):
    """With several updates per batch, pi_old stays the rollout policy: a large step moves the
    ratio out of [1 - eps, 1 + eps] and the clip shows in the metrics."""
    backend = tiny_random_backend()
    teach_format(backend.model, backend.tokenizer, backend)
    config = replace(CONFIG, steps=2, lr=0.5, updates_per_batch=3, clip_eps=0.05)
    trainer = Trainer(backend, TRAIN, HELDOUT, config, tmp_path)
    steps = [e for e in trainer.run() if isinstance(e, StepFinished)]
    clipped = [s.metrics[f"clip_ratio/{role}"] or 0.0 for s in steps for role in ("actor", "rehearser")]
    assert max(clipped) > 0.0
    rows = [r for s in steps for g in s.groups for r in g.rows if r.advantage != 0]
    assert rows and all(r.old_logp is not None and len(r.old_logp) == len(r.completion_ids) for r in rows)
