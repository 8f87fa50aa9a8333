"""A committed turn of reads already made since the last write is not made again: the actor
answers next (``engine/acting.repeated``, ``imagined.rereads``; scripted backend)."""

from conftest import call_text
from helpers.scripted import constrained_episode
from envace_demo.engine.imagined import rereads
from envace_demo.record import CallStep, ToolCall, Turn, call_steps

READ = call_text("get_account", {"account_id": "ACC-1003"})
DEPOSIT = call_text("deposit", {"account_id": "ACC-1003", "amount": 10.0})
BALANCE = "<think></think>\nACC-1003 holds 310.25 USD."



def _run(prompt, actor, **config):
    traj, backend, _ = constrained_episode(prompt, actor, "bank", **config)
    return traj, backend


def test_a_read_made_again_is_not_made_and_the_actor_answers():
    traj, backend = _run("What is the balance of ACC-1003?", [READ, READ, BALANCE])
    assert [s.call.name for s in call_steps(traj.turns)] == ["get_account"]  # the second was never made
    assert traj.turns[1].action.calls == [ToolCall("get_account", {"account_id": "ACC-1003"})]
    assert "repeats a read" in traj.turns[1].superseded and traj.final_answer == "ACC-1003 holds 310.25 USD."
    assert backend.constraints[-1].tools == ()  # the answer, with no call on offer
    assert traj.totals()["real_calls"] == 1


def test_a_read_after_a_write_and_the_switch_are_made():
    traj, _ = _run("Deposit $10 into ACC-1003 and tell me the balance.", [READ, DEPOSIT, READ, BALANCE])
    assert [s.real is not None for s in call_steps(traj.turns)] == [True, True, True]
    traj, _ = _run("What is the balance of ACC-1003?", [READ, READ, BALANCE], repeated_reads_answer=False)
    assert [s.real is not None for s in call_steps(traj.turns)] == [True, True]


def test_rereads():
    writes = lambda name: name == "deposit"  # noqa: E731
    read, deposit = ToolCall("get_account", {"account_id": "A"}), ToolCall("deposit", {"account_id": "A"})

    def turn(call, real):
        t = Turn(index=0, user_turn=0, action=None)
        t.calls.append(CallStep(call, real=real))
        return t

    assert rereads([turn(read, {"balance": 1})], [read], writes)
    assert not rereads([turn(read, {"balance": 1}), turn(deposit, {"ok": 1})], [read], writes)
    assert not rereads([turn(read, {"error": {"code": "NOT_FOUND", "message": "x"}})], [read], writes)
    assert not rereads([turn(deposit, {"ok": 1})], [deposit], writes)  # a write is never one
    assert not rereads([turn(read, {"balance": 1})], [], writes)
