"""An answer right after a failure tells of it: the words it is read for, and the engine
taking back an answer that claims what did not happen (scripted backend: exact outputs)."""

import json

import pytest

from conftest import call_text, result_text
from helpers.scripted import sure
from envace_demo.acknowledgment import acknowledges, report, tells_why
from envace_demo.engine import EpisodeConfig, run_episode
from envace_demo.envs.registry import create
from envace_demo.record import ToolCall, call_steps
from envace_demo.schemas import find_tool
from envace_demo.tasks import Task

HOLD = ToolCall("place_hold", {"book_id": "BK-028", "patron_id": "P-1077"})
LIMIT = {"error": {"code": "HOLD_LIMIT_REACHED",
                   "message": "patron P-1077 already has 3 holds, the most allowed; cancel one at the desk first"}}
REQUEST = "Tom Becker here, card P-1077. I'd like a hold on Dracula please."
SEARCH = {"query": "Dracula", "total": 1,
          "results": [{"book_id": "BK-028", "title": "Dracula", "author": "Bram Stoker", "year": 1897}]}


@pytest.mark.parametrize("answer,told", [
    ("Hold placed on Dracula (BK-028) for P-1077.", False),  # only the request's and the call's words
    ("Dracula is on hold for you now.", False),
    ("Hold placed on the desk for P-1077.", False),  # one word of the message ("desk"), no number, no code
    ("You already have 3 holds, the most allowed.", True),  # the failure's own words
    ("That hold hit the limit: cancel one first.", True),
    ("I could not place the hold.", True),  # a negation
    ("The library didn't take it.", True),
    ("Dracula is by Bram Stoker, 1897.", True),  # what a real read said: a question answered
])
def test_an_answer_is_read_for_the_failure_or_a_real_read(answer, told):
    assert acknowledges(answer, HOLD, LIMIT, [REQUEST], read=[SEARCH]) is told


def test_words_the_tool_or_request_already_hold_tell_nothing():
    withdraw = ToolCall("withdraw", {"account_id": "ACC-1005", "amount": 40})
    refused = {"error": {"code": "INSUFFICIENT_FUNDS", "message": "account ACC-1005 has 15.50 USD, cannot withdraw 40.00"}}
    claim = "Withdrew 40.00 USD from ACC-1005."  # 40.00 is the argument; USD the tool's own word
    # "USD", unknown here, is one word of the message: not enough on its own.
    assert acknowledges(claim, withdraw, refused, ["Withdraw $40 from ACC-1005."]) is False
    assert acknowledges("Only 15.50 USD left.", withdraw, refused, ["Withdraw $40 from ACC-1005."]) is True
    assert acknowledges(claim, withdraw, refused, ["Withdraw $40 from ACC-1005.", "Amount in USD"]) is False
    assert acknowledges("It holds only 15.50 USD.", withdraw, refused, ["Withdraw $40", "Amount in USD"]) is True
    assert acknowledges("anything", withdraw, {"new_balance": 0}, []) is True  # no failure, nothing to tell


def test_odd_words_are_words_not_numbers():
    # "inf" and "nan" parse as floats; they must neither crash the reading nor count as values.
    assert acknowledges("inf nan 1e400 Infinity", HOLD, LIMIT, [REQUEST]) is False
    assert acknowledges("You have 3.0 holds.", HOLD, LIMIT, [REQUEST]) is True  # 3.0 is the message's 3


def test_the_report_says_what_the_tool_returned_or_what_was_foreseen():
    assert report(HOLD, LIMIT, ran=True) == (
        "That did not go through: place_hold failed with HOLD_LIMIT_REACHED: patron P-1077 already has 3 holds, "
        "the most allowed; cancel one at the desk first.")
    assert report(HOLD, LIMIT, ran=False, with_message=False) == (
        "I did not run place_hold: rehearsal foresaw that it would fail with HOLD_LIMIT_REACHED.")


def _hold_task():
    return Task("tom", REQUEST, create("library").tools())


HOLD_CALL = call_text("place_hold", HOLD.arguments)
CLAIM = "<think></think>\nHold placed on Dracula (BK-028) for P-1077."


def _tom_over_limit():
    env = create("library")
    assert len(env.state()["patrons"]["P-1077"]["holds"]) == 3  # the seeded world: Tom at the limit
    return env


def test_a_claim_after_a_real_refusal_is_asked_again_then_replaced_by_the_refusal(scripted):
    env = _tom_over_limit()
    backend = scripted(actor=[HOLD_CALL, CLAIM, CLAIM])
    traj = run_episode(backend, _hold_task(), EpisodeConfig(mode="none"), env)
    (step,) = call_steps(traj.turns)
    assert step.real["error"]["code"] == "HOLD_LIMIT_REACHED"
    first, final = traj.turns[1], traj.turns[2]
    assert "place_hold failed (HOLD_LIMIT_REACHED)" in first.withdrawn and not first.read()
    assert final.reported == "Hold placed on Dracula (BK-028) for P-1077."
    assert traj.final_answer == final.action.content == report(step.call, step.real, ran=True)
    assert "3 holds" in traj.final_answer and traj.totals()["real_calls"] == 1  # nothing run again


def test_a_second_answer_that_tells_the_failure_stands(scripted):
    told = "<think></think>\nYou already hold 3 books, so Dracula could not be held."
    backend = scripted(actor=[HOLD_CALL, CLAIM, told])
    traj = run_episode(backend, _hold_task(), EpisodeConfig(mode="none"), _tom_over_limit())
    assert traj.final_answer == "You already hold 3 books, so Dracula could not be held."
    assert traj.turns[1].withdrawn and traj.turns[2].reported is None


def test_an_answer_that_tells_the_failure_but_not_why_gets_the_tools_words(scripted):
    vague = "<think></think>\nHold placed on hold limit, cancel on the desk first."  # "limit", not the 3 holds
    backend = scripted(actor=[HOLD_CALL, vague])
    traj = run_episode(backend, _hold_task(), EpisodeConfig(mode="none"), _tom_over_limit())
    (step,) = call_steps(traj.turns)
    assert traj.turns[1].added == "Hold placed on hold limit, cancel on the desk first."
    assert traj.final_answer == ("Hold placed on hold limit, cancel on the desk first.\n\nWhat the tools returned: "
                                 f"place_hold: HOLD_LIMIT_REACHED: {step.real['error']['message']}")
    assert traj.ungrounded == [] and not traj.turns[1].withdrawn


def test_tells_why_needs_the_reason_and_the_numbers_of_the_message():
    env = create("bank")
    call = ToolCall("transfer", {"from_account_id": "ACC-1002", "to_account_id": "ACC-1001", "amount": 1200.0})
    over = env.execute(call.name, call.arguments)
    assert over["error"]["code"] == "DAILY_LIMIT_EXCEEDED"
    asked = ["Transfer $1,200 from ACC-1002 to ACC-1001."]
    described = [json.dumps(find_tool(env.tools(), "transfer").to_openai())]  # "USD", "account": said of any transfer
    assert not tells_why("The transfer did not go through: ACC-1002 has a balance of 1000.00 USD.", call, over,
                         asked, described)
    assert tells_why("Over the daily limit: ACC-1002 can send 1000.00 USD more today.", call, over, asked, described)
    assert not tells_why("Over the daily limit.", call, over, asked, described)  # how much more it can send: left out


def test_a_claim_after_a_held_call_is_replaced_by_the_foreseen_failure(scripted):
    """The hold never ran (trusted foresight): the answer says it was foreseen, not done."""
    backend = scripted(actor=["<think></think>\nNo call.", HOLD_CALL, CLAIM, CLAIM], rehearser=[result_text(LIMIT)])
    env = _tom_over_limit()
    traj = run_episode(backend, _hold_task(), EpisodeConfig(mode="parallel", n=1, check_given_up=False), env)
    (step,) = call_steps(traj.turns)
    assert step.held and step.real is None
    assert traj.final_answer.startswith("I did not run place_hold: rehearsal foresaw that it would fail with "
                                        "HOLD_LIMIT_REACHED")
    assert traj.ungrounded == []  # its values came from the real reads the rehearser was given
    assert env.state()["patrons"]["P-1077"]["holds"] == create("library").state()["patrons"]["P-1077"]["holds"]


def test_an_answer_after_a_held_call_that_leaves_out_why_gets_the_foreseen_failure(scripted):
    vague = "<think></think>\nHold placed on hold limit, cancel on the desk first."
    backend = scripted(actor=["<think></think>\nNo call.", HOLD_CALL, vague], rehearser=[result_text(LIMIT)])
    traj = run_episode(backend, _hold_task(), EpisodeConfig(mode="parallel", n=1, check_given_up=False),
                       _tom_over_limit())
    (step,) = call_steps(traj.turns)
    assert step.held and step.real is None
    final = [t for t in traj.turns if not t.calls][-1]
    assert final.added == "Hold placed on hold limit, cancel on the desk first."
    assert traj.final_answer.endswith(f"What rehearsal foresaw, not run: place_hold: HOLD_LIMIT_REACHED: "
                                      f"{LIMIT['error']['message']}")
    assert traj.ungrounded == []


def test_the_check_can_be_turned_off(scripted):
    backend = scripted(actor=[HOLD_CALL, CLAIM])
    traj = run_episode(backend, _hold_task(), EpisodeConfig(mode="none", report_failures=False), _tom_over_limit())
    assert traj.final_answer == "Hold placed on Dracula (BK-028) for P-1077."
    assert not any(t.withdrawn or t.reported for t in traj.turns)



ON_HOLD = {"error": {"code": "ALREADY_ON_HOLD", "message": "patron P-1100 already has a hold on BK-005"}}
DUNE_HOLD = call_text("place_hold", {"book_id": "BK-005", "patron_id": "P-1100"})
DUNE_SEARCH = call_text("search_catalog", {"query": "Dune"})
SHELF = "<think></think>\nDune by Frank Herbert is on shelf SF HER."


def test_a_write_foreseen_to_fail_and_never_made_is_told(scripted):
    """The rehearsal foresaw the hold failing, surely; the committed run took another path
    (a read) and answered from it alone, without saying why the hold was not placed."""
    backend = scripted(actor=[DUNE_HOLD, DUNE_SEARCH, SHELF, SHELF, SHELF, SHELF],
                       rehearser=[lambda _: sure(result_text(ON_HOLD), 0.97)] * 4)
    env = create("library")
    task = Task("dune", "Please put Dune on hold for card P-1100.", env.tools())
    traj = run_episode(backend, task, EpisodeConfig(mode="parallel", n=1), env)
    assert traj.memory["shown"]
    assert [s.call.name for s in call_steps(traj.turns)] == ["search_catalog"]  # the hold never ran
    assert any(t.withdrawn and "place_hold failed (ALREADY_ON_HOLD)" in t.withdrawn for t in traj.turns)
    assert traj.turns[-1].reported == "Dune by Frank Herbert is on shelf SF HER."
    assert traj.final_answer.startswith("I did not run place_hold: rehearsal foresaw that it would fail with "
                                        "ALREADY_ON_HOLD")
    assert traj.ungrounded == []
    # Asked as a question, the same path needs no word of the hold nobody asked for.
    backend = scripted(actor=[DUNE_HOLD, DUNE_SEARCH, SHELF, SHELF, SHELF],
                       rehearser=[lambda _: sure(result_text(ON_HOLD), 0.97)] * 4)
    question = Task("dune", "Where is Dune shelved? Card P-1100.", env.tools())
    traj = run_episode(backend, question, EpisodeConfig(mode="parallel", n=1), create("library"))
    assert traj.final_answer == "Dune by Frank Herbert is on shelf SF HER."


def test_a_write_that_failed_before_reads_that_went_through_is_still_told():
    """Asked to reserve Dune, which P-1100 holds already, the actor then searched the catalog
    and answered that no copy is in: the hold's failure is added to what it said."""
    from helpers.scripted import constrained_episode

    hold = call_text("place_hold", {"book_id": "BK-005", "patron_id": "P-1100"})
    none_in = "<think></think>\nThere is no copy of Dune available now."
    traj, _, env = constrained_episode("Card P-1100 here, please reserve Dune (BK-005).", [
        hold, call_text("search_catalog", {"query": "Dune"}), none_in, none_in])
    assert env.state()["patrons"]["P-1100"]["holds"] == ["BK-005"]
    assert traj.final_answer.startswith("There is no copy of Dune") and "ALREADY_ON_HOLD" in traj.final_answer


def test_where_the_same_write_was_made_for_several_the_one_that_failed_is_named():
    from helpers.scripted import constrained_episode

    request = ("For card P-1100, please place holds on Neuromancer, Cosmos and Anna Karenina, in that order. "
               "If the hold limit stops one of them, tell me which one didn't go through.")
    actor = []
    for title, book in (("Neuromancer", "BK-008"), ("Cosmos", "BK-037"), ("Anna Karenina", "BK-018")):
        actor += [call_text("search_catalog", {"query": title}), call_text("place_hold", {"book_id": book, "patron_id": "P-1100"})]
    limit = "<think></think>\nThe last hold failed: P-1100 already has 3 holds, the most allowed."
    traj, _, env = constrained_episode(request, actor + [limit], max_steps=8)
    assert env.state()["patrons"]["P-1100"]["holds"] == ["BK-005", "BK-008", "BK-037"]
    assert traj.final_answer.startswith(limit.split("\n", 1)[1])
    assert "Anna Karenina (BK-018)" in traj.final_answer and traj.turns[-1].added
