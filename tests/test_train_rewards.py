"""Rewards: the task's checklist score, one test per kind of check, and the empty penalty."""

from __future__ import annotations

from dataclasses import replace

import pytest

from envace_demo.record import Action, CallStep, Rehearsal, ToolCall, Turn
from envace_demo.tasks import find_task
from envace_demo.train.rewards import (
    checklist,
    replay_state,
    row_reward,
    score_episode,
    score_rehearsal,
    trainable,
)
from envace_demo.train.rollout import is_empty

DEPOSIT = find_task("bank", "deposit-cash")  # state: ACC-1003 balance 810.25 after +500


def rehearsal(*calls: ToolCall, answer: str | None = None) -> Rehearsal:
    turns = [Turn(i, Action(text="", calls=[c]), [CallStep(c)]) for i, c in enumerate(calls)]
    return Rehearsal(index=0, turns=turns, final_answer=answer, ended="answer" if answer else "max_steps")


def test_state_check_is_judged_by_replaying_the_imagined_calls():
    good = score_rehearsal(DEPOSIT, rehearsal(ToolCall("deposit", {"account_id": "ACC-1003", "amount": 500})))
    wrong_amount = score_rehearsal(
        DEPOSIT, rehearsal(ToolCall("deposit", {"account_id": "ACC-1003", "amount": 50}))
    )
    nothing = score_rehearsal(DEPOSIT, rehearsal())
    assert (good.value, good.success, good.parts) == (1.0, True, {"state": 1.0})
    assert (wrong_amount.value, wrong_amount.success) == (0.0, False)
    assert nothing.value == 0.0


def test_replay_runs_calls_in_order_and_ignores_unknown_tools():
    calls = [
        ToolCall("no_such_tool", {}),
        ToolCall("deposit", {"account_id": "ACC-1003", "amount": 100}),
        ToolCall("withdraw", {"account_id": "ACC-1003", "amount": 10.25}),
    ]
    state = replay_state(DEPOSIT, calls)
    assert state["accounts"]["ACC-1003"]["balance"] == 400.0
    assert replay_state(replace(DEPOSIT, env=None), calls) is None


def test_includes_calls_items_score_separately():
    task = replace(
        DEPOSIT,
        check={
            "includes_calls": [
                {"get_account": {"account_id": ["ACC-1001"]}},
                {"get_account": {"account_id": ["ACC-1002"]}},
            ]
        },
    )
    one = score_episode(task, [ToolCall("get_account", {"account_id": "ACC-1001"})], None, None)
    both = score_episode(
        task,
        [
            ToolCall("get_account", {"account_id": "ACC-1002"}),
            ToolCall("get_account", {"account_id": "ACC-1001"}),
        ],
        None,
        None,
    )
    assert (one.value, one.success, one.parts) == (0.5, False, {"includes_calls": 0.5})
    assert (both.value, both.success) == (1.0, True)


def test_calls_check_is_one_exact_item():
    task = replace(DEPOSIT, check={"calls": [{"get_account": {"account_id": ["ACC-1001"]}}]})
    exact = [ToolCall("get_account", {"account_id": "ACC-1001"})]
    assert score_episode(task, exact, None, None).value == 1.0
    # A second, extra call breaks the exact match: the single item fails.
    assert score_episode(task, exact * 2, None, None).value == 0.0
    none_expected = replace(DEPOSIT, check={"calls": []})
    assert score_episode(none_expected, [], "ok", None).success
    assert not score_episode(none_expected, exact, "ok", None).success


def test_answer_contains_counts_each_needle():
    task = replace(DEPOSIT, check={"answer_contains": ["810.25", "ACC-1003"]})
    assert score_episode(task, [], "Done: ACC-1003 now holds 810.25 USD", None).value == 1.0
    assert score_episode(task, [], "the new balance is 810.25", None).value == 0.5
    assert score_episode(task, [], None, None).value == 0.0


def test_mixed_check_is_a_checklist_over_all_items():
    task = find_task("bank", "withdraw-insufficient")  # state + includes_calls + answer_contains
    assert [kind for kind, _ in checklist(task)] == ["state", "includes_calls", "answer_contains"]
    call = ToolCall("withdraw", {"account_id": "ACC-1005", "amount": 400})
    score = score_rehearsal(task, rehearsal(call, answer="Sorry, insufficient funds."))
    assert (score.value, score.success) == (1.0, True)
    partial = score_rehearsal(task, rehearsal(call, answer="Done!"))
    assert partial.value == pytest.approx(2 / 3)
    assert partial.parts == {"state": 1.0, "includes_calls": 1.0, "answer_contains": 0.0}


def test_tasks_without_a_check_are_not_trainable():
    assert trainable(DEPOSIT)
    assert not trainable(replace(DEPOSIT, check=None))
    assert score_episode(replace(DEPOSIT, check=None), [], None, None).value == 0.0


def test_empty_generation_loses_the_penalty():
    assert row_reward(1.0, empty=False, empty_penalty=0.1) == 1.0
    assert row_reward(1.0, empty=True, empty_penalty=0.1) == pytest.approx(0.9)
    assert row_reward(0.0, empty=True, empty_penalty=0.1) == pytest.approx(-0.1)


@pytest.mark.parametrize(
    "text, empty",
    [
        ("", True),
        ("  \n", True),
        ("<think>\nplanning</think>\n\n", True),
        ("<think>\nnever closed because the token budget ran out", True),
        ("<think>x</think>\nThe balance is 5.", False),
        ('<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>', False),
        ("plain answer", False),
    ],
)
def test_is_empty_looks_outside_the_reasoning(text, empty):
    assert is_empty(text) is empty


# ---- the shipped drill tasks ------------------------------------------------------------


def _solution(task) -> ToolCall:
    """The right call for a drill task, from its name (family-account[-account][-amount])."""
    family, *rest = task.name.split("-")
    account = f"ACC-{rest[0]}"
    if family == "balance":
        return ToolCall("get_account", {"account_id": account})
    if family == "history":
        return ToolCall("list_transactions", {"account_id": account, "limit": int(rest[1])})
    if family in ("deposit", "withdraw"):
        return ToolCall(family, {"account_id": account, "amount": float(rest[1])})
    if family == "freeze":
        return ToolCall("freeze_account", {"account_id": account, "reason": "lost_card"})
    assert family == "transfer"
    return ToolCall(
        "transfer", {"from_account_id": account, "to_account_id": f"ACC-{rest[1]}", "amount": float(rest[2])}
    )


def test_bank_drills_are_solvable_and_heldout_prompts_are_new():
    from envace_demo.errors import TaskError
    from envace_demo.train.data import drill_tasks

    tasks = drill_tasks("bank")
    heldout = [t for t in tasks if t.split == "heldout"]
    train = [t for t in tasks if t.split == "train"]
    assert len(tasks) == 24 and len(heldout) == 6
    assert {t.prompt for t in heldout}.isdisjoint(t.prompt for t in train)
    assert len({t.name.split("-")[0] for t in heldout}) == 6  # one per family
    for task in tasks:
        assert score_rehearsal(task, rehearsal(_solution(task))).success, task.name
        assert not score_rehearsal(task, rehearsal()).success, task.name
    with pytest.raises(TaskError, match="no drill tasks for environment 'files'"):
        drill_tasks("files")
