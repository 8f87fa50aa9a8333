"""A write the request names by name, not made when the actor answers from reads alone: the
answer is taken back once and the call asked for, its grammar held to the named tools with the
conversation's identifiers (``engine/unmade.py``; scripted backend that keeps each generation's
constraint)."""

import pytest

from conftest import call_text
from helpers.scripted import constrained_episode
from envace_demo.engine.offer import naming
from envace_demo.envs.registry import create
from envace_demo.schemas import find_tool
from envace_demo.record import call_steps

HOLD_ANNA = "Please hold Anna Karenina for card P-1100."
SEARCH = call_text("search_catalog", {"query": "Anna Karenina"})
HOLD = call_text("place_hold", {"book_id": "BK-018", "patron_id": "P-1100"})
SHELF = "<think></think>\nAnna Karenina is on shelf CLA TOL."
HELD = "<think></think>\nHold placed on Anna Karenina (BK-018) for P-1100."



_run = constrained_episode


def test_an_answer_from_reads_alone_is_taken_back_and_the_named_write_asked_for():
    traj, backend, env = _run(HOLD_ANNA, [SEARCH, SHELF, HOLD, HELD])
    assert [s.call.name for s in call_steps(traj.turns)] == ["search_catalog", "place_hold"]
    assert env.state()["patrons"]["P-1100"]["holds"] == ["BK-005", "BK-018"]
    assert "place_hold" in traj.turns[1].withdrawn and traj.turns[2].instead
    asked = backend.constraints[2]
    assert asked.require_call and [t.name for t in asked.tools] == ["place_hold"]
    assert asked.tools[0].parameters["properties"]["patron_id"]["enum"] == ["P-1100"]
    assert traj.final_answer == HELD.split("\n", 1)[1]


@pytest.mark.parametrize("prompt", [
    "Is Anna Karenina on the shelf? If so, hold it for card P-1100.",  # a condition the reads may find unmet
    "Tell me where Anna Karenina is, card P-1100.",  # no write named
])
def test_nothing_is_asked_where_no_write_is_named_or_a_condition_is_set(prompt):
    traj, _, env = _run(prompt, [SEARCH, SHELF], answer_what_asked=False)  # (no shelf read for the answer)
    assert [s.call.name for s in call_steps(traj.turns)] == ["search_catalog"] and traj.final_answer.endswith("CLA TOL.")
    assert env.state()["patrons"]["P-1100"]["holds"] == ["BK-005"]


def test_a_named_write_of_another_tool_is_asked_for_after_a_write():
    lost = "I lost my card for ACC-1001. First move $300 from it to ACC-1002, then freeze the checking account."
    transfer = call_text("transfer", {"from_account_id": "ACC-1001", "to_account_id": "ACC-1002", "amount": 300.0})
    claimed = "<think></think>\nMoved 300.00 USD; the checking account is now frozen."
    freeze = call_text("freeze_account", {"account_id": "ACC-1001", "reason": "lost_card"})
    traj, backend, env = _run(lost, [transfer, claimed, freeze, claimed], env_name="bank")
    assert [s.call.name for s in call_steps(traj.turns)] == ["transfer", "freeze_account"]
    assert env.state()["accounts"]["ACC-1001"]["status"] == "frozen" and "freeze_account" in traj.turns[1].withdrawn
    assert [t.name for t in backend.constraints[2].tools] == ["freeze_account"]


def test_nothing_is_asked_after_the_named_write_was_made_nor_with_the_switch_off():
    move = "Transfer $300 from ACC-1001 to ACC-1002, please."
    transfer = call_text("transfer", {"from_account_id": "ACC-1001", "to_account_id": "ACC-1002", "amount": 300.0})
    done = "<think></think>\nMoved 300.00 USD."
    traj, _, _ = _run(move, [transfer, done], env_name="bank")
    assert [s.call.name for s in call_steps(traj.turns)] == ["transfer"] and not any(t.withdrawn for t in traj.turns)
    traj, _, _ = _run(HOLD_ANNA, [SEARCH, SHELF], named_writes=False)
    assert [s.call.name for s in call_steps(traj.turns)] == ["search_catalog"]


def test_asked_once_per_user_turn():
    """Asked for the hold, the (scripted) actor answers again instead: that answer stands."""
    traj, backend, _ = _run(HOLD_ANNA, [SEARCH, SHELF, SHELF])
    assert [s.call.name for s in call_steps(traj.turns)] == ["search_catalog"] and len(backend.constraints) == 3
    assert traj.final_answer.endswith("CLA TOL.") and traj.turns[1].withdrawn and not traj.turns[2].withdrawn


def test_the_words_that_name_a_write_alone():
    bank, files = create("bank"), create("files")
    assert naming(find_tool(bank.tools(), "freeze_account"), bank.tools(), bank.writes) == {"freeze"}
    assert naming(find_tool(bank.tools(), "transfer"), bank.tools(), bank.writes) == {"transfer"}
    # write_file "Creates the file": "create" names no folder; "directory" is a listing's word too.
    assert naming(find_tool(files.tools(), "create_directory"), files.tools(), files.writes) == set()
    assert naming(find_tool(files.tools(), "write_file"), files.tools(), files.writes) == {"write"}


def test_nothing_is_asked_where_the_request_asks_a_question():
    """"transfer" names the transfer tool, but the question asks about a limit, not for a transfer."""
    read = call_text("get_account", {"account_id": "ACC-1005"})
    told = "<think></think>\nIts daily transfer limit is 500.00 USD."
    traj, _, _ = _run("What daily transfer limit is set on ACC-1005?", [read, told], env_name="bank")
    assert [s.call.name for s in call_steps(traj.turns)] == ["get_account"] and not any(t.withdrawn for t in traj.turns)
    assert traj.final_answer == "Its daily transfer limit is 500.00 USD."


def test_a_write_named_beside_a_question_is_asked_for():
    """The question is one sentence; the sentence before it asks for the freeze."""
    lost = "My card got lost at the train station - please freeze account ACC-1005 right away. Also, what balance is sitting in it?"
    read = call_text("get_account", {"account_id": "ACC-1005"})
    told = "<think></think>\nACC-1005 has a balance of 15.50 USD."
    freeze = call_text("freeze_account", {"account_id": "ACC-1005", "reason": "lost_card"})
    traj, backend, env = _run(lost, [read, told, freeze, told], env_name="bank")
    assert [s.call.name for s in call_steps(traj.turns)] == ["get_account", "freeze_account"]
    assert env.state()["accounts"]["ACC-1005"]["status"] == "frozen" and "freeze_account" in traj.turns[1].withdrawn


def test_a_write_whose_text_the_request_dictates_is_asked_for():
    """Nothing names ``write_file`` ("put" is no tool's word), but the request dictates what the
    file holds: after the folder, the file is asked for."""
    recipe = ("Could you make a new folder /projects/recipes and put a file called pancakes.txt in it "
              "containing: 2 eggs, 1 cup flour, 1 cup milk")
    folder = call_text("create_directory", {"path": "/projects/recipes"})
    claimed = "<think></think>\nCreated /projects/recipes."
    write = call_text("write_file", {"path": "/projects/recipes/pancakes.txt", "content": "2 eggs, 1 cup flour, 1 cup milk"})
    traj, backend, env = _run(recipe, [folder, claimed, write, claimed], env_name="files")
    assert [s.call.name for s in call_steps(traj.turns)] == ["create_directory", "write_file"]
    assert env.state()["directories"]["/projects/recipes"] == ["pancakes.txt"]
    assert [t.name for t in backend.constraints[2].tools] == ["write_file"]
    # A colon alone dictates nothing: "Quick one: move it" asks for no file.
    from envace_demo.engine.offer import dictates
    write_file = find_tool(env.tools(), "write_file")
    assert not dictates("Quick one: move /notes/todo.txt into /archive.", write_file)
    assert dictates("Add a file /notes/todo.txt with the line '- call mom on Sunday'.", write_file)


def test_a_write_ordered_outside_a_condition_is_asked_for():
    """The condition is on what to tell if the hold fails; the hold itself is asked for."""
    tom = ("Tom Becker (card P-1077) wants a hold on Cosmos by Carl Sagan. If he can't get one, "
           "tell him which books he currently has on hold, by title.")
    read = call_text("get_patron", {"patron_id": "P-1077"})
    wrong = "<think></think>\nTom Becker holds BK-001."
    hold = call_text("place_hold", {"book_id": "BK-037", "patron_id": "P-1077"})
    traj, backend, _ = _run(tom, [read, wrong, hold, wrong], answer_what_asked=False)
    assert "place_hold" in traj.turns[1].withdrawn
    assert [t.name for t in backend.constraints[2].tools] == ["place_hold"]
    assert [s.call.name for s in call_steps(traj.turns)] == ["get_patron", "place_hold"]
