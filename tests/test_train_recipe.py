"""The demo-cpu recipe: tasks, warm start and GRPO end to end. The fast test runs its
mechanics on a TINY RANDOM model (no quality); the slow one is the CI smoke run, two
steps of each stage on the real embedded model."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
from helpers import tiny_random_backend

from envace_demo.cli import build_parser
from envace_demo.cli import train as train_cli
from envace_demo.errors import TaskError
from envace_demo.train.recipe import DemoRecipe, recipe_tasks, run_recipe, smoke_recipe


def _check_run(out, summary, recipe):
    sft = [json.loads(line) for line in (out / "sft_metrics.jsonl").read_text().splitlines()]
    assert len(sft) == summary["warm_start"]["steps"] >= 2
    assert {row["role"] for row in sft} == {"actor", "rehearser"}
    assert all(f"loss/{row['role']}" in row for row in sft)
    grpo = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(grpo) == recipe.grpo.steps
    assert {"reward/actor", "reward/rehearser", "loss/rehearser"} <= set(grpo[0])
    tasks = [json.loads(line) for line in (out / "tasks.jsonl").read_text().splitlines()]
    assert tasks and all(t["split"] == "train" and t["check"] for t in tasks)
    config = json.loads((out / "adapter" / "adapter_config.json").read_text())
    assert config["r"] == recipe.lora_rank and "up_proj" in config["target_modules"]
    assert config["base_model_name_or_path"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert json.loads((out / "summary.json").read_text())["grpo"]["steps"] == recipe.grpo.steps


@pytest.mark.slow
def test_recipe_mechanics_on_a_tiny_random_model(tmp_path):
    torch.set_num_threads(1)
    backend = tiny_random_backend()
    recipe = smoke_recipe()
    lines = []
    summary = run_recipe(backend, recipe, tmp_path, lines.append)
    _check_run(tmp_path, summary, recipe)
    assert lines[0].startswith("tasks: 1 generated over bank") and "estimate" in lines[1]
    assert any(line.startswith("warm start 2/") for line in lines)
    # The adapter trained both stages: it applies to the base weights it came from.
    fresh = tiny_random_backend()
    fresh.apply_adapter(tmp_path / "adapter")
    assert fresh.adapter == tmp_path / "adapter"


def test_tasks_per_env_keeps_every_family_spread():
    few = recipe_tasks(DemoRecipe(tasks_per_env=6, envs=("bank",)))
    assert len(few) == 6
    kinds = {t.task.name.split("-")[2] for t in few}
    assert len(kinds) >= 4


def test_recipe_flags_and_refusals():
    args = build_parser().parse_args(["train", "--recipe", "demo-cpu", "--out", "x", "--steps", "3",
                                      "--sft-epochs", "1", "--tasks-per-env", "5", "--rehearser-epochs", "0",
                                      "--actor-variants", "1", "--from-adapter", "runs/a/adapter",
                                      "--rehearser-phrasings", "3", "--no-memory-elsewhere", "--memory-every", "1",
                                      "--no-actor-recovery"])
    recipe = train_cli.recipe_from(args)
    assert recipe.rehearser_phrasings == 3 and DemoRecipe().rehearser_phrasings == 1
    assert recipe.memory_elsewhere is False and DemoRecipe().memory_elsewhere is True
    assert recipe.memory_every == 1
    assert recipe.actor_recovery is False and DemoRecipe().actor_recovery is True
    assert (recipe.grpo.steps, recipe.sft_epochs, recipe.tasks_per_env) == (3, 1, 5)
    assert (recipe.rehearser_epochs, recipe.actor_variants, recipe.from_adapter) == (0, 1, "runs/a/adapter")
    assert DemoRecipe().grpo.max_turns == 2  # a call and the answer: a rollout can succeed
    assert recipe.grpo.max_new_tokens == DemoRecipe().grpo.max_new_tokens
    assert recipe.roles == ("actor", "rehearser")
    args = build_parser().parse_args(["train", "--recipe", "demo-cpu", "--out", "x", "--roles", "rehearser"])
    assert train_cli.recipe_from(args).roles == ("rehearser",)
    args = build_parser().parse_args(["train", "--recipe", "demo-cpu", "--out", "x", "--roles", "rehearser",
                                      "--rehearser-worlds", "40", "--world-tasks", "3", "--seeded-rows", "context",
                                      "--world-contrast"])
    recipe = train_cli.recipe_from(args)
    assert (recipe.rehearser_worlds, recipe.world_tasks, recipe.seeded_rows, recipe.world_contrast) == (
        40, 3, "context", True)
    assert (DemoRecipe().rehearser_worlds, DemoRecipe().seeded_rows, DemoRecipe().world_contrast) == (0, "all", False)
    args = build_parser().parse_args(["train", "--recipe", "demo-cpu", "--env", "bank", "--out", "x"])
    with pytest.raises(TaskError, match="brings its own tasks"):
        args.handler(args)
    args = build_parser().parse_args(["train", "--out", "x"])
    with pytest.raises(TaskError, match="--env NAME or --tools"):
        args.handler(args)


@pytest.mark.slow
@pytest.mark.heavy
def test_recipe_smoke_on_the_embedded_model(tmp_path, cache_dir):
    from envace_demo.models.loader import load_backend

    backend = load_backend("embedded", cache_dir=cache_dir, device="cpu", adapter="none")
    recipe = smoke_recipe()
    summary = run_recipe(backend, recipe, tmp_path, lambda line: None)
    _check_run(tmp_path, summary, recipe)
    assert summary["model"].startswith("embedded (SmolLM2-135M-Instruct)")
    first, last = summary["warm_start"]["first_loss"], summary["warm_start"]["last_loss"]
    assert first and last


def test_a_time_boxed_warm_start_starts_no_step_after_its_time():
    from envace_demo.train.sft import SftBatch, train_sft

    batch = SftBatch("actor", [[1, 2, 3]], [[4, 5]])
    steps = list(train_sft(torch.nn.Linear(2, 2), [batch], epochs=3, lr=1e-3, pad_id=0, seconds=0.0))
    assert steps == []


def test_warm_start_batches_keep_one_role_and_one_system_turn():
    from envace_demo.train.sft import batches
    from envace_demo.train.warmstart import SftRow

    rows = [SftRow(role, "t", f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{i}", "x")
            for role in ("actor", "rehearser") for system in ("A", "B") for i in range(3)]
    out = batches(rows, lambda text: [ord(c) for c in text], 0, 2, seed=0)
    assert sum(len(b.prompt_ids) for b in out) == len(rows)
    for b in out:
        systems = {bytes(p).split(b"<|im_start|>user")[0] for p in b.prompt_ids}
        assert len(systems) == 1
        assert all(c[-1] == 0 for c in b.completion_ids)  # the end-of-turn token closes each target


def test_the_epoch_plan_gives_each_role_its_epochs():
    from envace_demo.train.sft import SftBatch, epoch_plan

    actor, rehearser = SftBatch("actor", [[1]], [[2]]), SftBatch("rehearser", [[1]], [[2]])
    plan = epoch_plan([actor, rehearser], 2, {"rehearser": 3})
    assert [[b.role for b in e] for e in plan] == [["actor", "rehearser"], ["actor", "rehearser"], ["rehearser"]]
    assert [[b.role for b in e] for e in epoch_plan([actor, rehearser], 1, {"rehearser": 0})] == [["actor"]]


def test_a_one_role_recipe_trains_that_role_alone_and_runs_no_grpo(tmp_path):
    """The rehearser's own adapter (``--roles rehearser``): its rows only, in every
    wording asked for, and no GRPO stage (an episode needs both roles)."""
    from envace_demo.train.recipe import _grpo_stage, recipe_rows

    backend = tiny_random_backend()
    both = smoke_recipe()
    scripted = recipe_tasks(both)
    rows = recipe_rows(backend, both, scripted)
    alone = replace(both, roles=("rehearser",), rehearser_phrasings=2, actor_variants=2)
    mine = recipe_rows(backend, alone, scripted)
    assert {r.role for r in rows} == {"actor", "rehearser"} and {r.role for r in mine} == {"rehearser"}
    assert len(mine) == 2 * sum(r.role == "rehearser" for r in rows)
    lines = []
    assert _grpo_stage(backend, alone, scripted, tmp_path, lines.append, None) == (0, 0.0, None)
    assert lines == ["GRPO: skipped (an adapter of the rehearser alone)"]


def test_rehearser_rows_in_varied_worlds_are_committed_writes_with_their_context(scripted):
    """--rehearser-worlds: the rehearser's rows of calls with context reads in training
    worlds, each with its context last in the few-shot; --seeded-rows context keeps the
    seeded world's committed rows of those calls alone; --world-contrast draws half of a
    world's tasks among those whose outcome differs from the seeded world's."""
    from envace_demo.train.recipe import _outcomes, recipe_rows, world_tasks

    recipe = replace(DemoRecipe(), roles=("rehearser",), envs=("bank",), rehearser_worlds=3, world_tasks=4,
                     seeded_rows="context")
    tasks = recipe_tasks(recipe)
    rows = recipe_rows(scripted(), recipe, tasks)
    assert rows and all(r.role == "rehearser" and r.committed for r in rows)
    seeded = sum(1 for t in tasks for step in t.steps if step.context)
    assert len(rows) > seeded
    for row in rows:
        assert row.few_shot and row.few_shot[-1][0].name == "get_account"
    outcomes = {t.task.name: _outcomes(t) for t in tasks}
    contrast = replace(recipe, world_contrast=True, world_tasks=6)
    for world in (100, 101, 102):
        picked = world_tasks(contrast, world, outcomes)
        assert len(picked) == 6
        assert sum(_outcomes(t) != outcomes[t.task.name] for t in picked) >= 3


def test_even_outcomes_caps_each_tool_and_outcome():
    from types import SimpleNamespace

    from envace_demo.train.recipe import even_outcomes, outcome_of

    def row(name, real):
        return SimpleNamespace(call=SimpleNamespace(name=name), real=real)

    refusal = {"error": {"code": "ACCOUNT_FROZEN", "message": "frozen"}}
    rows = [row("withdraw", {"new_balance": i}) for i in range(10)] + [row("withdraw", refusal)] * 2
    rows += [row("deposit", {"new_balance": 1})] * 3
    kept = even_outcomes(rows, 3, seed=1)
    counts = {}
    for r in kept:
        counts[(r.call.name, outcome_of(r.real))] = counts.get((r.call.name, outcome_of(r.real)), 0) + 1
    assert counts == {("withdraw", "success"): 3, ("withdraw", "ACCOUNT_FROZEN"): 2, ("deposit", "success"): 3}
    assert [rows.index(r) for r in kept] == sorted(rows.index(r) for r in kept)  # their order kept
    assert even_outcomes(rows, 3, seed=1) == kept  # drawn by the seed
    more = even_outcomes(rows, 1, seed=1, success_cap=6)  # successes have a cap of their own
    assert sum(1 for r in more if r.call.name == "withdraw" and outcome_of(r.real) == "success") == 6
    assert sum(1 for r in more if outcome_of(r.real) == "ACCOUNT_FROZEN") == 1
    assert sum(1 for r in more if r.call.name == "deposit") == 3


def test_even_outcomes_can_draw_each_setting_of_a_flag_as_its_own_outcome():
    from types import SimpleNamespace

    from envace_demo.train.recipe import even_outcomes

    def write(overwrite):
        arguments = {"path": "/a", "content": "x"} | ({} if overwrite is None else {"overwrite": overwrite})
        return SimpleNamespace(call=SimpleNamespace(name="write_file", arguments=arguments), real={"created": True})

    rows = [write(None)] * 9 + [write(True)] * 2
    assert len(even_outcomes(rows, 3, seed=0)) == 3  # one class: three rows of eleven
    kept = even_outcomes(rows, 3, seed=0, flags=True)  # the two overwrites are a class of their own
    assert sum(r.call.arguments.get("overwrite") is True for r in kept) == 2 and len(kept) == 5
