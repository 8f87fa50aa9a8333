"""Generated training tasks: each script passes its own check against the real
environment, and none repeats a held-out example task."""

from __future__ import annotations

import pytest

from envace_demo.envs.registry import create
from envace_demo.tasks import evaluate
from envace_demo.train.generate import (
    GENERATED_ENVS,
    generated_tasks,
    heldout_tasks,
    overlaps_heldout,
    training_tasks,
)


@pytest.mark.parametrize("env", GENERATED_ENVS)
def test_every_script_passes_its_check_on_a_fresh_environment(env):
    scripted = generated_tasks(env)
    assert len(scripted) >= 25
    for s in scripted:
        real = create(env)
        results = [real.execute(c.name, c.arguments) for c in s.calls]
        assert results == [step.result for step in s.steps], s.task.name
        verdict = evaluate(s.task, s.calls, s.answer, real.state())
        assert verdict is not None and verdict.success, (s.task.name, verdict.reasons if verdict else None)


@pytest.mark.parametrize("env", GENERATED_ENVS)
def test_a_script_with_no_calls_or_a_wrong_answer_fails_its_check(env):
    for s in generated_tasks(env):
        verdict = evaluate(s.task, [], "", create(env).state())
        assert verdict is not None and not verdict.success, s.task.name


@pytest.mark.parametrize("env", GENERATED_ENVS)
def test_generated_tasks_stay_apart_from_the_heldout_ones(env):
    held = heldout_tasks(env)
    assert held and all(t.split == "heldout" for t in held)
    scripted = generated_tasks(env)
    names = {t.name for t in held}
    prompts = {" ".join(t.prompt.lower().split()) for t in held}
    for s in scripted:
        assert s.task.split == "train" and s.task.name not in names
        assert " ".join(s.task.prompt.lower().split()) not in prompts
        assert overlaps_heldout(s, held) is None, s.task.name
    assert len(training_tasks((env,))) == len(scripted)


def test_overlap_is_detected_for_a_heldout_task_written_again():
    from envace_demo.record import ToolCall
    from envace_demo.train.generate import ScriptedStep, ScriptedTask

    held = [t for t in heldout_tasks("bank") if t.name == "recent-transactions"]
    call = ToolCall("list_transactions", {"account_id": "ACC-1001", "limit": 3})
    copy = ScriptedTask(held[0], [ScriptedStep("", call, None)], "", "", True)
    assert "same request" in overlaps_heldout(copy, held)
    other = generated_tasks("bank")[0]
    same_calls = ScriptedTask(other.task, [ScriptedStep("", call, None)], "", "", True)
    assert "same calls" in overlaps_heldout(same_calls, held)


def test_read_only_requests_are_marked_and_write_nothing():
    for env in GENERATED_ENVS:
        for s in generated_tasks(env):
            if s.reads_only:
                real = create(env)
                before = real.state()
                for c in s.calls:
                    real.execute(c.name, c.arguments)
                assert real.state() == before, s.task.name


@pytest.mark.parametrize("env", GENERATED_ENVS)
def test_a_varied_world_keeps_the_requests_and_changes_the_answers_it_reads(env):
    """Actor rows in a varied world: the same tasks calling the same tools (requests in
    another wording), answers read from that world's results; the same world for the
    same seed, another for another."""
    seeded, varied, again, other = (training_tasks((env,), w) for w in (None, 1, 1, 2))
    assert [t.task.name for t in varied] == [t.task.name for t in seeded]
    assert [[c.name for c in t.calls] for t in varied] == [[c.name for c in t.calls] for t in seeded]
    assert sum(a.task.prompt != b.task.prompt for a, b in zip(seeded, varied)) >= len(seeded) // 3
    assert [t.answer for t in varied] == [t.answer for t in again]
    changed = sum(a.answer != b.answer for a, b in zip(seeded, varied))
    assert changed >= len(seeded) // 6, changed  # refusals (read-only paths, full patrons) stay the same
    assert [t.answer for t in varied] != [t.answer for t in other]
    for s in varied:  # each answer still follows its own world's results
        for step in s.steps:
            assert step.result is not None


def test_a_phrasing_rewords_requests_in_the_seeded_world():
    """The rehearser's extra rows: other wordings, the same calls and results."""
    seeded, reworded = training_tasks(("library",)), training_tasks(("library",), phrasing=1)
    assert [t.task.name for t in reworded] == [t.task.name for t in seeded]
    assert [[(s.call, s.result) for s in t.steps] for t in reworded] == [[(s.call, s.result) for s in t.steps] for t in seeded]
    assert sum(a.task.prompt != b.task.prompt for a, b in zip(seeded, reworded)) >= 5
