"""Things a request names that no write touched, after the actor wrote for some of them and
answered: the answer is taken back for a call of the actor's own that touches one
(``engine/items.py``; scripted backend that keeps each generation's constraint, real
environments)."""

import pytest

from conftest import call_text
from helpers.scripted import constrained_episode
from envace_demo.engine.items import DRAWS, request_items
from envace_demo.envs.registry import create
from envace_demo.record import call_steps

TWO = "Card P-1042 here: please hold Emma and The Road for me."
SEARCH_EMMA = call_text("search_catalog", {"query": "Emma"})
HOLD_EMMA = call_text("place_hold", {"book_id": "BK-013", "patron_id": "P-1042"})
SEARCH_ROAD = call_text("search_catalog", {"query": "The Road"})
HOLD_ROAD = call_text("place_hold", {"book_id": "BK-026", "patron_id": "P-1042"})
DONE = "<think></think>\nHold placed on Emma for P-1042."
BOTH = "<think></think>\nHolds placed on Emma and The Road for P-1042."

SEND = "From ACC-1002, send $50 to ACC-1001 and another $50 to Ben's ACC-1003."
TO_1003 = call_text("transfer", {"from_account_id": "ACC-1002", "to_account_id": "ACC-1003", "amount": 50.0})
TO_1001 = call_text("transfer", {"from_account_id": "ACC-1002", "to_account_id": "ACC-1001", "amount": 50.0})
SENT = "<think></think>\nSent 50.00 USD."


def _calls(traj):
    return [(s.call.name, s.call.arguments) for s in call_steps(traj.turns)]


@pytest.mark.parametrize("env,request_text,items", [
    ("library", "Priya Nair, P-1100, wants holds on Foundation and on Dune.", ["P-1100", "Foundation", "Dune"]),
    ("library", "Card P-1042 here. I'd like Dracula, Emma and The Hobbit.", ["P-1042", "Dracula", "Emma", "The Hobbit"]),
    ("bank", "From Alice's savings ACC-1002, send $600 to Ben's ACC-1003.", ["ACC-1002", "ACC-1003"]),
    ("library", "Maya Lindqvist (card P-1042) would like Emma.", ["P-1042", "Emma"]),
    ("bank", "Deposit $12 into ACC-1002 and label it 'IRS refund'.", ["ACC-1002", "IRS refund", "IRS"]),
    ("files", "Move /projects/budget.csv into /archive and rename it budget-q1.csv.",
     ["/projects/budget.csv", "/archive", "budget-q1.csv"]),
])
def test_what_a_request_names(env, request_text, items):
    assert request_items(request_text, create(env).tools()) == items


def test_an_item_no_write_touched_gets_a_search_then_the_write():
    """The answer after Emma's hold is taken back for the actor's search of The Road; its next
    answer, after that read alone, is taken back for the hold of the book the search found."""
    traj, backend, env = constrained_episode(TWO, [SEARCH_EMMA, HOLD_EMMA, DONE, SEARCH_ROAD, DONE, HOLD_ROAD, BOTH])
    assert env.state()["patrons"]["P-1042"]["holds"] == ["BK-013", "BK-026"]
    assert [c[0] for c in _calls(traj)] == ["search_catalog", "place_hold", "search_catalog", "place_hold"]
    withdrawn = [t for t in traj.turns if t.withdrawn]
    assert len(withdrawn) == 2 and "The Road" in withdrawn[0].withdrawn
    assert all(t.instead for t in traj.turns if t.action.calls and t.action.calls[0].arguments in (
        {"query": "The Road"}, {"book_id": "BK-026", "patron_id": "P-1042"}))
    drawn = [c for c in backend.constraints if c is not None and c.require_call]
    assert drawn and all(c.think_chars == 0 for c in drawn)
    assert traj.final_answer == BOTH.split("\n", 1)[1]


def test_an_identifier_the_request_names_gets_its_write():
    traj, _, env = constrained_episode(SEND, [TO_1003, SENT, TO_1001, SENT], env_name="bank")
    assert [c[1]["to_account_id"] for c in _calls(traj)] == ["ACC-1003", "ACC-1001"]
    assert env.state()["accounts"]["ACC-1001"]["balance"] == 1300.0


def test_a_call_made_already_or_a_write_on_the_same_account_is_never_taken():
    """Asked for the second transfer, the actor repeats the first (held to ACC-1001, it still
    writes the same call): not taken, the first answer stands, and the money moved once."""
    traj, backend, env = constrained_episode(SEND, [TO_1003, SENT, TO_1003, TO_1003, TO_1003], env_name="bank")
    assert [c[1]["to_account_id"] for c in _calls(traj)] == ["ACC-1003"] and traj.final_answer == "Sent 50.00 USD."
    assert env.state()["accounts"]["ACC-1002"]["balance"] == 8350.0 and not any(t.withdrawn for t in traj.turns)
    held = backend.constraints[2].tools
    assert len(held) == 1 and held[0].parameters["properties"]["to_account_id"]["enum"] == ["ACC-1001"]


def test_a_label_is_no_call_of_its_own():
    """A quoted label no write passed: no tool takes it as what it acts on, so nothing is drawn
    (a deposit made again to add it would move the money twice)."""
    deposit = call_text("deposit", {"account_id": "ACC-1002", "amount": 12.0})
    done = "<think></think>\nDeposited 12.00 USD."
    traj, backend, env = constrained_episode("Deposit $12 into ACC-1002 and label it 'IRS refund'.", [deposit, done],
                                             env_name="bank")
    assert env.state()["accounts"]["ACC-1002"]["balance"] == 8412.0 and len(backend.constraints) == 2


def test_names_count_only_where_a_read_searches_the_users_words():
    """The bank has no search: "Ben" is no item there, and nothing is drawn after the transfer."""
    traj, backend, env = constrained_episode("From ACC-1002, send $50 to Ben's ACC-1003.", [TO_1003, SENT],
                                             env_name="bank")
    assert [c[0] for c in _calls(traj)] == ["transfer"] and len(backend.constraints) == 2
    assert env.state()["accounts"]["ACC-1002"]["balance"] == 8350.0


def test_a_name_the_held_books_search_passed_is_touched():
    """The hold used the id the search for Ursula Le Guin found: her name is done, and another of
    her books is never held for it."""
    search = call_text("search_catalog", {"query": "Ursula Le Guin"})
    hold = call_text("place_hold", {"book_id": "BK-007", "patron_id": "P-1042"})
    other = call_text("place_hold", {"book_id": "BK-011", "patron_id": "P-1042"})
    traj, backend, env = constrained_episode("Card P-1042: hold a book by Ursula Le Guin.", [search, hold, DONE, other])
    assert env.state()["patrons"]["P-1042"]["holds"] == ["BK-007"] and len(backend.constraints) == 3


def test_a_path_a_read_passed_is_touched():
    """Copied: the source was read, the copy written; the source is no item left to do."""
    read = call_text("read_file", {"path": "/notes/todo.txt"})
    write = call_text("write_file", {"path": "/archive/todo.txt", "content": "x"})
    done = "<think></think>\nCopied."
    traj, backend, _ = constrained_episode("Copy /notes/todo.txt to /archive/todo.txt.", [read, write, done],
                                           env_name="files")
    assert len(backend.constraints) == 3 and traj.final_answer == "Copied."


def test_nothing_is_drawn_without_a_write_nor_with_the_switch_off():
    shelf = "<think></think>\nEmma and The Road are both on the shelf."
    traj, backend, _ = constrained_episode("Are Emma and The Road on the shelf?", [SEARCH_EMMA, shelf],
                                           answer_what_asked=False)
    assert len(backend.constraints) == 2 and traj.final_answer == shelf.split("\n", 1)[1]
    traj, backend, env = constrained_episode(TWO, [SEARCH_EMMA, HOLD_EMMA, DONE], finish_named_items=False)
    assert len(backend.constraints) == 3 and env.state()["patrons"]["P-1042"]["holds"] == ["BK-013"]


def test_a_drawn_call_is_the_engines_step_made_past_the_last_one():
    """Two actor turns allowed, both spent on Emma: The Road is still searched and held."""
    traj, _, env = constrained_episode(TWO, [SEARCH_EMMA, HOLD_EMMA, DONE, SEARCH_ROAD, DONE, HOLD_ROAD, BOTH],
                                       max_steps=2)
    assert env.state()["patrons"]["P-1042"]["holds"] == ["BK-013", "BK-026"]
    assert not any(t.error for t in traj.turns) and traj.final_answer == BOTH.split("\n", 1)[1]


def test_an_identifier_is_drawn_for_only_after_the_word_its_sibling_had():
    """ACC-1004 is named in a clause of its own, after no preposition the transfer's accounts
    had: nothing is drawn for it."""
    traj, backend, _ = constrained_episode("Send $50 from ACC-1002 to ACC-1003. ACC-1004 stays as it is.",
                                           [TO_1003, SENT], env_name="bank")
    assert [c[0] for c in _calls(traj)] == ["transfer"] and len(backend.constraints) == 2


def test_an_identifier_one_argument_alone_can_take_is_drawn_for_without_the_word():
    """"a hold for me (P-1042) and one for her - her card is P-1100": no preposition before P-1100,
    but the hold takes one card, so the card is drawn for; an identifier is never searched as words."""
    beloved = "Please place a hold on Beloved for me (P-1042) and one for her - her card is P-1100."
    search = call_text("search_catalog", {"query": "Beloved"})
    mine = call_text("place_hold", {"book_id": "BK-023", "patron_id": "P-1042"})
    hers = call_text("place_hold", {"book_id": "BK-023", "patron_id": "P-1100"})
    done = "<think></think>\nHolds placed on Beloved for both cards."
    traj, backend, env = constrained_episode(beloved, [search, mine, done, hers, done])
    assert env.state()["patrons"]["P-1100"]["holds"] == ["BK-005", "BK-023"]
    drawn = backend.constraints[3]
    assert [t.name for t in drawn.tools] == ["place_hold"]
    assert drawn.tools[0].parameters["properties"]["patron_id"]["enum"] == ["P-1100"]


def test_a_path_the_request_gives_way_from_gets_no_write_of_its_own():
    """The fallback path was written; the path it stands in for is no item still to do."""
    todo = ("Make me a new todo list at /notes/todo.txt with one line: - water the plants. If there's already a "
            "file by that name, do NOT overwrite it - save mine as /notes/todo-2.txt instead and tell me you did.")
    second = call_text("write_file", {"path": "/notes/todo-2.txt", "content": "- water the plants"})
    done = "<think></think>\nSaved it as /notes/todo-2.txt."
    traj, backend, env = constrained_episode(todo, [second, done, call_text("write_file", {
        "path": "/notes/todo.txt", "content": "- water the plants"}), done], env_name="files")
    assert [c[1]["path"] for c in _calls(traj)] == ["/notes/todo-2.txt"] and traj.final_answer.endswith("todo-2.txt.")


DUNE_AND_EMMA = "Card P-1100: please hold Dune and Emma for me."
HOLD_DUNE = call_text("place_hold", {"book_id": "BK-005", "patron_id": "P-1100"})
HOLD_EMMA_1100 = call_text("place_hold", {"book_id": "BK-013", "patron_id": "P-1100"})


def test_a_failure_that_is_its_items_alone_leaves_the_other_items_to_do():
    """P-1100 holds Dune already: that failure names the book and the card, Dune's alone, so
    Emma is still held; the answer that leaves Dune's failure out has it added."""
    emma_only = "<think></think>\nEmma is on hold for you."
    traj, _, env = constrained_episode(DUNE_AND_EMMA, [
        call_text("search_catalog", {"query": "Dune"}), HOLD_DUNE, "<think></think>\nDune is already on hold.",
        SEARCH_EMMA, emma_only, HOLD_EMMA_1100, emma_only, emma_only])
    assert env.state()["patrons"]["P-1100"]["holds"] == ["BK-005", "BK-013"]
    assert traj.final_answer.startswith("Emma is on hold for you.") and "ALREADY_ON_HOLD" in traj.final_answer


def test_a_failure_of_what_the_items_share_ends_them():
    """P-1077 has the most holds allowed: the failure names the card alone, and nothing more is tried."""
    limit = "<think></think>\nYou have too many holds."
    traj, backend, env = constrained_episode("Card P-1077: please hold Dune and Emma for me.", [
        call_text("search_catalog", {"query": "Dune"}), call_text("place_hold", {"book_id": "BK-005", "patron_id": "P-1077"}),
        limit, limit])
    assert [c[0] for c in _calls(traj)] == ["search_catalog", "place_hold"]
    assert env.state()["patrons"]["P-1077"]["holds"] == create("library").state()["patrons"]["P-1077"]["holds"]


def test_labels_dictated_one_a_write_are_items_of_their_own():
    """Two transfers on the same accounts, told apart by their memos: after the first, the
    second is drawn with its memo held to the other label, and its limit failure is told."""
    two = "Two transfers from ACC-1002 to ACC-1001 please: $600 with memo Rent, then a separate $600 with memo Car payment."
    first = call_text("transfer", {"from_account_id": "ACC-1002", "to_account_id": "ACC-1001", "amount": 600,
                                   "memo": "Rent"})
    second = call_text("transfer", {"from_account_id": "ACC-1002", "to_account_id": "ACC-1001", "amount": 600,
                                    "memo": "Car payment"})
    sent = "<think></think>\nSent 600.00 USD."
    traj, backend, env = constrained_episode(two, [first, sent, second, sent, sent], env_name="bank")
    assert [c[1].get("memo") for c in _calls(traj)] == ["Rent", "Car payment"]
    drawn = next(c for c in backend.constraints if c is not None and c.require_call)
    assert drawn.tools[0].parameters["properties"]["memo"]["enum"] == ["Car payment"]
    assert env.state()["accounts"]["ACC-1002"]["transferred_today"] == 600.0  # the second is over the day's limit
    assert "limit" in traj.final_answer.lower()


@pytest.mark.parametrize("message, own", [
    ("patron P-1100 already has a hold on BK-005", True),  # everything the call acts on
    ("patron P-1100 already has a hold on Dune", True),  # a foreseen wording: the item by name
    ("patron P-1100 already has 3 holds, the most allowed", False),  # only what every item shares
    ("the catalog is closed", False),
])
def test_whose_failure_a_write_failure_is(message, own):
    from envace_demo.engine.items import _its_own
    from envace_demo.record import CallStep, ToolCall

    step = CallStep(ToolCall("place_hold", {"book_id": "BK-005", "patron_id": "P-1100"}), held=True,
                    rehearsed={"error": {"code": "X", "message": message}})
    items = request_items("Card P-1100: please hold Dune and Emma for me.", create("library").tools())
    assert _its_own(step, items) is own
