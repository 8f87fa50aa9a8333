"""A request's conditional branches, weighed against real reads of the real environments
(``engine/condition.py``); in an episode, a write whose branch was not taken is not made, and
one the taken branch names is asked for (scripted backend that keeps each constraint)."""

import pytest

from conftest import call_text
from helpers.scripted import constrained_episode
from envace_demo.engine.condition import branches, demanded, gated, taken, told, unsettled, weigh
from envace_demo.envs.registry import create
from envace_demo.record import ToolCall, call_steps

WUTHERING = "If Wuthering Heights has a copy on the shelf, just tell me its shelf mark; if not, put it on hold for P-1100."
ACHEBE = "My card is P-1042. Do you have anything by Chinua Achebe? If so, put it on hold for me."
CUSHION = ("Check the balance on ACC-1003. If it's below $500, transfer $200 into it from ACC-1001 with the memo "
           '"Cushion"; if it\'s $500 or more, leave everything as it is.')


def _reads(env_name, *calls):
    env = create(env_name)
    return env, [(ToolCall(name, args), env.execute(name, args)) for name, args in calls]


def _writes(env):
    return env.writes


def test_a_sentence_reads_as_its_branches():
    wuthering = branches(WUTHERING)
    assert [(b.condition, b.holds) for b in wuthering] == [("Wuthering Heights has a copy on the shelf", True)] * 1 + [
        ("Wuthering Heights has a copy on the shelf", False)]
    assert [b.action for b in wuthering] == ["just tell me its shelf mark", "put it on hold for P-1100"]
    (so,) = branches(ACHEBE)  # "if so" weighs the question before it
    assert so.condition == "Do you have anything by Chinua Achebe" and so.action == "put it on hold for me"
    (after,) = branches("Transfer $50 from ACC-1001 to ACC-1003 only if the balance of ACC-1001 is over 2000.")
    assert after.action == "Transfer $50 from ACC-1001 to ACC-1003" and after.holds
    (unless,) = branches("Unless ACC-1003 is frozen, deposit $20 into it.")
    assert not unless.holds and unless.action == "deposit $20 into it"
    archive = branches("Take a look in /archive. If it's empty, move /projects/budget.csv in there.")
    assert [b.action for b in archive] == ["move /projects/budget.csv in there"]  # a file name's dot ends nothing
    assert branches("Send $20 from ACC-1001 to ACC-1002.") == []


@pytest.mark.parametrize("condition, query, expected", [
    ("it has a copy on the shelf", "Wuthering Heights", True),  # 1 of 2 copies in
    ("every copy is out", "Wuthering Heights", False),
    ("there isn't a copy in", "Wuthering Heights", False),
    ("it has no copy on the shelf", "Anna Karenina", True),  # none of its one copy in
    ("it's available", "Anna Karenina", False),
    ("do you have anything by him", "Chinua Achebe", True),
    ("do you have anything by him", "Zzyzx", False),  # a search that found nothing
])
def test_copies_and_searches_settle_a_condition(condition, query, expected):
    _, results = _reads("library", ("search_catalog", {"query": query}))
    found = [r for _, r in results] + [b for _, r in results for b in r["results"]]
    assert weigh(condition, [found[0]] + found[1:]) is expected


@pytest.mark.parametrize("condition, amount, expected", [
    ("it's below $500", None, True),  # ACC-1003 holds 310.25
    ("it's $500 or more", None, False),
    ("the balance is over 300", None, True),
    ("it is at least $310.25", None, True),
    ("that would leave it with less than $300", 5.0, False),  # 305.25 after the write
    ("that would leave it with less than $300", 20.0, True),  # 290.25 after the write
    ("it is not below 1,000", None, False),
])
def test_a_balance_settles_a_comparison(condition, amount, expected):
    _, results = _reads("bank", ("get_account", {"account_id": "ACC-1003"}))
    assert weigh(condition, [results[0][1]], amount) is expected


def test_a_status_an_empty_folder_and_what_nothing_settles():
    _, frozen = _reads("bank", ("get_account", {"account_id": "ACC-1004"}))
    assert weigh("it is frozen", [frozen[0][1]]) is True and weigh("it isn't frozen", [frozen[0][1]]) is False
    _, listing = _reads("files", ("list_directory", {"path": "/archive"}), ("list_directory", {"path": "/notes"}))
    assert weigh("it's empty", [listing[0][1]]) is (listing[0][1]["entries"] == [])
    assert weigh("it's empty", [listing[1][1]]) is False
    assert weigh("the bank won't allow that much today", [frozen[0][1]]) is None


def test_the_reads_pick_the_branch_and_the_write_it_names():
    env, results = _reads("library", ("search_catalog", {"query": "Wuthering Heights"}))
    hold = ToolCall("place_hold", {"book_id": "BK-015", "patron_id": "P-1100"})
    branch = gated(WUTHERING, hold, env.tools(), env.writes, results)
    assert branch is not None and not branch.holds  # a copy is in: the hold's branch is not taken
    assert told(WUTHERING, results) == "tell me its shelf mark"
    assert demanded(WUTHERING, env.tools(), env.writes, results) == []
    # Anna Karenina has no copy in: its hold is the branch taken.
    anna = WUTHERING.replace("Wuthering Heights", "Anna Karenina")
    env, results = _reads("library", ("search_catalog", {"query": "Anna Karenina"}))
    assert gated(anna, ToolCall("place_hold", {"book_id": "BK-018", "patron_id": "P-1100"}), env.tools(), env.writes,
                 results) is None
    assert [t.name for t in demanded(anna, env.tools(), env.writes, results)] == ["place_hold"]


def test_the_condition_weighs_the_thing_it_follows_and_the_write_by_its_own_name():
    env, results = _reads("bank", ("get_account", {"account_id": "ACC-1003"}), ("get_account", {"account_id": "ACC-1001"}))
    # ACC-1003 (310.25) is the one named before the condition, not ACC-1001 (1250), read last.
    assert [(b.holds, ok) for b, ok in taken(CUSHION, results)] == [(True, True), (True, False)]
    # "transfer" names the transfer alone ("into" is in the deposit's description too).
    assert [t.name for t in demanded(CUSHION, env.tools(), env.writes, results)] == ["transfer"]
    rich = CUSHION.replace("ACC-1003", "ACC-1002")  # 8400: the transfer's branch is not taken
    env, results = _reads("bank", ("get_account", {"account_id": "ACC-1002"}))
    move = ToolCall("transfer", {"from_account_id": "ACC-1001", "to_account_id": "ACC-1002", "amount": 200.0})
    assert gated(rich, move, env.tools(), env.writes, results) is not None
    assert gated(rich, ToolCall("get_account", {"account_id": "ACC-1002"}), env.tools(), env.writes, results) is None


SEARCH_W = call_text("search_catalog", {"query": "Wuthering Heights"})
HOLD_W = call_text("place_hold", {"book_id": "BK-015", "patron_id": "P-1100"})
SHELF_W = "<think></think>\nWuthering Heights is on shelf CLA BRO."


def test_a_write_whose_branch_the_reads_did_not_take_is_not_made():
    traj, backend, env = constrained_episode(WUTHERING, [SEARCH_W, HOLD_W, SHELF_W], answer_what_asked=False)
    assert env.state()["patrons"]["P-1100"]["holds"] == ["BK-005"]
    assert [s.call.name for s in call_steps(traj.turns) if s.real is not None] == ["search_catalog"]
    assert "Wuthering Heights has a copy on the shelf" in traj.turns[1].superseded
    assert backend.constraints[2].tools == ()  # the actor answers next
    assert traj.final_answer == "Wuthering Heights is on shelf CLA BRO."


def test_with_the_switch_off_the_write_is_made():
    _, _, env = constrained_episode(WUTHERING, [SEARCH_W, HOLD_W, SHELF_W], answer_what_asked=False,
                                    weigh_conditions=False)
    assert env.state()["patrons"]["P-1100"]["holds"] == ["BK-005", "BK-015"]


def test_a_write_the_taken_branch_names_is_asked_for_past_the_last_step():
    search = call_text("search_catalog", {"query": "Chinua Achebe"})
    book = call_text("get_book", {"book_id": "BK-022"})
    shelf = "<think></think>\nThings Fall Apart is on shelf FIC ACH."
    hold = call_text("place_hold", {"book_id": "BK-022", "patron_id": "P-1042"})
    held = "<think></think>\nHold placed on Things Fall Apart for P-1042."
    traj, backend, env = constrained_episode(ACHEBE, [search, book, shelf, hold, held], max_steps=2)
    assert env.state()["patrons"]["P-1042"]["holds"] == ["BK-022"]
    assert "place_hold" in traj.turns[2].withdrawn and traj.final_answer == held.split("\n", 1)[1]
    assert [t.name for t in backend.constraints[3].tools] == ["place_hold"]


def test_the_other_branch_in_its_many_wordings():
    ishiguro = ("Card P-1042. I'm after Never Let Me Go. If it's on the shelf, just give me the shelf mark. "
                "If it's not, put a hold on it.")
    assert [(b.holds, b.action) for b in branches(ishiguro)] == [
        (True, "just give me the shelf mark"), (False, "put a hold on it")]
    (isnt,) = branches("Is ACC-1004 frozen? If it isn't, deposit $5 into it.")
    assert (isnt.condition, isnt.holds, isnt.action) == ("Is ACC-1004 frozen", False, "deposit $5 into it")
    grab = branches("I want to read Dune - if a copy is on the shelf I'll just come grab it, otherwise please hold it.")
    assert grab[-1].action == "please hold it" and not grab[-1].holds
    (bare,) = branches("if i've got at least $20 in there take out 20 in cash for me")[:1]
    assert "at least $20" in bare.condition


def test_a_list_at_its_limit_and_a_taken_branch_that_only_tells():
    env, results = _reads("library", ("search_catalog", {"query": "dracula"}), ("get_patron", {"patron_id": "P-1077"}))
    tom = "tom, card P-1077. put a hold on dracula for me. if i've maxed out my holds, remind me which books I hold"
    ((branch, ok),) = taken(tom, results)  # Tom holds 3 of 3: "maxed out" is not "out" of copies
    hit = tom.replace("i've maxed out my holds", "I've hit some kind of limit")
    assert [ok for _, ok in taken(hit, results)] == [True]
    assert ok and told(tom, results) == "remind me which books I hold"
    hold = ToolCall("place_hold", {"book_id": "BK-028", "patron_id": "P-1077"})
    assert gated(tom, hold, env.tools(), env.writes, results) is None  # the hold is asked outside the branch
    dana = "dana, ACC-1005. if i've got at least $20 in there take out 20 in cash, otherwise don't touch anything"
    env, results = _reads("bank", ("get_account", {"account_id": "ACC-1005"}))  # 15.50
    cash = ToolCall("withdraw", {"account_id": "ACC-1005", "amount": 20.0})
    assert gated(dana, cash, env.tools(), env.writes, results) is not None  # nothing to be done but tell
    assert gated(dana, cash, env.tools(), env.writes, []) is None and unsettled(dana, cash, env.tools(), env.writes, [])


def test_a_condition_no_read_settled_gets_the_writes_reads_first():
    dana = "dana here, ACC-1005. if i've got at least $20 in there take out 20 in cash, otherwise just tell me the balance"
    cash = call_text("withdraw", {"account_id": "ACC-1005", "amount": 20.0})
    told_ = "<think></think>\nACC-1005 holds 15.50 USD, so I took nothing out."
    traj, backend, env = constrained_episode(dana, [cash, cash, told_], env_name="bank")
    assert env.state()["accounts"]["ACC-1005"]["balance"] == 15.5
    made = [s.call.name for s in call_steps(traj.turns) if s.real is not None]
    assert made == ["get_account"]  # the environment's read for the withdrawal, then no withdrawal
    assert "no read had settled" in traj.turns[0].superseded and traj.turns[2].superseded
    assert traj.final_answer.endswith("took nothing out.")


def test_after_the_reads_a_condition_needs_the_actors_own_write_is_made_again():
    """The actor asked once; the reads settle the condition its way, and the same write is made
    next in its place (``Detail.then``), not left to an actor that may answer instead."""
    dana = "dana here, ACC-1005. if i've got at least $10 in there take out 10 in cash, otherwise just tell me the balance"
    cash = call_text("withdraw", {"account_id": "ACC-1005", "amount": 10.0})
    done = "<think></think>\nTook out 10.00 USD; ACC-1005 now holds 5.50 USD."
    traj, _, env = constrained_episode(dana, [cash, done], env_name="bank")
    assert [s.call.name for s in call_steps(traj.turns) if s.real is not None] == ["get_account", "withdraw"]
    assert env.state()["accounts"]["ACC-1005"]["balance"] == 5.5
    assert "after the reads its condition turns on" in traj.turns[2].instead and traj.final_answer == done.split("\n", 1)[1]


def test_a_size_in_bytes_is_weighed_against_the_file_its_folder_names():
    request = "How big is the stylesheet in /projects/website? If it's under 100 bytes, delete it. Tell me the size either way."
    env, results = _reads("files", ("read_file", {"path": "/projects/website/style.css"}))  # 48 bytes
    assert [ok for _, ok in taken(request, results)] == [True]
    assert [t.name for t in demanded(request, env.tools(), env.writes, results)] == ["delete_file"]
    assert [ok for _, ok in taken(request.replace("100", "40"), results)] == [False]


def test_not_enough_for_that_weighs_the_amount_asked_before_the_condition():
    request = ("I'd like to take $400 in cash out of ACC-1003. If there isn't enough in the account for that, "
               "withdraw $300 instead. How much is left in there afterwards?")
    env, results = _reads("bank", ("get_account", {"account_id": "ACC-1003"}))  # 310.25
    assert [ok for _, ok in taken(request, results)] == [True]
    assert [t.name for t in demanded(request, env.tools(), env.writes, results)] == ["withdraw"]
    fallback = ToolCall("withdraw", {"account_id": "ACC-1003", "amount": 300.0})
    assert gated(request, fallback, env.tools(), env.writes, results) is None  # 300 is the branch's own amount
    assert [ok for _, ok in taken(request.replace("$400", "$200"), results)] == [False]
