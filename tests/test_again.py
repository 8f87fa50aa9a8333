"""A committed search that found nothing is made again with other runs of the user's words,
never the words that found nothing nor a run holding them (``engine/again.py``; scripted
backend that keeps each generation's constraint, the real library)."""

from conftest import call_text
from helpers.scripted import constrained_episode
from envace_demo.engine.again import found_nothing
from envace_demo.record import call_steps

ASKED = "Card P-1042: do you have anything by Ursula Le Guin in the library?"
EMPTY = call_text("search_catalog", {"query": "the library"})
FOUND = call_text("search_catalog", {"query": "Ursula Le Guin"})
ANSWER = "<think></think>\nYes: The Left Hand of Darkness and A Wizard of Earthsea."
NONE = "<think></think>\nThe library has no such book."


def test_a_search_that_found_nothing_is_made_again_with_other_words():
    traj, backend, _ = constrained_episode(ASKED, [EMPTY, FOUND, ANSWER], answer_what_asked=False)
    steps = call_steps(traj.turns)
    assert [s.call.arguments["query"] for s in steps] == ["the library", "Ursula Le Guin"]
    assert steps[1].real["total"] == 2 and traj.final_answer == ANSWER.split("\n", 1)[1]
    again = backend.constraints[1]
    offered = again.tools[0].parameters["properties"]["query"]["enum"]
    assert again.require_call and [t.name for t in again.tools] == ["search_catalog"]
    assert "Ursula Le Guin" in offered and not any("the library" in v or "P-1042" in v for v in offered)
    assert "found nothing" in traj.turns[1].instead


def test_no_other_run_left_means_the_actor_acts_as_it_would():
    lone = call_text("search_catalog", {"query": "Zzyzx"})
    traj, backend, _ = constrained_episode("Zzyzx?", [lone, NONE], answer_what_asked=False)
    assert [s.call.arguments["query"] for s in call_steps(traj.turns)] == ["Zzyzx"]
    assert len(backend.constraints) == 2 and traj.final_answer == NONE.split("\n", 1)[1]


def test_a_search_that_found_something_or_the_switch_off_is_left_alone():
    traj, backend, _ = constrained_episode(ASKED, [FOUND, ANSWER], answer_what_asked=False)
    assert len(call_steps(traj.turns)) == 1 and len(backend.constraints) == 2
    traj, backend, _ = constrained_episode(ASKED, [EMPTY, NONE], answer_what_asked=False, search_again=False)
    assert len(call_steps(traj.turns)) == 1 and traj.final_answer == NONE.split("\n", 1)[1]


def test_what_found_nothing_is():
    assert found_nothing({"query": "x", "total": 0, "results": []}) and found_nothing([])
    assert not found_nothing({"total": 1, "results": [{"book_id": "BK-001"}]})
    assert not found_nothing({"book_id": "BK-001", "title": "Dune"})  # a record with no list
