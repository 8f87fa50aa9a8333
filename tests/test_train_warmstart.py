"""Warm-start rows: the prompts are the engine's own, byte for byte, and the targets are
what a correct policy writes (the real responses, the scripted calls and answer)."""

from __future__ import annotations

import json

import pytest

from envace_demo.calls import parse_action, parse_execution_result
from envace_demo.engine import Episode, EpisodeConfig
from envace_demo.envs.registry import create
from envace_demo.events import EpisodeFinished
from envace_demo.models.base import Sampling
from envace_demo.prompts import NO_PREVIOUS_CALLS
from envace_demo.train.generate import generated_tasks
from envace_demo.train.warmstart import task_rows


def _pick(env: str, name: str):
    return next(s for s in generated_tasks(env) if s.task.name == name)


def _replay(scripted_cls, rows, mode: str, n: int, env: str, task):
    """Run the engine with a backend that writes the rows' targets; the engine's prompts."""
    actor = [r.completion for r in rows if r.role == "actor"]
    turns = actor[: len(actor) // 2] if any("Rehearsal memory" in r.prompt for r in rows) else actor
    # Each rehearser prompt the engine asks is answered by the row of that prompt (imagined
    # reads are fetched for real, so not every row is asked); a prompt with no row fails.
    targets = {r.prompt: r.completion for r in rows if r.role == "rehearser"}
    backend = scripted_cls(
        # In parallel the answer given with the memory in view is worded again without it.
        actor=(turns * (n + 1) + turns[-1:]) if mode == "parallel" else turns,
        rehearser=[lambda prompt: targets.get(prompt, "no row for this prompt")] * 8 if mode == "parallel" else [],
    )
    # The memory shown and every call rehearsed, imagined runs to their answer: the rows'
    # prompts with the memory and those of each committed rehearsal are all met.
    config = EpisodeConfig(mode=mode, n=n, sampling=Sampling(max_new_tokens=64), max_steps=4,
                           constrained=False, require_first_call=False, memory_shown="always",
                           imagined_until="answer", rehearse_committed="all")
    traj = None
    for event in Episode(backend, task, config, environment=create(env)).run():
        if isinstance(event, EpisodeFinished):
            traj = event.trajectory
    return backend, traj


@pytest.mark.parametrize("env,name", [("bank", "gen-bank-balance-1003-0"), ("files", "gen-files-copy-0"),
                                      ("library", "gen-library-hold-title-foundation-P-1042")])
def test_rows_are_the_engine_prompts_and_a_replay_of_the_targets_succeeds(scripted, env, name):
    s = _pick(env, name)
    backend = scripted()
    rows = task_rows(backend, s, with_memory=True)
    prompts = {r.prompt for r in rows}
    for mode, n in (("none", 0), ("parallel", 1)):
        replay, traj = _replay(scripted, rows, mode, n, env, s.task)
        assert traj.success, (mode, traj.ended, traj.check_reasons)
        assert replay.prompts, mode
        for prompt in replay.prompts:
            assert prompt in prompts, (mode, prompt[-400:])
        if mode == "parallel":  # the model's own rehearsals were the real responses
            assert traj.fidelity == 1.0


def test_targets_hold_the_real_response_and_the_scripted_turns(scripted):
    s = _pick("files", "gen-files-copy-0")
    rows = task_rows(scripted(), s, with_memory=False)
    rehearser = [r for r in rows if r.role == "rehearser"]
    # The second call (the write): once as in a rehearsal, which read the target directory for
    # real before its first write, once as in the commit (the first real result known too).
    assert len(rehearser) == 3
    imagined, committed = rehearser[1], rehearser[2]
    assert [c.name for c, _ in imagined.few_shot] == ["list_directory"] and not imagined.committed
    assert [c.name for c, _ in committed.few_shot] == ["read_file", "list_directory"] and committed.committed
    assert NO_PREVIOUS_CALLS not in imagined.prompt and NO_PREVIOUS_CALLS not in committed.prompt
    for row, step in zip(rehearser, [s.steps[0], s.steps[1], s.steps[1]]):
        result, problem = parse_execution_result(row.completion)
        assert problem is None and result == step.result
        assert row.completion.startswith("<think>\n") and row.completion.endswith("\n</execution_result>")
        assert json.dumps(step.result, ensure_ascii=False) in row.completion
    actor = [r for r in rows if r.role == "actor"]
    assert len(actor) == 3
    names = {t.name for t in s.task.tools}
    assert [parse_action(r.completion, names).calls for r in actor[:2]] == [[c] for c in s.calls]
    last = parse_action(actor[2].completion, names)
    assert not last.calls and last.content == s.answer


def test_a_memory_from_another_world_shows_its_values_and_the_targets_follow_the_real_ones(scripted):
    """A rehearsal that guessed other contents: the memory shows them, the actor's targets
    copy what the real read returned."""
    here = _pick("files", "gen-files-copy-0")
    # A world that has the file (a varied world may lack it).
    there = next(s for w in range(1, 10) for s in generated_tasks("files", world=w)
                 if s.task.name == here.task.name and "content" in s.steps[0].result)
    read_here, read_there = here.steps[0].result["content"], there.steps[0].result["content"]
    assert read_here != read_there
    rows = task_rows(scripted(), here, with_memory=True, memory_from=there, roles=("actor",))
    remembered = [r for r in rows if "Rehearsal memory" in r.prompt]
    assert len(remembered) == 3 and all(r.role == "actor" for r in rows)
    guessed = read_there.splitlines()[0]
    assert all(guessed in r.prompt.split("Rehearsal memory", 1)[1].split('"role": "user"', 1)[0] for r in remembered)
    write = parse_action(remembered[1].completion, {t.name for t in here.task.tools}).calls[0]
    assert write.name == "write_file" and write.arguments["content"] == read_here


def test_without_actor_recovery_a_task_with_a_mistake_teaches_the_rehearser_alone(scripted):
    """``warm_rows(actor_recovery=False)`` (``--no-actor-recovery``): the replacement that
    fails first gives no actor rows, its rehearser rows stay; a task without a mistake keeps
    its actor rows."""
    from envace_demo.train.warmstart import warm_rows

    mistaken, plain = _pick("files", "gen-files-replace-1"), _pick("files", "gen-files-read-0")
    backend = scripted()
    kept = warm_rows(backend, [mistaken, plain], memory_every=0, actor_recovery=True)
    left = warm_rows(backend, [mistaken, plain], memory_every=0, actor_recovery=False)
    assert {r.task for r in kept if r.role == "actor"} == {mistaken.task.name, plain.task.name}
    assert {r.task for r in left if r.role == "actor"} == {plain.task.name}
    assert [r for r in left if r.role == "rehearser"] == [r for r in kept if r.role == "rehearser"]


def test_a_mistaken_call_is_never_an_actor_target_and_a_foreseen_one_is_skipped(scripted):
    """A replacement asked without the word overwrite: the plain write fails for real and
    the actor learns the retry; shown a rehearsal that foresaw the failure, it learns to
    write with overwrite first. The engine's committed actor meets that very prompt."""
    s = _pick("files", "gen-files-replace-1")
    assert [(st.call.name, st.mistake) for st in s.steps] == [("write_file", True), ("write_file", False)]
    rows = task_rows(scripted(), s, with_memory=True)
    names = {t.name for t in s.task.tools}
    actor = [r for r in rows if r.role == "actor"]
    plain, remembered = actor[:2], actor[2:]
    assert len(plain) == 2 and len(remembered) == 2
    for row in actor:  # the mistaken call is never a target
        calls = parse_action(row.completion, names).calls
        assert not calls or calls[0].arguments.get("overwrite") is True
    assert "ALREADY_EXISTS" in plain[0].prompt and "Rehearsal memory" not in plain[0].prompt
    assert "predicted error ALREADY_EXISTS" in remembered[0].prompt
    assert '"tool_calls"' not in remembered[0].prompt  # the path that works, from the first turn
    # The rehearser still learns the failure.
    assert any("ALREADY_EXISTS" in r.completion for r in rows if r.role == "rehearser")

    # Parallel rehearsal, as served: the imagined run makes the plain write and foresees its
    # failure; the committed actor, shown that, writes with overwrite and succeeds.
    backend = scripted(
        actor=[call_text_of(s.steps[0].call), remembered[0].completion, remembered[1].completion],
        rehearser=[rows_of(rows, s.steps[0].result), rows_of(rows, s.steps[1].result)],
    )
    # trust_certainty None: a scripted rehearsal has no probability, and any foresight is shown.
    config = EpisodeConfig(mode="parallel", n=1, sampling=Sampling(max_new_tokens=64), max_steps=4,
                           constrained=False, require_first_call=False, trust_certainty=None)
    traj = None
    for event in Episode(backend, s.task, config, environment=create("files")).run():
        if isinstance(event, EpisodeFinished):
            traj = event.trajectory
    assert traj.success, (traj.ended, traj.check_reasons)
    committed = [c for t in traj.turns for c in t.calls]
    assert [c.call.arguments.get("overwrite") for c in committed] == [True]
    assert remembered[0].prompt in backend.prompts


def call_text_of(call) -> str:
    from envace_demo.calls import format_call

    return "<think>\n\n</think>\n\n" + format_call(call)


def rows_of(rows, result) -> str:
    """The rehearser row's target that predicts ``result``."""
    return next(r.completion for r in rows if r.role == "rehearser" and r.real == result)
