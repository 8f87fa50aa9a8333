"""Which foreseen failures stand and which are checked (envace_demo/engine/verdict.py)."""

from envace_demo.engine.verdict import Held, RunState, answered_from_memory
from envace_demo.prompts import Conversation
from envace_demo.record import CallStep, ToolCall


def _held(certainty):
    step = CallStep(ToolCall("withdraw", {"account_id": "ACC-1005", "amount": 40}), held=True, certainty=certainty)
    return Held(turn=None, at=0, step=step, known=0)


def _memory(**call):
    return {"attempts": [{"index": 0, "calls": [{"name": "read_file", "predicted_error": True, **call}]}]}


def test_a_sure_hold_stays_pending_while_an_unsure_one_is_checked():
    state = RunState(check_given_up=True, trust_certainty=0.9)
    sure, unsure = _held(0.95), _held(0.6)
    state.pending = [sure, unsure]
    assert "withdraw" in state.set_aside(Conversation("q"), None)
    assert state.take() == [unsure] and state.pending == [sure]
    assert state.set_aside(Conversation("q"), None) is None  # the answer stands: the sure hold is trusted
    assert sure.step.trusted and not unsure.step.trusted


def test_without_a_threshold_every_hold_is_checked_and_without_checks_every_one_is_trusted():
    checking = RunState(check_given_up=True, trust_certainty=None)
    checking.pending = [_held(0.999)]
    assert checking.set_aside(Conversation("q"), None) and len(checking.take()) == 1
    trusting = RunState(check_given_up=False, trust_certainty=None)
    trusting.pending = [_held(None)]
    assert trusting.set_aside(Conversation("q"), None) is None and trusting.take() == []


def test_an_answer_rests_on_the_memory_only_for_an_unsure_foresight_never_a_fetched_read():
    shown = Conversation("Write /projects/app/README.md.", memory="Rehearsal memory …")
    trusts = RunState(check_given_up=True, trust_certainty=0.9).trusts
    assert answered_from_memory(shown, _memory(certainty=0.6), trusts)
    assert not answered_from_memory(shown, _memory(certainty=0.97), trusts)  # sure: it stands
    # A read an imagined run fetched failed for real: not a foresight to check.
    assert not answered_from_memory(shown, _memory(certainty=None, fetched=True), trusts)
    assert answered_from_memory(shown, _memory(certainty=None, fetched=False), trusts)


def test_a_rehearsal_that_did_not_parse_foresaw_nothing():
    from envace_demo import memory as memory_mod

    cut = {"code": "REHEARSAL_FAILED", "message": "the token budget before the result was closed"}
    memory = _memory(certainty=None, predicted={"error": cut})
    assert not memory_mod.foresaw(memory)  # the committed actor is not shown it
    shown = Conversation("What is the balance of ACC-1003?", memory="Rehearsal memory …")
    assert not answered_from_memory(shown, memory)
    refused = _memory(certainty=None, predicted={"error": {"code": "NOT_FOUND", "message": "no such account"}})
    assert memory_mod.foresaw(refused) and answered_from_memory(shown, refused)
