"""Generated training tasks: each script passes its own check against the real
environment, and none repeats a held-out example task."""

from __future__ import annotations

import json

import pytest

from envace_demo.envs.registry import create
from envace_demo.record import ToolCall
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


@pytest.mark.parametrize("requests", ["requests.jsonl", "requests-2.jsonl", "requests-3.jsonl", "requests-4.jsonl", "requests-5.jsonl", "requests-6.jsonl", "requests-7.jsonl", "requests-8.jsonl", "requests-9.jsonl", "requests-10.jsonl", "requests-11.jsonl", "requests-12.jsonl", "requests-13.jsonl", "requests-14.jsonl", "requests-15.jsonl", "requests-16.jsonl", "requests-17.jsonl", "requests-18.jsonl", "requests-19.jsonl", "requests-20.jsonl"])
@pytest.mark.parametrize("env", GENERATED_ENVS)
def test_generated_tasks_stay_apart_from_the_request_tasks_kept_for_measuring(env, requests):
    """``bench/requests*.jsonl``: requests written apart from the generator, for measuring
    only (bench/RESULTS.md); no training task repeats one, its calls or its state check."""
    from pathlib import Path

    from envace_demo.tasks import load_task_file

    kept = [t for t in load_task_file(Path(__file__).parents[1] / "bench" / requests) if t.env == env]
    assert kept
    for s in training_tasks((env,)):
        assert overlaps_heldout(s, kept) is None, s.task.name


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
    # A call a held-out check asks for, shown as a write's context read, is an overlap too.
    write = ToolCall("withdraw", {"account_id": "ACC-1001", "amount": 5.0})
    shown = ScriptedTask(other.task, [ScriptedStep("", write, None, [(call, {"transactions": []})])], "", "", False)
    assert "shows the list_transactions call" in overlaps_heldout(shown, held)


def test_a_check_that_nothing_changed_names_no_task_by_itself():
    """Every refusal on one patron leaves their holds as seeded: that check alone is no
    overlap, while the same check asking for a change is."""
    from envace_demo.tasks import task_from_record

    tasks = {s.task.name: s for s in generated_tasks("library")}
    refused = tasks["gen-library-hold-limit-BK-002"]  # P-1077 is at the limit: holds unchanged
    placed = tasks["gen-library-hold-BK-003-P-1042"]  # a new hold: the holds change
    tools = {"library": create("library").tools()}

    def written_apart(scripted):
        record = {"name": "apart", "env": "library", "prompt": "Another request altogether.",
                  "check": {"state": scripted.task.check["state"]}}
        return task_from_record(record, "apart", tools)

    assert overlaps_heldout(refused, [written_apart(refused)]) is None
    assert "same state check" in overlaps_heldout(placed, [written_apart(placed)])


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
    """Varied worlds: the same tasks, each starting with the same call (requests in
    another wording; what follows may differ where the world decides the outcome), answers
    read from that world's results; the same world for the same seed, another for another."""
    seeded, varied, again, other = (training_tasks((env,), w) for w in (None, 1, 1, 2))
    assert [t.task.name for t in varied] == [t.task.name for t in seeded]
    assert [t.calls[0] for t in varied] == [t.calls[0] for t in seeded]
    assert sum(a.task.prompt != b.task.prompt for a, b in zip(seeded, varied)) >= len(seeded) // 3
    assert [t.answer for t in varied] == [t.answer for t in again]
    changed = sum(a.answer != b.answer for a, b in zip(seeded, varied))
    assert changed >= len(seeded) // 6, changed  # refusals (read-only paths) stay the same
    assert [t.answer for t in varied] != [t.answer for t in other]
    for s in varied:  # each answer still follows its own world's results
        for step in s.steps:
            assert step.result is not None


WORLDS = (None, 100, 117, 1000)


@pytest.mark.parametrize("env", GENERATED_ENVS)
@pytest.mark.parametrize("world", WORLDS)
def test_scripts_pass_their_checks_and_reads_in_varied_worlds(env, world):
    """In every world the scripts replay against a fresh copy of it: the same results, the
    check holds, and each call's context is the real reads its environment names for it,
    made just before it (after the earlier writes)."""
    from envace_demo.train.worlds import varied

    for s in generated_tasks(env, world):
        real = create(env)
        if world is not None:
            real.vary_state(varied(env, world))
        for step in s.steps:
            reads = real.context_reads(step.call.name, step.call.arguments)
            assert [(c.name, c.arguments) for c, _ in step.context] == reads, s.task.name
            assert [r for _, r in step.context] == [real.execute(n, a) for n, a in reads], s.task.name
            assert real.execute(step.call.name, step.call.arguments) == step.result, s.task.name
            assert bool(step.context) == bool(real.writes(step.call.name)), s.task.name
        verdict = evaluate(s.task, s.calls, s.answer, real.state())
        assert verdict is not None and verdict.success, (s.task.name, world, verdict.reasons if verdict else None)
        assert overlaps_heldout(s, heldout_tasks(env)) is None, (s.task.name, world)


def _outcome(result) -> str:
    err = result.get("error") if isinstance(result, dict) else None
    return err["code"] if isinstance(err, dict) else "success"


@pytest.mark.parametrize("env,codes", [
    ("bank", {"success", "INSUFFICIENT_FUNDS", "ACCOUNT_FROZEN", "DAILY_LIMIT_EXCEEDED"}),
    ("files", {"success", "ALREADY_EXISTS", "NOT_FOUND", "PERMISSION_DENIED"}),
    ("library", {"success", "BOOK_NOT_FOUND", "ALREADY_ON_HOLD", "HOLD_LIMIT_REACHED"}),
])
def test_the_failure_families_fail_and_succeed_as_the_world_decides(env, codes):
    """The new families: over the balance, frozen accounts, existing files without
    overwrite, missing directories, unknown book ids, holds on books with no copy; the same
    write goes through in one world and is refused in another, its context showing why."""
    from envace_demo.train.worlds import TRAIN_WORLDS

    by_task: dict[str, set[str]] = {}
    seen: set[str] = set()
    for world in (None, *TRAIN_WORLDS[:8]):
        for s in generated_tasks(env, world):
            for step in s.steps:
                seen.add(_outcome(step.result))
                if step.context:
                    by_task.setdefault(f"{s.task.name}:{step.call.name}", set()).add(_outcome(step.result))
    assert codes <= seen, seen
    # The same write succeeds in one world and fails in another (a patron full in one, with
    # room or the book held already in another).
    decided = [name for name, outcomes in by_task.items() if len(outcomes) > 1]
    assert len(decided) >= 10, decided
    if env == "library":  # a hold on a book with no copy on the shelf still queues
        empty = [s for s in generated_tasks(env) for step in s.steps
                 if step.call.name == "place_hold" and _outcome(step.result) == "success"
                 and step.context[0][1]["available"] == 0]
        assert len(empty) >= 3


def test_training_worlds_never_draw_on_the_evaluation_worlds(monkeypatch, scripted):
    """The seed sets are disjoint, a training world that is an evaluation world is refused,
    and the recipe's rows (both roles, the rehearser's worlds included) come from the seeded
    world and the training seeds alone."""
    from dataclasses import replace

    from envace_demo.train import generate, recipe as recipe_mod, worlds

    assert not set(worlds.TRAIN_WORLDS) & set(worlds.EVAL_WORLDS)
    assert not set(worlds.ACTOR_WORLDS) & set(worlds.EVAL_WORLDS)
    assert not set(worlds.TRAIN_WORLDS) & set(worlds.ACTOR_WORLDS)
    with pytest.raises(ValueError, match="evaluation"):
        worlds.training_worlds([100, worlds.EVAL_WORLDS[3]])
    with pytest.raises(ValueError):
        worlds.rehearser_worlds(len(worlds.TRAIN_WORLDS) + 1)
    drawn: list = []
    real = generate.generated_tasks

    def spy(env, world=None, phrasing=None):
        drawn.append(world)
        return real(env, world, phrasing)[:4]

    monkeypatch.setattr(generate, "generated_tasks", spy)
    recipe = replace(recipe_mod.DemoRecipe(), rehearser_worlds=len(worlds.TRAIN_WORLDS), actor_variants=3,
                     rehearser_phrasings=2, world_tasks=3, memory_every=0)
    rows = recipe_mod.recipe_rows(scripted(), recipe, recipe_mod.recipe_tasks(recipe))
    assert rows and set(drawn) == {None, 1, 2, 3, *worlds.TRAIN_WORLDS}
    assert not set(drawn) & set(worlds.EVAL_WORLDS)


def test_a_rehearser_row_for_a_write_holds_its_context_reads_last(scripted):
    """A committed write's row shows the real reads of its state (the directory it writes
    into, after the earlier calls) last in the few-shot, as the engine places them; the
    rehearsal's row (no real result yet) shows the reads alone; a varied world's rows are the
    committed writes' alone."""
    from envace_demo.prompts import NO_PREVIOUS_CALLS, PREVIOUS_CALLS
    from envace_demo.train.warmstart import task_rows

    s = next(t for t in generated_tasks("files") if t.task.name == "gen-files-copy-0")
    read, write = s.steps
    assert write.call.name == "write_file" and [c.name for c, _ in write.context] == ["list_directory"]
    rows = [r for r in task_rows(scripted(), s, roles=("rehearser",)) if r.call == write.call]
    imagined, committed = rows
    assert committed.few_shot == [(read.call, read.result), *write.context]
    section = committed.prompt.split(PREVIOUS_CALLS, 1)[1].split("Current conversation history", 1)[0]
    assert section.rstrip('\\n"').rstrip().endswith(json.dumps(write.context[0][1]).replace('"', '\\"'))
    assert "Tool name:\\nlist_directory" in section
    # The rehearsal's row: no real result yet, but the reads it made before its first write.
    assert imagined.few_shot == list(write.context) and NO_PREVIOUS_CALLS not in imagined.prompt
    for s in generated_tasks("bank", 100)[:30]:
        mine = task_rows(scripted(), s, roles=("rehearser",), rehearse="context")
        assert len(mine) == sum(bool(step.context) for step in s.steps)
        for row in mine:
            step = next(st for st in s.steps if st.call == row.call)
            assert row.few_shot[-len(step.context):] == step.context
            assert [c.name for c, _ in step.context] == ["get_account"] * len(step.context)


def test_a_phrasing_rewords_requests_in_the_seeded_world():
    """The rehearser's extra rows: other wordings, the same calls and results."""
    seeded, reworded = training_tasks(("library",)), training_tasks(("library",), phrasing=1)
    assert [t.task.name for t in reworded] == [t.task.name for t in seeded]
    assert [[(s.call, s.result) for s in t.steps] for t in reworded] == [[(s.call, s.result) for s in t.steps] for t in seeded]
    assert sum(a.task.prompt != b.task.prompt for a, b in zip(seeded, reworded)) >= 5


def test_a_move_into_a_directory_a_world_may_lack_trains_the_rehearser_alone(scripted):
    """A move into a directory some worlds lack gives rehearser rows only: the actor is not
    taught to answer a missing directory by giving up."""
    from envace_demo.train.warmstart import task_rows

    marked = [s for s in generated_tasks("files") if s.rehearser_only]
    assert {s.task.name for s in marked} >= {"gen-files-move-3"}
    assert all(s.task.name.startswith("gen-files-move-") for s in marked)
    for s in marked[:3]:
        rows = task_rows(scripted(), s)
        assert rows and {r.role for r in rows} == {"rehearser"}


@pytest.mark.parametrize("world", WORLDS)
def test_a_write_into_a_missing_directory_creates_it_and_the_failed_write_is_a_mistake(world):
    """The user asked for the file: where its directory is missing the script creates the
    directory and writes again, and the failed write is marked (never an actor target)."""
    recovered = 0
    for s in generated_tasks("files", world):
        for k, step in enumerate(s.steps):
            code = _outcome(step.result)
            if step.call.name == "write_file" and code in ("NOT_FOUND", "ALREADY_EXISTS") and k + 1 < len(s.steps):
                assert step.mistake, s.task.name
                after = s.steps[k + 1].call
                if code == "NOT_FOUND":
                    assert after == ToolCall("create_directory", {"path": step.call.arguments["path"].rsplit("/", 1)[0]})
                else:
                    assert after.arguments == {**step.call.arguments, "overwrite": True}
                recovered += 1
            elif step.mistake:
                raise AssertionError(f"{s.task.name}: a call marked mistaken that did not fail or was not recovered")
    assert recovered >= 5


# What an answer says when the write went through; never said after a write that failed.
_DONE = ("hold placed", "transferred", "deposited", "withdrew", "created", "moved", "copied", "now contains",
         "paid", "deleted", "is now frozen")


@pytest.mark.parametrize("env", GENERATED_ENVS)
@pytest.mark.parametrize("world", (None, 1, 2))
def test_an_answer_after_a_failed_write_never_says_it_went_through(env, world):
    """The actor learns its answers from the scripts: where a task's last write failed in
    the world it ran in, the answer says so (a title hold once answered "placed" whatever
    the result, and the actor repeated it after a refusal)."""
    from envace_demo.train.generate import bank, files, library
    from envace_demo.train.generate.script import error

    reads = {"bank": bank.READ_TOOLS, "files": files.READ_TOOLS, "library": library.READ_TOOLS}[env]
    failed = 0
    for s in generated_tasks(env, world):
        writes = [step for step in s.steps if step.call.name not in reads]
        if writes and error(writes[-1].result):
            failed += 1
            said = [w for w in _DONE if w in s.answer.lower()]
            assert not said, (s.task.name, s.answer)
    assert failed  # every environment has refusals in every world


@pytest.mark.parametrize("world", (None, 1, 2))
def test_a_script_moves_only_an_amount_the_request_states_unless_it_speaks_of_the_limit(world):
    """The actor moved the daily limit whenever a transfer was refused ("Move $2500" became a
    transfer of 1000) because the one over-limit family asked for exactly that. A script moves
    an amount the request states, or, where the request states none, one it read; another
    amount only where the request says what to do over the limit."""
    from envace_demo.grounding import values

    for s in generated_tasks("bank", world):
        stated = {v for v in values(s.task.prompt) if "-" not in v}  # numbers, not account ids
        for step in s.steps:
            amount = step.call.arguments.get("amount")
            if amount is None or not stated or values(repr(float(amount))) <= stated:
                continue
            assert "limit" in s.task.prompt.lower(), (s.task.name, s.task.prompt, step.call)


def test_a_transfer_over_the_limit_with_no_word_of_it_is_refused_and_told():
    """The contrast the actor needs: the same kind of request with no fallback asked for is
    answered with the refusal, one transfer made."""
    plain = [s for s in generated_tasks("bank") if s.steps and s.steps[-1].call.name == "transfer"
             and "limit" not in s.task.prompt.lower() and "DAILY_LIMIT_EXCEEDED" in json.dumps(s.steps[-1].result)]
    assert len(plain) >= 2
    for s in plain:
        assert len(s.steps) == 1 and "limit" in s.answer, (s.task.name, s.answer)
