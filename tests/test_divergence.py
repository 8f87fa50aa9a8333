"""What rehearsal changed: the first point where a run with rehearsal parts from the run
without it, on hand-built records (no model)."""

import json

import pytest

from envace_demo.evaluation.divergence import Divergence, describe, first_divergence, pair_note
from envace_demo.evaluation.table import episode_record
from envace_demo.record import Action, CallStep, ToolCall, Trajectory, Turn

NO_FUNDS = {"error": {"code": "INSUFFICIENT_FUNDS", "message": "balance 310.25 is below 500"}}
ACCOUNT = {"account_id": "ACC-1003", "balance": 310.25}


def step(name, arguments, real=None, rehearsed=None, held=False):
    return CallStep(call=ToolCall(name, arguments), valid=True, real=real, rehearsed=rehearsed, held=held)


def run(mode, steps, answer, success, ungrounded=()):
    """One call a turn, then the answer."""
    turns = [Turn(index=i, action=Action(text="", calls=[s.call]), calls=[s]) for i, s in enumerate(steps)]
    turns.append(Turn(index=len(turns), action=Action(text=answer, content=answer)))
    return Trajectory(mode=mode, model={"model_id": "scripted"}, tools=[], prompt="withdraw 500 from ACC-1003",
                      task="withdraw", seed=0, turns=turns, final_answer=answer, success=success,
                      ended="answer", ungrounded=list(ungrounded))


WITHDRAW = ("withdraw", {"account_id": "ACC-1003", "amount": 500})
GET = ("get_account", {"account_id": "ACC-1003"})


def test_a_failure_foreseen_and_held_is_a_failure_avoided_that_helped():
    without = run("none", [step(*WITHDRAW, real=NO_FUNDS)], "Done: 500 withdrawn.", False)
    with_ = run("parallel", [step(*WITHDRAW, rehearsed=NO_FUNDS, held=True)],
                "ACC-1003 holds too little for 500; nothing was withdrawn.", True)
    d = first_divergence(without, with_)
    assert (d.kind, d.step, d.verdict) == ("failure_avoided", 0, "helped")
    assert "INSUFFICIENT_FUNDS" in d.detail and "held withdraw" in d.detail
    line = describe(d)
    assert line.startswith("Rehearsal helped: at call 1 rehearsal foresaw INSUFFICIENT_FUNDS and held withdraw {")
    assert "without rehearsal that call ran and failed with INSUFFICIENT_FUNDS" in line and "\n" not in line
    assert d.to_dict() == {"kind": "failure_avoided", "step": 0, "detail": d.detail, "verdict": "helped"}
    with pytest.raises(Exception):
        d.kind = "nothing"  # frozen


def test_a_real_failure_without_rehearsal_where_rehearsal_made_another_call_or_none():
    without = run("none", [step(*WITHDRAW, real=NO_FUNDS)], "Failed.", False)
    other = run("parallel", [step(*GET, real=ACCOUNT)], "Only 310.25 there.", True)
    d = first_divergence(without, other)
    assert (d.kind, d.step) == ("failure_avoided", 0) and "get_account" in d.detail
    none = run("sequential", [], "I cannot withdraw more than the balance.", None)
    d = first_divergence(without, none)
    assert (d.kind, d.step, d.verdict) == ("failure_avoided", 0, "same") and "made no such call" in d.detail
    # The other call failed too: nothing avoided, just another call.
    worse = run("parallel", [step(*GET, real={"error": {"code": "NOT_FOUND", "message": "x"}})], "?", False)
    assert first_divergence(without, worse).kind == "different_call"


def test_different_arguments_or_tools_are_a_different_call():
    without = run("none", [step(*GET, real=ACCOUNT), step("withdraw", {"account_id": "ACC-1003", "amount": 20},
                                                          real={"balance": 290.25})], "Withdrew 20.", False)
    with_ = run("parallel", [step(*GET, real=ACCOUNT), step("withdraw", {"account_id": "ACC-1003", "amount": 200},
                                                           real={"balance": 110.25})], "Withdrew 200.", True)
    d = first_divergence(without, with_)
    assert (d.kind, d.step, d.verdict) == ("different_call", 1, "helped")
    assert '"amount": 20}' in d.detail and '"amount": 200}' in d.detail and "withdraw" in d.detail
    assert describe(d).startswith("Rehearsal helped: at call 2 both called withdraw with different arguments")
    tools = run("parallel", [step("list_accounts", {}, real=[])], "None.", False)
    d = first_divergence(without, tools)
    assert (d.kind, d.step, d.verdict) == ("different_call", 0, "same") and "get_account" in d.detail
    assert "list_accounts {}" in d.detail
    longer = run("parallel", [step(*GET, real=ACCOUNT)] * 3, "Withdrew 20.", False)
    d = first_divergence(without, longer)
    assert (d.kind, d.step) == ("different_call", 1)


def test_identical_runs_diverge_nowhere_and_different_answers_are_an_answer():
    a = run("none", [step(*GET, real=ACCOUNT)], "ACC-1003 holds 310.25 USD.", True)
    b = run("parallel", [step(*GET, real=ACCOUNT, rehearsed={"balance": 300.0})], "ACC-1003 holds 310.25 USD.", True)
    d = first_divergence(a, b)
    assert d == Divergence("nothing", None, d.detail, "same")
    assert describe(d) == "No difference: the same 1 call and the same answer."
    c = run("parallel", [step(*GET, real=ACCOUNT)], "It holds 310.25.", False)
    d = first_divergence(a, c)
    assert (d.kind, d.step, d.verdict) == ("answer", None, "hurt") and '"It holds 310.25."' in d.detail
    assert describe(d).startswith("Rehearsal hurt: the same 1 call, different answers")


def test_a_rehearsed_value_in_the_answer():
    a = run("none", [step(*GET, real=ACCOUNT)], "ACC-1003 holds 310.25 USD.", True)
    b = run("parallel", [step(*GET, real=ACCOUNT, rehearsed={"balance": 300.0})],
            "ACC-1003 holds 300.0 USD.", False, ungrounded=["300.0"])
    d = first_divergence(a, b)
    assert (d.kind, d.step, d.verdict) == ("rehearsed_value", None, "hurt") and '"300.0"' in d.detail
    assert describe(d).startswith("Rehearsal hurt: the same 1 call, but the answer with rehearsal states \"300.0\"")


def test_a_held_call_checked_for_real_parts_nowhere_and_says_so():
    without = run("none", [step(*WITHDRAW, real=NO_FUNDS)], "Refused.", True)
    checked = step(*WITHDRAW, real=NO_FUNDS, rehearsed=NO_FUNDS)
    checked.checked = True
    d = first_divergence(without, run("parallel", [checked], "Refused.", True))
    assert (d.kind, d.verdict) == ("nothing", "same") and "held on a foreseen failure, then run for real" in d.detail


def test_rows_pair_as_the_trajectories_do_even_after_json():
    without = run("none", [step(*WITHDRAW, real=NO_FUNDS)], "Done.", False)
    with_ = run("parallel", [step(*WITHDRAW, rehearsed=NO_FUNDS, held=True)], "Too little.", True)
    rows = [json.loads(json.dumps(episode_record("f:withdraw", "bank", t.mode, 0, t))) for t in (without, with_)]
    for r in rows:
        del r["trajectory"]  # the pairing reads the row alone
    assert rows[1]["call_outcomes"] == [{"name": "withdraw", "arguments": WITHDRAW[1], "held": True, "checked": False,
                                         "predicted_error": "INSUFFICIENT_FUNDS", "ran": False, "real_error": None,
                                         "from_rehearsal": False}]
    assert (rows[0]["real_calls"], rows[0]["real_errors"], rows[1]["held_calls"]) == (1, 1, 1)
    assert first_divergence(*rows) == first_divergence(without, with_)
    with pytest.raises(ValueError, match="call_outcomes"):
        first_divergence({"success": True}, rows[1])


def test_the_compare_note_only_for_a_run_without_and_one_with_rehearsal():
    a = run("none", [step(*GET, real=ACCOUNT)], "310.25", True)
    b = run("sequential", [step(*GET, real=ACCOUNT)], "310.25", True)
    assert pair_note([a, b]) == pair_note([b, a]) == "No difference: the same 1 call and the same answer."
    assert pair_note([b, run("sequential", [], "x", None)]) is None  # base against trained: one mode
    assert pair_note([a]) is None  # a side that did not finish


def test_a_run_with_rehearsal_cut_by_its_time_avoided_nothing():
    from envace_demo.evaluation.divergence import first_divergence

    without = {"call_outcomes": [{"name": "rm", "arguments": {"file_name": "t"}, "held": False,
                                  "predicted_error": None, "ran": True, "real_error": "NOT_FOUND"}],
               "final_answer": None, "ungrounded": [], "success": False, "ended": "max_steps"}
    with_ = {"call_outcomes": [], "final_answer": None, "ungrounded": [], "success": False, "ended": "time_limit"}
    d = first_divergence(without, with_)
    assert d.kind == "different_call" and "time_limit" in d.detail


def test_a_write_taken_from_the_rehearsal_where_the_run_without_it_stopped_calling():
    """The committed run took the write its lead rehearsal had made and let through (the
    hold the actor alone never placed); the detail says so, and the eval row carries it."""
    search = ("search_catalog", {"query": "Cosmos"})
    hold = ("place_hold", {"book_id": "BK-037", "patron_id": "P-1042"})
    without = run("none", [step(*search, real={"total": 1})], "Cosmos is out.", False)
    with_ = run("parallel", [step(*search, real={"total": 1}), step(*hold, real={"hold_id": "H-1"},
                                                                      rehearsed={"hold_id": "H-9"})],
                "Hold placed.", True)
    with_.turns[1].action_from = 0
    d = first_divergence(without, with_)
    assert (d.kind, d.step, d.verdict) == ("different_call", 1, "helped")
    assert "made place_hold" in d.detail and "its rehearsal had made and let through" in d.detail
    assert "had stopped calling" in d.detail
    row = json.loads(json.dumps(episode_record("t:hold", "library", "parallel", 0, with_)))
    assert [c["from_rehearsal"] for c in row["call_outcomes"]] == [False, True]
    assert "let through" in first_divergence(without, row).detail
    with_.turns[1].calls[0].rehearsed = {"error": {"code": "HOLD_LIMIT_REACHED", "message": "x"}}
    assert "let through" not in first_divergence(without, with_).detail  # foreseen failing: not let through
    with_.turns[1].calls[0].rehearsed = {"hold_id": "H-9"}
    with_.turns[1].action_from = None  # drawn by the committed actor itself: no such claim
    assert "let through" not in first_divergence(without, with_).detail
