"""A write the request names by name, not made when the actor answers: the answer is taken
back once and the call asked for, its grammar held to the named tools with the conversation's
identifiers (``engine/unmade.py``; scripted backend that keeps each generation's constraint)."""

import pytest

from conftest import call_text
from helpers.scripted import ScriptedBackend
from envace_demo.engine import EpisodeConfig, run_episode
from envace_demo.envs.registry import create
from envace_demo.record import call_steps
from envace_demo.tasks import Task

LOST = "I lost my card for ACC-1001. First move $300 from it to ACC-1002, then freeze the checking account."
TRANSFER = call_text("transfer", {"from_account_id": "ACC-1001", "to_account_id": "ACC-1002", "amount": 300.0})
FREEZE = call_text("freeze_account", {"account_id": "ACC-1001", "reason": "lost_card"})
CLAIMED = "<think></think>\nMoved 300.00 USD; the checking account is now frozen."
DONE = "<think></think>\nMoved 300.00 USD and froze ACC-1001."


class Constrained(ScriptedBackend):
    supports_constraints = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.constraints = []

    def generate(self, prompt, sampling, constraint=None, on_token=None, cancel=None):
        self.constraints.append(constraint)
        return super().generate(prompt, sampling, constraint, on_token, cancel)


def _run(prompt, actor, **config):
    env = create("bank")
    backend = Constrained(actor=actor)
    traj = run_episode(backend, Task("t", prompt, env.tools()), EpisodeConfig(mode="none", **config), env)
    return traj, backend, env


def test_an_answer_before_the_named_write_is_taken_back_and_the_call_asked_for():
    traj, backend, env = _run(LOST, [TRANSFER, CLAIMED, FREEZE, DONE])
    assert [s.call.name for s in call_steps(traj.turns)] == ["transfer", "freeze_account"]
    assert env.state()["accounts"]["ACC-1001"]["status"] == "frozen"
    assert "freeze_account" in traj.turns[1].withdrawn and traj.turns[2].instead
    asked = backend.constraints[2]
    assert asked.require_call and [t.name for t in asked.tools] == ["freeze_account"]
    assert asked.tools[0].parameters["properties"]["account_id"]["enum"] == ["ACC-1001", "ACC-1002"]
    assert traj.final_answer == "Moved 300.00 USD and froze ACC-1001."


@pytest.mark.parametrize("prompt", [
    "Move $300 from ACC-1001 to ACC-1002.",  # "move" names no bank tool
    LOST.replace("then freeze", "then, if it went through, freeze"),  # a condition the reads may find unmet
])
def test_nothing_is_asked_where_no_write_is_named_or_a_condition_is_set(prompt):
    traj, _, env = _run(prompt, [TRANSFER, CLAIMED])
    assert [s.call.name for s in call_steps(traj.turns)] == ["transfer"] and traj.final_answer.startswith("Moved")
    assert env.state()["accounts"]["ACC-1001"]["status"] == "active"


def test_nothing_is_asked_after_a_failure_nor_with_the_switch_off():
    over = call_text("transfer", {"from_account_id": "ACC-1001", "to_account_id": "ACC-1002", "amount": 3000.0})
    traj, _, _ = _run(LOST.replace("$300", "$3000"), [over, "<think></think>\nThe transfer failed: insufficient funds."])
    assert [s.call.name for s in call_steps(traj.turns)] == ["transfer"]
    traj, _, _ = _run(LOST, [TRANSFER, CLAIMED], named_writes=False)
    assert [s.call.name for s in call_steps(traj.turns)] == ["transfer"]


def test_asked_once_per_user_turn():
    """Asked for the freeze, the (scripted) actor answers again instead: that answer stands."""
    traj, backend, env = _run(LOST, [TRANSFER, CLAIMED, CLAIMED])
    assert [s.call.name for s in call_steps(traj.turns)] == ["transfer"] and len(backend.constraints) == 3
    assert traj.final_answer == CLAIMED.split("\n", 1)[1] and traj.turns[1].withdrawn and not traj.turns[2].withdrawn
