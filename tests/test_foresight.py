"""Rehearsal that helps and never hurts: a foreseen failure is held, not committed; the
rehearser reads the state a write depends on first; an answer never tells a rehearsed
value as real (scripted backend: exact outputs force each path)."""

import json

import pytest

from conftest import call_text, result_text
from helpers.scripted import sure
from envace_demo.engine import EpisodeConfig, run_episode
from envace_demo.engine.limits import DRAFT_ANSWER_CHARS
from envace_demo.envs.registry import create
from envace_demo.models.base import Sampling
from envace_demo.grounding import ungrounded, values
from envace_demo.prompts import CURRENT_TOOL, HELD_MESSAGE
from envace_demo.record import call_steps
from envace_demo.tasks import Task

WITHDRAW = call_text("withdraw", {"account_id": "ACC-1005", "amount": 40})
BALANCE = call_text("get_account", {"account_id": "ACC-1005"})
REFUSED = {"error": {"code": "INSUFFICIENT_FUNDS", "message": "ACC-1005 holds 15.50, less than 40.00"}}
PAID = {"transaction_id": "TX-5008", "account_id": "ACC-1005", "amount": 40, "new_balance": 0}


def _task(prompt="Withdraw $40 from ACC-1005."):
    return Task("w", prompt, create("bank").tools())


def test_a_trusted_foreseen_failure_is_held_and_never_run(scripted):
    backend = scripted(
        actor=["<think></think>\nNo call.", WITHDRAW, "<think></think>\nThe account holds too little: 15.50 USD."],
        rehearser=[result_text(REFUSED)],
    )
    env = create("bank")
    traj = run_episode(backend, _task(), EpisodeConfig(mode="parallel", n=1, check_given_up=False), env)
    (step,) = call_steps(traj.turns)
    assert step.held and step.real is None  # not executed
    # The rehearser read the account first, for real, and the read is on the step.
    assert step.context == [{"call": {"name": "get_account", "arguments": {"account_id": "ACC-1005"}},
                             "result": create("bank").execute("get_account", {"account_id": "ACC-1005"})}]
    assert "Tool name:\\nget_account" in step.rehearser_prompt and "15.5" in step.rehearser_prompt
    # The actor read the prediction as the call's message, then answered.
    assert "INSUFFICIENT_FUNDS" in traj.turns[1].actor_prompt
    totals = traj.totals()
    assert (totals["real_calls"], totals["real_errors"], totals["held_calls"]) == (0, 0, 1)
    assert env.state()["accounts"]["ACC-1005"]["balance"] == 15.5
    assert traj.ungrounded == []  # 15.50 came from the real read


def test_a_held_call_the_actor_gives_up_on_runs_for_real_before_the_answer(scripted):
    """The prediction changes the plan, never the verdict: with no other path taken, the
    held withdrawal runs, and the actor answers from the real refusal."""
    backend = scripted(
        actor=["<think></think>\nNo call.", WITHDRAW, "<think></think>\nThe account holds too little.",
               "<think></think>\nThe bank refused: insufficient funds."],
        rehearser=[result_text(REFUSED)],
    )
    traj = run_episode(backend, _task(), EpisodeConfig(mode="parallel", n=1), create("bank"))
    (step,) = call_steps(traj.turns)
    assert step.checked and not step.held and step.real["error"]["code"] == "INSUFFICIENT_FUNDS"
    assert step.outcome_right is True
    set_aside, final = traj.turns[1], traj.turns[2]
    assert "withdraw" in set_aside.set_aside and not set_aside.withdrawn
    # Asked again, the actor read the real refusal in place of the prediction.
    assert step.real["error"]["message"] in final.actor_prompt and HELD_MESSAGE not in final.actor_prompt
    # It told why, not how much the account holds: the tool's words follow the actor's.
    assert final.added == "The bank refused: insufficient funds."
    assert traj.final_answer.endswith(f"withdraw: INSUFFICIENT_FUNDS: {step.real['error']['message']}")
    totals = traj.totals()
    assert (totals["real_calls"], totals["real_errors"], totals["held_calls"], totals["checked_calls"]) == (1, 1, 0, 1)


def test_a_false_foreseen_failure_costs_nothing_once_checked(scripted):
    """A withdrawal the rehearser wrongly refused: the actor gave up, the check ran it, it
    went through, and the answer says so."""
    small = call_text("withdraw", {"account_id": "ACC-1005", "amount": 10})
    env = create("bank")
    backend = scripted(
        actor=["<think></think>\nNo call.", small, "<think></think>\nToo little money.", "<think></think>\nDone."],
        rehearser=[result_text(REFUSED)],
    )
    traj = run_episode(backend, _task("Withdraw $10 from ACC-1005."), EpisodeConfig(mode="parallel", n=1), env)
    (step,) = call_steps(traj.turns)
    assert step.checked and step.real["new_balance"] == 5.5 and step.outcome_right is False
    assert env.state()["accounts"]["ACC-1005"]["balance"] == 5.5 and traj.final_answer == "Done."


def test_another_path_taken_after_a_hold_is_not_second_guessed(scripted):
    """A write held for a missing directory; the actor creates it and writes again: the
    held call is moot, the answer stands."""
    write = call_text("write_file", {"path": "/plans/q3.txt", "content": "draft"})
    mkdir = call_text("create_directory", {"path": "/plans"})
    missing = {"error": {"code": "NOT_FOUND", "message": "no directory /plans"}}
    backend = scripted(
        actor=["<think></think>\nNo call.", write, mkdir, write, "<think></think>\nWritten."],
        rehearser=[result_text(missing), result_text({"path": "/plans", "created": True}),
                   result_text({"path": "/plans/q3.txt", "bytes": 5})],
    )
    env = create("files")
    traj = run_episode(backend, Task("w", "Write 'draft' to /plans/q3.txt.", env.tools()),
                       EpisodeConfig(mode="parallel", n=1, max_steps=6), env)
    held, made, written = call_steps(traj.turns)
    assert held.held and not held.checked and held.real is None
    assert made.real is not None and written.real is not None and not any(t.set_aside for t in traj.turns)
    assert traj.final_answer == "Written."


def test_a_read_foreseen_to_fail_is_never_held(scripted):
    """A read's real result is safe to fetch and is what the answer needs."""
    frozen = {"error": {"code": "ACCOUNT_FROZEN", "message": "ACC-1005 is frozen"}}
    backend = scripted(
        actor=["<think></think>\nNo call.", BALANCE, "<think></think>\nIt holds 15.50 USD."],
        rehearser=[result_text(frozen)],
    )
    traj = run_episode(backend, _task("What is the balance of ACC-1005?"),
                       EpisodeConfig(mode="parallel", n=1, rehearse_committed="all"), create("bank"))
    (step,) = call_steps(traj.turns)
    assert not step.held and step.real["balance"] == 15.5 and step.outcome_right is False


def test_the_same_call_asked_again_after_a_hold_runs_for_real(scripted):
    backend = scripted(
        actor=["<think></think>\nNo call.", WITHDRAW, WITHDRAW, "<think></think>\nRefused: insufficient funds, ACC-1005 has 15.50 USD."],
        rehearser=[result_text(REFUSED), result_text(REFUSED)],
    )
    traj = run_episode(backend, _task(), EpisodeConfig(mode="parallel", n=1), create("bank"))
    first, second = call_steps(traj.turns)
    assert first.held and not second.held
    assert second.real["error"]["code"] == "INSUFFICIENT_FUNDS" and second.outcome_right is not False


LIMIT = {"error": {"code": "DAILY_LIMIT_EXCEEDED", "message": "ACC-1005 can move 0.00 more today"}}


@pytest.mark.parametrize("foreseen, left_out", [(LIMIT, True), (REFUSED, False)])
def test_a_held_turn_the_real_call_contradicts_leaves_the_actors_history(scripted, foreseen, left_out):
    """Asked again, the held call runs; where it fails otherwise than foreseen, the actor's
    answer reads the real failure alone, not the one that never happened."""
    backend = scripted(
        actor=["<think></think>\nNo call.", WITHDRAW, WITHDRAW, "<think></think>\nRefused: insufficient funds, ACC-1005 has 15.50 USD."],
        rehearser=[result_text(foreseen), result_text(foreseen)],
    )
    traj = run_episode(backend, _task(), EpisodeConfig(mode="parallel", n=1), create("bank"))
    held, ran = traj.turns[0], traj.turns[1]
    assert held.calls[0].held and ran.calls[0].real["error"]["code"] == "INSUFFICIENT_FUNDS"
    read = [m["content"] for m in json.loads(traj.turns[2].actor_prompt)["messages"] if m["role"] == "tool"]
    assert bool(held.superseded) == left_out and held.read() != left_out
    assert len(read) == (1 if left_out else 2) and "INSUFFICIENT_FUNDS" in read[-1]
    assert not any("DAILY_LIMIT_EXCEEDED" in r for r in read)
    if left_out:
        assert "INSUFFICIENT_FUNDS" in held.superseded and "DAILY_LIMIT_EXCEEDED" in held.superseded


def test_no_hold_without_rehearsal_or_when_switched_off(scripted):
    for mode, config in (("none", {}), ("parallel", {"hold_predicted_failures": False})):
        backend = scripted(
            actor=(["<think></think>\nNo call."] if mode == "parallel" else []) + [WITHDRAW, "<think></think>\nRefused."],
            rehearser=[result_text(REFUSED)],
        )
        traj = run_episode(backend, _task(), EpisodeConfig(mode=mode, n=1, **config), create("bank"))
        (step,) = call_steps(traj.turns)
        assert not step.held and step.real["error"]["code"] == "INSUFFICIENT_FUNDS"


def test_a_predicted_success_is_executed(scripted):
    backend = scripted(
        actor=["<think></think>\nNo call.", BALANCE, "<think></think>\nIt holds 15.50 USD."],
        rehearser=[result_text({"account_id": "ACC-1005", "balance": 15.5})],
    )
    traj = run_episode(backend, _task("What is the balance of ACC-1005?"), EpisodeConfig(mode="parallel", n=1),
                       create("bank"))
    (step,) = call_steps(traj.turns)
    assert not step.held and step.real["balance"] == 15.5
    assert step.context == []  # a read depends on nothing the engine reads first


def test_an_answer_with_a_value_only_a_rehearsal_had_is_taken_back(scripted):
    predicted = {"account_id": "ACC-1005", "balance": 1250.0, "status": "active"}
    backend = scripted(
        # one imagined run (read, answer with the rehearsed balance), then the committed run
        actor=[BALANCE, "<think></think>\nIt holds 1250.00 USD.", BALANCE,
               "<think></think>\nIt holds 1250.00 USD.", "<think></think>\nIt holds 15.50 USD."],
        rehearser=[result_text(predicted), result_text(predicted)],
    )
    traj = run_episode(backend, _task("What is the balance of ACC-1005?"),
                       EpisodeConfig(mode="parallel", n=1, memory="full", memory_shown="always",
                                     answer_without_memory=False), create("bank"))
    taken_back, final = traj.turns[1], traj.turns[2]
    assert taken_back.withdrawn and "1250" in taken_back.withdrawn
    # Asked again, the actor read the real results alone: no memory in its prompt.
    assert "Rehearsal memory" in traj.turns[0].actor_prompt and "Rehearsal memory" not in final.actor_prompt
    assert traj.final_answer == "It holds 15.50 USD." and traj.ungrounded == []


READ_TODO = call_text("read_file", {"path": "/notes/todo.txt"})
WRITE_TODO = call_text("write_file", {"path": "/notes/todo.txt", "content": "- buy milk\n"})
EXISTS = {"error": {"code": "ALREADY_EXISTS", "message": "/notes/todo.txt already exists"}}


@pytest.mark.parametrize("prompt,drop,dropped", [
    ("What is on my todo list? It is in /notes/todo.txt.", True, True),
    ("What is on my todo list? It is in /notes/todo.txt.", False, False),  # the engine's choice off
    ("Write the list back to /notes/todo.txt.", True, False),  # asked for: held only when sure
])
def test_a_write_nobody_asked_for_foreseen_to_fail_is_never_made(scripted, prompt, drop, dropped):
    """A question asks for no write: one foreseen to fail, even unsurely, never runs and leaves
    the actor's history, and the actor answers from the real read."""
    backend = scripted(actor=["<think></think>\nNo call.", READ_TODO, WRITE_TODO, *["<think></think>\nBuy milk."] * 2],
                       rehearser=[sure(result_text(EXISTS), 0.6)])
    env = create("files")
    traj = run_episode(backend, Task("t", prompt, env.tools()),
                       EpisodeConfig(mode="parallel", n=1, drop_unasked_failures=drop), env)
    read, write = call_steps(traj.turns)
    assert read.real["content"].startswith("- buy milk")
    if prompt.startswith("What"):
        assert traj.final_answer == "Buy milk."
    else:  # the write was asked for: an answer that leaves its failure out gives way to the failure
        assert traj.final_answer.startswith("That did not go through: write_file failed with ALREADY_EXISTS")
        assert traj.turns[-1].reported == "Buy milk." and traj.turns[-2].withdrawn
    if dropped:
        assert write.held and write.trusted and write.real is None
        assert "did not ask for" in traj.turns[1].superseded
        # The answer read the real read alone: the dropped write is not in its prompt.
        assert traj.turns[-1].actor_prompt.count('"role": "tool"') == 1
        assert traj.totals()["real_errors"] == 0
    else:  # unsure, so run at once: the real refusal
        assert not write.held and write.unsure and write.real["error"]["code"] == "ALREADY_EXISTS"
        assert traj.totals()["real_errors"] == 1


class _SeededScript:
    """A scripted actor that answers from what its prompt shows, and the seed of each draw."""

    def __init__(self, scripted_cls):
        def actor(text):
            if '"role": "tool"' not in text:
                return BALANCE
            return "<think></think>\n" + ("With the memory." if "Rehearsal memory" in text else "From the results.")

        self.backend = scripted_cls(actor=[actor] * 8, rehearser=[result_text(PAID)] * 4)
        self.seeds: list[tuple[str, int | None]] = []
        generate = self.backend.generate

        def recorded(prompt, sampling, *args, **kwargs):
            self.seeds.append((prompt.text, sampling.seed))
            return generate(prompt, sampling, *args, **kwargs)

        self.backend.generate = recorded


@pytest.mark.parametrize("redraw", [True, False])
def test_the_answer_is_worded_without_the_memory_with_the_seed_it_had_without_rehearsal(scripted, redraw):
    """The memory chooses the calls; the answer given with it in view is set aside and drawn
    again from the conversation alone, with the committed seed that turn had: the seed an
    episode without rehearsal draws its answer with."""
    sampling = Sampling(seed=7)
    plain = _SeededScript(scripted)
    none = run_episode(plain.backend, _task("What is the balance of ACC-1005?"),
                       EpisodeConfig(mode="none", sampling=sampling, answer_what_asked=False), create("bank"))
    assert none.final_answer == "From the results."  # (it leaves out the balance: not asked again here)
    seeded = _SeededScript(scripted)
    config = EpisodeConfig(mode="parallel", n=1, memory_shown="always", sampling=sampling,
                           answer_without_memory=redraw, answer_what_asked=False)
    traj = run_episode(seeded.backend, _task("What is the balance of ACC-1005?"), config, create("bank"))
    if not redraw:
        assert traj.final_answer == "With the memory." and not any(t.set_aside for t in traj.turns)
        return
    drafted, final = traj.turns[-2], traj.turns[-1]
    assert drafted.action.content == "With the memory." and "rehearsal memory in view" in drafted.set_aside
    assert traj.final_answer == "From the results." and "Rehearsal memory" not in final.actor_prompt
    assert final.actor_prompt == none.turns[-1].actor_prompt  # the prompt without rehearsal
    # The draft and the redraw had the seed the answer had without rehearsal.
    (answer_seed,) = [seed for text, seed in plain.seeds if text == none.turns[-1].actor_prompt]
    (draft, _), (redrawn, _) = seeded.seeds[-2:]
    assert "Rehearsal memory" in draft and "Rehearsal memory" not in redrawn
    assert [seed for _, seed in seeded.seeds[-2:]] == [answer_seed, answer_seed]


def test_an_answer_that_repeats_a_rehearsed_value_twice_is_marked_ungrounded(scripted):
    predicted = {"account_id": "ACC-1005", "balance": 1250.0}
    wrong = "<think></think>\nIt holds 1250.00 USD."
    backend = scripted(actor=[BALANCE, wrong, BALANCE, wrong, wrong], rehearser=[result_text(predicted)] * 2)
    traj = run_episode(backend, _task("What is the balance of ACC-1005?"),
                       EpisodeConfig(mode="parallel", n=1, answer_what_asked=False), create("bank"))
    assert traj.ungrounded == ["1250"] and traj.final_answer == "It holds 1250.00 USD."


def test_a_held_call_shows_only_its_error_code_once_the_rehearsers_wording_is_withdrawn(scripted):
    worded = {"error": {"code": "INSUFFICIENT_FUNDS", "message": "only 3.00 left"}}
    backend = scripted(
        actor=["<think></think>\nNo call.", WITHDRAW, "<think></think>\nOnly 3.00 USD left.",
               "<think></think>\nThe bank refused: insufficient funds."],
        rehearser=[result_text(worded)],
    )
    traj = run_episode(backend, _task(), EpisodeConfig(mode="parallel", n=1, check_given_up=False), create("bank"))
    assert traj.turns[1].withdrawn and "3" in traj.turns[1].withdrawn
    assert HELD_MESSAGE in traj.turns[2].actor_prompt and "only 3.00 left" not in traj.turns[2].actor_prompt
    assert traj.ungrounded == []


def test_values_normalize_numbers_and_identifiers():
    assert values("$1,250.00 on acc-1003, then 15.50") == {"1250", "ACC-1003", "15.5"}
    assert ungrounded("1 of 2 copies", [{"available": 1, "copies": 2}], [{"available": 0, "copies": 2}]) == ["1"]
    assert ungrounded("none", [{"a": 1}], []) == []


def test_a_conversation_carries_the_state_and_rehearses_each_user_turn(scripted):
    from envace_demo.events import UserTurnStarted
    from envace_demo.engine import Episode

    deposit = call_text("deposit", {"account_id": "ACC-1003", "amount": 100})
    balance = call_text("get_account", {"account_id": "ACC-1003"})
    backend = scripted(
        actor=["<think></think>\nNo call.", deposit, "<think></think>\nDeposited.",  # user turn 1
               "<think></think>\nNo call.", balance, "<think></think>\nIt holds 410.25 USD."],  # user turn 2
        rehearser=[result_text({"transaction_id": "TX-5008", "new_balance": 410.25}),
                   result_text({"account_id": "ACC-1003", "balance": 410.25})],
    )
    task = Task("c", "Deposit $100 into ACC-1003.", create("bank").tools(), follow_ups=["What is its balance now?"])
    env = create("bank")
    events = list(Episode(backend, task, EpisodeConfig(mode="parallel", n=1, rehearse_committed="all"), env).run())
    traj = events[-1].trajectory
    assert [e.index for e in events if isinstance(e, UserTurnStarted)] == [1]
    assert [t.user_turn for t in traj.turns] == [0, 0, 1, 1]
    assert [r.user_turn for r in traj.rehearsals] == [0, 1]
    assert traj.answers == ["Deposited.", "It holds 410.25 USD."] and traj.final_answer == traj.answers[-1]
    # The second turn reads the first as it happened: the real deposit, then its answer.
    prompt = traj.turns[2].actor_prompt
    assert prompt.index("Deposit $100") < prompt.index("Deposited.") < prompt.index("What is its balance now?")
    # The state carried over: the real read sees the deposit; the rehearser's few-shot holds it.
    assert traj.turns[2].calls[0].real["balance"] == 410.25
    assert "TX-5008" in traj.turns[2].calls[0].rehearser_prompt
    assert traj.follow_ups == ["What is its balance now?"]


def test_a_follow_up_goes_on_from_the_conversation_so_far(scripted):
    from dataclasses import replace

    from envace_demo.engine import Episode

    deposit = call_text("deposit", {"account_id": "ACC-1003", "amount": 100})
    balance = call_text("get_account", {"account_id": "ACC-1003"})
    env = create("bank")
    first = Task("c", "Deposit $100 into ACC-1003.", env.tools())
    backend = scripted(actor=[deposit, "<think></think>\nDeposited."])
    before = run_episode(backend, first, EpisodeConfig(mode="none"), env)
    follow = replace(first, follow_ups=["And its balance now?"])
    backend = scripted(actor=[balance, "<think></think>\nIt holds 410.25 USD."])
    events = list(Episode(backend, follow, EpisodeConfig(mode="none"), env, previous=before).run())
    traj = events[-1].trajectory
    assert traj.answers == ["Deposited.", "It holds 410.25 USD."] and len(before.answers) == 1  # a copy
    assert [t.user_turn for t in traj.turns] == [0, 0, 1, 1]
    assert traj.turns[3].calls == [] and traj.turns[2].calls[0].real["balance"] == 410.25
    assert "Deposited." in traj.turns[2].actor_prompt


DEPOSIT = call_text("deposit", {"account_id": "ACC-1003", "amount": 100})
DEPOSITED = {"transaction_id": "TX-5008", "account_id": "ACC-1003", "amount": 100, "new_balance": 410.25}
SAID = "<think></think>\nDeposited; the balance is 410.25 USD."


def test_a_rehearsal_that_foresaw_nothing_changes_nothing(scripted):
    """Rehearsals that predict success for every call leave the committed run as a run
    without rehearsal would be: the same prompts, the same calls, the same answer."""
    task = _task("Deposit $100 into ACC-1003.")
    none = run_episode(scripted(actor=[DEPOSIT, SAID]), task, EpisodeConfig(mode="none"), create("bank"))
    # The imagined run ends once its deposit is rehearsed: the commit needs no more of it.
    backend = scripted(actor=[DEPOSIT, SAID], rehearser=[result_text(DEPOSITED)])
    traj = run_episode(backend, task, EpisodeConfig(mode="parallel", n=1), create("bank"))
    assert traj.memory["shown"] is False and traj.rehearsals[0].ended == "first_write"
    assert [t.actor_prompt for t in traj.turns] == [t.actor_prompt for t in none.turns]
    # Its first action is the imagined run's: the same prompt, and the seed it would have drawn.
    assert [t.action_from for t in traj.turns] == [0, None] and traj.turns[0].act_seconds == 0.0
    assert traj.turns[0].action.text == DEPOSIT and backend.actor == []
    assert "Rehearsal memory" not in traj.turns[0].actor_prompt
    assert traj.final_answer == none.final_answer and traj.success == none.success
    # The committed deposit took the imagined run's prediction: the same rehearser prompt
    # (the account read first, for real, in both), so the model was asked once.
    (imagined,) = call_steps(traj.rehearsals[0].turns)
    (step,) = call_steps(traj.turns)
    assert imagined.context and imagined.context == step.context
    assert step.rehearsal_from == 0 and step.rehearsed == DEPOSITED and step.real["new_balance"] == 410.25


def test_the_memory_is_shown_once_a_rehearsal_foresaw_a_failure(scripted):
    backend = scripted(
        actor=[WITHDRAW, "<think></think>\nThe account holds too little."],
        rehearser=[result_text(REFUSED)],
    )
    # trust_certainty None: any foreseen failure is shown (none is sure enough to trust).
    config = EpisodeConfig(mode="parallel", n=1, check_given_up=False, trust_certainty=None)
    traj = run_episode(backend, _task(), config, create("bank"))
    assert traj.memory["shown"] is True
    assert "predicted error INSUFFICIENT_FUNDS" in traj.turns[0].actor_prompt
    assert call_steps(traj.turns) == []  # the committed run answered from the foresight alone


def test_an_answer_from_the_memory_alone_is_set_aside_and_the_call_tried(scripted):
    """Shown a failure an imagined run foresaw, the actor answered trying nothing: asked
    again without the memory it tries the withdrawal, which is held, then checked."""
    backend = scripted(
        # asked again without the memory, its prompt is the imagined run's: it takes its withdrawal
        actor=[WITHDRAW, "<think></think>\nThe account holds too little.",
               "<think></think>\nToo little.", "<think></think>\nRefused: insufficient funds, ACC-1005 has 15.50 USD."],
        rehearser=[result_text(REFUSED)],
    )
    traj = run_episode(backend, _task(), EpisodeConfig(mode="parallel", n=1, trust_certainty=None), create("bank"))
    first, tried, checked_at, _ = traj.turns
    assert "imagined run" in first.set_aside and "Rehearsal memory" not in tried.actor_prompt
    assert tried.action_from == 0 and tried.calls[0].rehearsal_from == 0
    (step,) = call_steps(traj.turns)
    assert step.checked and step.real["error"]["code"] == "INSUFFICIENT_FUNDS"
    assert checked_at.set_aside and traj.final_answer == "Refused: insufficient funds, ACC-1005 has 15.50 USD."


def test_an_imagined_run_reads_the_real_state_only_until_it_imagines_a_write(scripted):
    backend = scripted(
        actor=[DEPOSIT, call_text("withdraw", {"account_id": "ACC-1003", "amount": 5}), "<think></think>\nDone.",
               "<think></think>\nNo."],
        rehearser=[result_text(DEPOSITED), result_text({"error": {"code": "X", "message": "m"}})],
    )
    env = create("bank")
    before = env.state()
    traj = run_episode(backend, _task("Deposit $100 into ACC-1003, then withdraw $5."),
                       EpisodeConfig(mode="parallel", n=1, imagined_until="answer", check_given_up=False,
                                     trust_certainty=None), env)
    deposit, withdraw = call_steps(traj.rehearsals[0].turns)
    assert deposit.context and deposit.context[0]["result"]["balance"] == 310.25
    # After the imagined deposit the real account no longer shows the imagined world.
    assert withdraw.context == []
    assert env.state() == before  # nothing imagined was written, and the commit wrote nothing


def test_a_committed_read_is_not_asked_of_the_rehearser_unless_an_imagined_run_answered_it(scripted):
    backend = scripted(
        actor=["<think></think>\nNo call.", BALANCE, "<think></think>\nIt holds 15.50 USD."],
        rehearser=[],
    )
    traj = run_episode(backend, _task("What is the balance of ACC-1005?"), EpisodeConfig(mode="parallel", n=1),
                       create("bank"))
    (step,) = call_steps(traj.turns)
    assert step.rehearsed is None and step.rehearser_prompt is None and step.fidelity is None
    assert step.real["balance"] == 15.5 and traj.success is not False
    asked = run_episode(
        scripted(actor=["<think></think>\nNo call.", BALANCE, "<think></think>\nIt holds 15.50 USD."],
                 rehearser=[result_text({"account_id": "ACC-1005", "balance": 15.5})]),
        _task("What is the balance of ACC-1005?"), EpisodeConfig(mode="parallel", n=1, rehearse_committed="all"),
        create("bank"),
    )
    assert call_steps(asked.turns)[0].rehearsed == {"account_id": "ACC-1005", "balance": 15.5}


def test_the_committed_actor_draws_the_seeds_of_an_episode_without_rehearsal(scripted):
    """Seeds come in one stream per phase and role: whatever the rehearsals drew, the
    committed actor's k-th generation has the seed it has without rehearsal."""
    from envace_demo.models.base import Sampling

    def seeds_of(mode, actor, rehearser=(), **values):
        backend = scripted(actor=actor, rehearser=rehearser)
        drawn = []
        generate = backend.generate

        def recording(prompt, sampling, *args, **kwargs):
            if CURRENT_TOOL not in prompt.text and "Rehearsal memory" not in prompt.text:
                drawn.append(sampling.seed)
            return generate(prompt, sampling, *args, **kwargs)

        backend.generate = recording
        config = EpisodeConfig(mode=mode, n=2, sampling=Sampling(seed=11), **values)
        run_episode(backend, _task("Deposit $100 into ACC-1003."), config, create("bank"))
        return drawn

    none = seeds_of("none", [DEPOSIT, SAID])
    # Two imagined runs in lockstep: their first actions (row 0 with the committed actor's
    # first seed, row 1 another), their answers; the commit takes row 0's action, then answers.
    parallel = seeds_of("parallel", [DEPOSIT, DEPOSIT, SAID], [result_text(DEPOSITED)] * 2, imagined_others="always")
    assert none == [11, 12]
    # Row 0 of the imagined first actions drew the committed actor's first seed, row 1 its own;
    # the commit took row 0's action and answered with the second seed, as without rehearsal.
    assert len(parallel) == 3 and parallel[0] == 11 and parallel[1] not in none and parallel[2] == 12
    # By default the lead runs alone first; foreseeing nothing, the other run never starts.
    assert seeds_of("parallel", [DEPOSIT, SAID], [result_text(DEPOSITED)]) == none


def test_the_other_imagined_runs_start_only_where_the_lead_foresaw_a_failure(scripted):
    """A lead run that foresaw nothing leaves the memory unshown: the other runs could change
    nothing, so they never start (``EpisodeConfig.imagined_others``); one that foresaw a
    failure brings them in, to find another path."""
    quiet = scripted(actor=[DEPOSIT, SAID], rehearser=[result_text(DEPOSITED)])
    traj = run_episode(quiet, _task("Deposit $100 into ACC-1003."), EpisodeConfig(mode="parallel", n=3),
                       create("bank"))
    assert len(traj.rehearsals) == 1 and traj.memory["others_skipped"] == 2 and not traj.memory["shown"]
    assert traj.success is not False and traj.n == 3
    warned = scripted(actor=[WITHDRAW, WITHDRAW, BALANCE, "<think></think>\nRefused: insufficient funds, ACC-1005 has 15.50 USD."],
                      rehearser=[result_text(REFUSED), result_text(REFUSED)])
    traj = run_episode(warned, _task(), EpisodeConfig(mode="parallel", n=2, trust_certainty=None), create("bank"))
    assert len(traj.rehearsals) == 2 and "others_skipped" not in traj.memory and traj.memory["shown"]


def test_a_greedy_rehearser_is_asked_a_question_once_when_two_imagined_runs_ask_it(scripted):
    from envace_demo.models.base import Sampling

    backend = scripted(actor=[DEPOSIT, DEPOSIT, SAID], rehearser=[result_text(DEPOSITED)])
    config = EpisodeConfig(mode="parallel", n=2, sampling=Sampling(seed=3, rehearse_temperature=0.0),
                           imagined_others="always")
    traj = run_episode(backend, _task("Deposit $100 into ACC-1003."), config, create("bank"))
    first, second = (call_steps(r.turns)[0] for r in traj.rehearsals)
    assert first.rehearsed == second.rehearsed == DEPOSITED and first.rehearser_prompt == second.rehearser_prompt
    assert sum(CURRENT_TOOL in p for p in backend.prompts) == 1  # one question, asked once
    assert call_steps(traj.turns)[0].real["new_balance"] == 410.25


def test_the_committed_run_takes_each_imagined_action_whose_prompt_came_true(scripted):
    """An imagined read is fetched for real (not rehearsed), so the next prompt is as it
    will be for real: the committed run takes that action too (the seed is the one it
    would have drawn), and asks the actor only for what the imagined run did not reach.
    The rehearser is asked about the write alone."""
    read = create("bank").execute("get_account", {"account_id": "ACC-1003"})
    backend = scripted(actor=[call_text("get_account", {"account_id": "ACC-1003"}), DEPOSIT, SAID],
                       rehearser=[result_text(DEPOSITED)])
    traj = run_episode(backend, _task("Deposit $100 into ACC-1003."), EpisodeConfig(mode="parallel", n=1),
                       create("bank"))
    fetched, deposit = call_steps(traj.rehearsals[0].turns)
    assert fetched.fetched and fetched.real == read and fetched.rehearsed is None and fetched.rehearser_prompt is None
    assert not deposit.fetched and deposit.rehearsed == DEPOSITED and deposit.real is None
    assert traj.totals()["fetched_reads"] == 1
    assert [t.action_from for t in traj.turns] == [0, 0, None]
    assert [c.call.name for c in call_steps(traj.turns)] == ["get_account", "deposit"]
    assert backend.actor == [] and backend.rehearser == []
    assert traj.final_answer == "Deposited; the balance is 410.25 USD." and traj.success is not False


def test_an_imagined_run_that_repeats_a_read_in_an_unchanged_world_ends_there(scripted):
    read = create("bank").execute("get_account", {"account_id": "ACC-1005"})
    for how, rehearser in (("fetch", []), ("rehearse", [result_text(read)])):
        backend = scripted(actor=[BALANCE, BALANCE, "<think></think>\nIt holds 15.50 USD."], rehearser=rehearser)
        config = EpisodeConfig(mode="parallel", n=1, imagined_reads=how)
        traj = run_episode(backend, _task("What is the balance of ACC-1005?"), config, create("bank"))
        (rehearsal,) = traj.rehearsals
        assert rehearsal.ended == "repeated_read" and len(call_steps(rehearsal.turns)) == 1
        assert call_steps(rehearsal.turns)[0].fetched is (how == "fetch")
        assert backend.rehearser == [] and traj.final_answer == "It holds 15.50 USD."


def _constrained(scripted, answer):
    """A scripted backend that takes grammars and answers ``answer``, and the actor
    constraints it was handed, in order."""
    backend = scripted(actor=[answer] * 3)
    backend.supports_constraints = True
    seen = []
    generate = backend.generate

    def recording(prompt, sampling, constraint=None, *args, **kwargs):
        if constraint is not None and constraint.role == "actor":
            seen.append(constraint)
        return generate(prompt, sampling, constraint, *args, **kwargs)

    backend.generate = recording
    return backend, seen


def test_an_imagined_answer_is_cut_to_a_character_only_where_a_committed_run_follows(scripted):
    """Under a grammar, the imagined runs of a mode that commits answer in one character
    (the committed actor never reads their answers); ``imagine`` mode shows its answer as
    the result, and the committed run answers in full."""
    def answer_bounds(mode, **config):
        backend, actor = _constrained(scripted, "<think></think>\nIt holds 15.50 USD.")
        run_episode(backend, _task("What is the balance of ACC-1005?"), EpisodeConfig(mode=mode, n=1, **config),
                    create("bank"))
        return [c.answer_chars for c in actor]

    assert answer_bounds("parallel") == [1, None]  # the imagined run's, then the committed run's
    assert answer_bounds("imagine") == [None]
    # With the memory in view, the committed answer is a draft worded again without it: its
    # first words only, with room for any first token (the choice of a call is left as it was).
    assert answer_bounds("parallel", memory_shown="always") == [1, DRAFT_ANSWER_CHARS, None]
    assert answer_bounds("parallel", memory_shown="always", answer_without_memory=False) == [1, None]


def test_a_setting_outside_its_choices_is_refused_by_name():
    import pytest

    from envace_demo.errors import ConfigError

    for name in ("memory", "memory_shown", "imagined_until", "rehearse_committed"):
        with pytest.raises(ConfigError, match=f"{name} must be one of .*, not 'sometimes'"):
            EpisodeConfig(**{name: "sometimes"})


def test_an_imagined_action_drawn_under_a_short_answer_grammar_is_not_taken_past_the_first_turn(scripted):
    """Under a grammar an imagined answer is one character, which shifts the odds towards a
    call: the lead run's second action (a repeated read, after its read came back real) was
    not drawn as the committed actor's would be, so the committed actor draws its own."""
    backend = scripted(actor=[BALANCE, BALANCE, "<think></think>\nIt holds 15.50 USD."])
    backend.supports_constraints = True
    config = EpisodeConfig(mode="parallel", n=1, require_first_call=True)
    traj = run_episode(backend, _task("What is the balance of ACC-1005?"), config, create("bank"))
    (rehearsal,) = traj.rehearsals
    assert rehearsal.ended == "repeated_read" and [len(t.action.calls) for t in rehearsal.turns] == [1, 1]
    assert [t.action_from for t in traj.turns] == [0, None]  # the first call (required) taken, then its own
    assert len(call_steps(traj.turns)) == 1 and traj.final_answer == "It holds 15.50 USD."


def test_only_the_lead_runs_foresight_is_shown_to_the_committed_actor(scripted):
    """The lead imagined run is the committed run's own path; a failure foreseen by another
    run (a call the committed run will not make) leaves the committed actor unread, so the
    run is the one without rehearsal."""
    other = call_text("withdraw", {"account_id": "ACC-1003", "amount": 5000})
    refused = {"error": {"code": "INSUFFICIENT_FUNDS", "message": "ACC-1003 holds 310.25"}}
    backend = scripted(actor=[DEPOSIT, other, SAID], rehearser=[result_text(DEPOSITED), result_text(refused)])
    both = EpisodeConfig(mode="parallel", n=2, imagined_others="always", trust_certainty=None)
    traj = run_episode(backend, _task("Deposit $100 into ACC-1003."), both, create("bank"))
    assert [a["calls"][0]["predicted_error"] for a in traj.memory["attempts"]] == [False, True]
    assert traj.memory["shown"] is False
    assert all("Rehearsal memory" not in t.actor_prompt for t in traj.turns if t.actor_prompt)
    assert [c.call.name for c in call_steps(traj.turns)] == ["deposit"] and traj.final_answer.startswith("Deposited")
    # The same foresight in the lead run is shown.
    lead = scripted(actor=[other, DEPOSIT, SAID, SAID], rehearser=[result_text(refused), result_text(DEPOSITED)])
    shown = run_episode(lead, _task("Deposit $100 into ACC-1003."), both, create("bank"))
    assert shown.memory["shown"] is True


def test_a_failure_the_rehearser_was_sure_of_is_trusted_and_the_write_never_runs(scripted):
    """Where rehearsal saves a real error: the rehearser gave the failure 0.95 (above
    ``trust_certainty``), so the actor's refusal stands and the failing write never runs."""
    backend = scripted(
        actor=["<think></think>\nNo call.", WITHDRAW, "<think></think>\nThe account holds too little: 15.50 USD."],
        rehearser=[sure(result_text(REFUSED), 0.95)],
    )
    env = create("bank")
    traj = run_episode(backend, _task(), EpisodeConfig(mode="parallel", n=1), env)  # check_given_up on
    (step,) = call_steps(traj.turns)
    assert (step.held, step.trusted, step.checked, step.real, step.certainty) == (True, True, False, None, 0.95)
    assert not any(t.set_aside for t in traj.turns)
    totals = traj.totals()
    assert (totals["real_calls"], totals["real_errors"], totals["trusted_calls"]) == (0, 0, 1)
    assert env.state()["accounts"]["ACC-1005"]["balance"] == 15.5
    assert traj.final_answer == "The account holds too little: 15.50 USD."


@pytest.mark.parametrize("certainty, trust", [(0.6, 0.9), (0.99, None)])
def test_a_failure_the_rehearser_was_unsure_of_is_checked(scripted, certainty, trust):
    """Below ``trust_certainty`` (or with it off) the prediction changes the plan, never the
    verdict: the held write runs once the actor gives up."""
    backend = scripted(
        actor=["<think></think>\nNo call.", WITHDRAW, "<think></think>\nThe account holds too little.",
               "<think></think>\nThe bank refused: insufficient funds."],
        rehearser=[sure(result_text(REFUSED), certainty)],
    )
    config = EpisodeConfig(mode="parallel", n=1, trust_certainty=trust, hold_certainty=None)
    traj = run_episode(backend, _task(), config, create("bank"))
    (step,) = call_steps(traj.turns)
    assert step.checked and not step.trusted and step.real["error"]["code"] == "INSUFFICIENT_FUNDS"
    assert step.certainty == certainty
    assert traj.totals()["trusted_calls"] == 0 and traj.turns[1].set_aside


@pytest.mark.parametrize("real_fails", [True, False])
def test_a_failure_foreseen_below_hold_certainty_runs_at_once_as_without_rehearsal(scripted, real_fails):
    """A wrong, unsure foresight (a $10 withdrawal from 15.50 foreseen as refused at 0.6) must
    not send the actor down another path: the call runs for real at once, and the actor goes
    on from the real result, as a run without rehearsal would; a right one costs the same
    real error a run without rehearsal makes."""
    amount = 40 if real_fails else 10
    backend = scripted(
        actor=["<think></think>\nNo call.", call_text("withdraw", {"account_id": "ACC-1005", "amount": amount}),
               "<think></think>\nDone."],
        rehearser=[sure(result_text(REFUSED), 0.6)],
    )
    env = create("bank")
    traj = run_episode(backend, _task(), EpisodeConfig(mode="parallel", n=1), env)
    (step,) = call_steps(traj.turns)
    assert step.unsure and not step.held and not step.checked and step.real is not None
    assert ("error" in step.real) is real_fails and step.outcome_right is real_fails
    assert env.state()["accounts"]["ACC-1005"]["balance"] == (15.5 if real_fails else 5.5)
    assert len(traj.turns) == 2 and traj.totals()["held_calls"] == 0


def test_a_held_call_asked_again_keeps_its_prediction_and_the_rehearser_is_not_asked_twice(scripted):
    """Nothing real happened between the hold and the same call asked again: its prediction
    is the one it had (one rehearser answer in the script: a second question would exhaust it)."""
    backend = scripted(
        actor=["<think></think>\nNo call.", WITHDRAW, WITHDRAW, "<think></think>\nRefused: insufficient funds, ACC-1005 has 15.50 USD."],
        rehearser=[result_text(REFUSED)],
    )
    traj = run_episode(backend, _task(), EpisodeConfig(mode="parallel", n=1), create("bank"))
    first, second = call_steps(traj.turns)
    assert first.held and not second.held and second.repeats_hold and not first.repeats_hold
    assert second.rehearsed == first.rehearsed and second.real["error"]["code"] == "INSUFFICIENT_FUNDS"
    assert second.outcome_right is True  # the prediction is still scored against the real call


def test_a_greedy_rehearser_answers_an_imagined_run_from_an_earlier_ones_same_question(scripted):
    """The lead foresaw a failure, so the other run starts after it; asked the same question
    in the same prompt, the greedy rehearser's answer is the lead's (one answer in the script)."""
    from envace_demo.models.base import Sampling

    backend = scripted(actor=[WITHDRAW, WITHDRAW, BALANCE, "<think></think>\nRefused: insufficient funds, ACC-1005 has 15.50 USD."],
                       rehearser=[result_text(REFUSED)])
    config = EpisodeConfig(mode="parallel", n=2, sampling=Sampling(seed=5, rehearse_temperature=0.0),
                           trust_certainty=None)
    traj = run_episode(backend, _task(), config, create("bank"))
    lead, other = (call_steps(r.turns)[0] for r in traj.rehearsals)
    assert other.rehearsal_from == 0 and other.rehearsed == lead.rehearsed and lead.rehearsal_from is None


def test_an_imagined_runs_fetched_read_is_its_rehearsers_few_shot_as_the_committed_runs_is(scripted):
    """Read, then write: the lead run fetches the read and rehearses the write with that real
    result among its few-shot, as the committed run will; so the committed write, asked in the
    same prompt, takes the lead's prediction (one rehearser answer in the script)."""
    small = call_text("withdraw", {"account_id": "ACC-1005", "amount": 10})
    paid = {"transaction_id": "TX-5008", "account_id": "ACC-1005", "amount": 10, "new_balance": 5.5}
    backend = scripted(actor=[BALANCE, small, "<think></think>\nWithdrew 10.00; 5.50 left."],
                       rehearser=[result_text(paid)])
    traj = run_episode(backend, _task("Withdraw $10 from ACC-1005."), EpisodeConfig(mode="parallel", n=1),
                       create("bank"))
    imagined = call_steps(traj.rehearsals[0].turns)
    assert imagined[0].fetched and "Tool name:\\nget_account" in imagined[1].rehearser_prompt  # its few-shot
    read, write = call_steps(traj.turns)
    assert write.rehearsal_from == 0 and write.rehearser_prompt == imagined[1].rehearser_prompt
    assert write.real["new_balance"] == 5.5


def test_an_unsure_foresight_is_not_shown_upfront_and_its_call_is_held_then_checked(scripted):
    """The lead foresaw a failure its rehearser was unsure of (no probability at all here):
    the memory stays unread and the other run never starts, so the committed run acts as
    one without rehearsal would; its call is held when it comes, then checked for real."""
    backend = scripted(
        actor=[WITHDRAW, "<think></think>\nToo little.", "<think></think>\nRefused: insufficient funds, ACC-1005 has 15.50 USD."],
        rehearser=[result_text(REFUSED)],
    )
    traj = run_episode(backend, _task(), EpisodeConfig(mode="parallel", n=2), create("bank"))
    assert traj.memory["shown"] is False and traj.memory["others_skipped"] == 1 and len(traj.rehearsals) == 1
    assert all("Rehearsal memory" not in t.actor_prompt for t in traj.turns if t.actor_prompt)
    (step,) = call_steps(traj.turns)
    assert step.checked and step.rehearsal_from == 0 and step.real["error"]["code"] == "INSUFFICIENT_FUNDS"
    assert traj.final_answer == "Refused: insufficient funds, ACC-1005 has 15.50 USD."
    # Sure of it, the lead's foresight is shown and brings the other run in.
    sure_backend = scripted(actor=[WITHDRAW, WITHDRAW, "<think></think>\nThe account holds too little."],
                            rehearser=[sure(result_text(REFUSED), 0.95), sure(result_text(REFUSED), 0.95)])
    traj = run_episode(sure_backend, _task(), EpisodeConfig(mode="parallel", n=2), create("bank"))
    assert traj.memory["shown"] is True and len(traj.rehearsals) == 2


def test_a_failed_other_path_leaves_the_hold_to_be_checked_before_the_answer_stands(scripted):
    """Held, the $40 withdrawal; the actor tried $20 instead, which failed for real: no path
    went through, so its answer is set aside and the held call is checked, as a run without
    rehearsal would have made it."""
    twenty = call_text("withdraw", {"account_id": "ACC-1005", "amount": 20})
    paid = {"transaction_id": "TX-5008", "account_id": "ACC-1005", "amount": 20, "new_balance": 0}
    backend = scripted(
        actor=["<think></think>\nNo call.", WITHDRAW, twenty, "<think></think>\nWithdrew $20.",
               "<think></think>\nRefused: insufficient funds, ACC-1005 has 15.50 USD."],
        rehearser=[result_text(REFUSED), result_text(paid)],
    )
    traj = run_episode(backend, _task(), EpisodeConfig(mode="parallel", n=1), create("bank"))
    forty, tried = call_steps(traj.turns)
    assert tried.real["error"]["code"] == "INSUFFICIENT_FUNDS" and not tried.held
    assert forty.checked and forty.real["error"]["code"] == "INSUFFICIENT_FUNDS"
    assert [t.set_aside is not None for t in traj.turns if not t.calls] == [True, False]
    assert traj.final_answer == "Refused: insufficient funds, ACC-1005 has 15.50 USD."


WITHDRAW_FIVE = call_text("withdraw", {"account_id": "ACC-1005", "amount": 5})
PAID_FIVE = {"transaction_id": "TX-5008", "account_id": "ACC-1005", "amount": 5, "new_balance": 10.5}


def _followed(scripted, rehearsed, request="Take $5 out of ACC-1005.", **config):
    """A read taken from the lead imagined run, then its write, drawn under the imagined
    runs' grammar and rehearsed as ``rehearsed``: the committed run as it ends."""
    backend = scripted(actor=[BALANCE, WITHDRAW_FIVE, "<think></think>\nDone: 5.00 USD out, 10.50 USD left."],
                       rehearser=[rehearsed])
    backend.supports_constraints = True
    env = create("bank")
    config = EpisodeConfig(mode="parallel", n=1, require_first_call=True, **config)
    return run_episode(backend, _task(request), config, env), env


def test_the_committed_run_takes_the_write_its_rehearsal_let_through(scripted):
    """The lead imagined run read the account, then withdrew (its second action, drawn where
    an answer is one character); the rehearsal let the withdrawal through. The committed
    actor, asked what the lead was asked, takes the withdrawal: the plan rehearsal tested."""
    traj, env = _followed(scripted, result_text(PAID_FIVE))
    assert [t.action_from for t in traj.turns] == [0, 0, None]
    assert [s.call.name for s in call_steps(traj.turns)] == ["get_account", "withdraw"]
    assert env.state()["accounts"]["ACC-1005"]["balance"] == 10.5
    assert traj.final_answer.startswith("Done")


def test_a_write_the_rehearsal_foresaw_failing_is_not_followed(scripted):
    """The same plan rehearsed as refused (less surely than a foresight is shown, so the
    committed actor's prompt is the lead's): the committed actor draws its own second
    action, here the answer the script has next, and nothing is withdrawn."""
    traj, env = _followed(scripted, sure(result_text(REFUSED), 0.6))
    assert [t.action_from for t in traj.turns] == [0, None]
    assert [s.call.name for s in call_steps(traj.turns)] == ["get_account"]
    assert env.state()["accounts"]["ACC-1005"]["balance"] == 15.5


def test_following_rehearsed_writes_can_be_turned_off(scripted):
    traj, env = _followed(scripted, result_text(PAID_FIVE), follow_rehearsed_writes=False)
    assert [t.action_from for t in traj.turns] == [0, None]
    assert env.state()["accounts"]["ACC-1005"]["balance"] == 15.5


@pytest.mark.parametrize("request_text", ["How much is left in ACC-1005?", "Take some money out of ACC-1005."])
def test_a_write_the_request_cannot_have_asked_for_is_not_followed(scripted, request_text):
    """The same plan let through, on a question (it asks for information) and on an
    instruction that states no amount (the $5 is the imagined run's own): the committed
    actor draws its own second action, and nothing is withdrawn."""
    # (No read made aside: "left" is in neither of the account's reads.)
    traj, env = _followed(scripted, result_text(PAID_FIVE), request=request_text, read_instead=False)
    assert [t.action_from for t in traj.turns] == [0, None]
    assert env.state()["accounts"]["ACC-1005"]["balance"] == 15.5


def test_what_a_request_can_have_asked_for():
    from envace_demo.engine.imagined import asked_for
    from envace_demo.record import Action, ToolCall

    def act(**arguments):
        return Action(text="", calls=[ToolCall("deposit", arguments)])

    writes = lambda name: name != "get_account"  # noqa: E731
    assert asked_for(act(account_id="ACC-1003", amount=75.25), "Put $75.25 into ACC-1003 as a refund.", writes)
    assert not asked_for(act(account_id="ACC-1003", amount=310.25), "Put $75.25 into ACC-1003.", writes)
    assert not asked_for(act(account_id="ACC-1003", amount=75.25), "What is the balance of ACC-1003?", writes)
    assert not asked_for(act(account_id="ACC-1003", amount=75.25), "I paid $75.25. Is ACC-1003 up to date?", writes)
    # An identifier's digits state no amount; "$1,250" states 1250.
    assert not asked_for(act(account_id="ACC-1003", amount=1003), "Deposit into ACC-1003 what it holds.", writes)
    assert asked_for(act(account_id="ACC-1003", amount=1250), "Deposit $1,250 into ACC-1003.", writes)
    # A polite instruction is not a question.
    hold = Action(text="", calls=[ToolCall("place_hold", {"book_id": "BK-019", "patron_id": "P-1100"})])
    assert asked_for(hold, "Could you place a hold on The Great Gatsby for patron P-1100?", writes)


@pytest.mark.parametrize("mode", ["none", "parallel"])
def test_a_question_offers_no_tool_that_changes_or_removes_anything(scripted, mode):
    """In a request that asks a question, the actor's grammar leaves out the writes the
    environment does not declare additive, and the additive ones the request does not name, in
    every mode: asked what was spent in February, the embedded actor had deleted the budget file."""
    def offered(prompt, **config):
        backend, actor = _constrained(scripted, "<think></think>\nFebruary: 980.")
        env = create("files")
        run_episode(backend, Task("q", prompt, env.tools()), EpisodeConfig(mode=mode, n=1, **config), env)
        return [{t.name for t in c.tools} for c in actor if c.tools]

    everything = {t.name for t in create("files").tools()}
    changes = {"write_file", "move_file", "delete_file"}
    asked = offered("How much did I spend in February? It's in /projects/budget.csv.")
    assert asked and all(n == everything - changes - {"create_directory"} for n in asked)  # the reads
    # A write that only adds stays where the question names it ("create", not "directory": a read lists one).
    named = offered("Where is the budget? Create /projects/old if it is missing.")
    assert named and all(n == everything - changes for n in named)
    assert all("create_directory" not in n for n in offered("Which directory holds the budget?"))
    # An instruction: on offer all but the changes it does not name, where it names one (``offer.unnamed_changes``;
    # then, answered without the delete it names, that call is asked for).
    told = offered("Delete /notes/todo.txt, I'm done with it.")
    unnamed = {"move_file", "write_file"}
    assert told[-1] == {"delete_file"} and all(n == everything - unnamed for n in told[:-1]) and len(told) > 1
    assert all(n == everything for n in offered("What did I spend in February?", questions_keep=False))


@pytest.mark.parametrize("amount, ruled", [(40, True), (10, False)])
def test_a_failure_the_stated_facts_rule_is_held_and_trusted_at_any_certainty(scripted, amount, ruled):
    """The engine states the facts of the real read before the rehearser decides ("amount 40 vs
    balance 15.5: over"): a failure foreseen where they show a broken rule is held and stands,
    however unsure the rehearser was of it; where they show none (10 is within), it runs at once."""
    from envace_demo.facts import breaks_rule

    from helpers.scripted import ConstrainedBackend

    backend = ConstrainedBackend(
        actor=["<think></think>\nNo call.", call_text("withdraw", {"account_id": "ACC-1005", "amount": amount}),
               "<think></think>\nThe account holds too little: 15.50 USD."],
        rehearser=[sure(result_text(REFUSED), 0.6)],
    )
    env = create("bank")
    config = EpisodeConfig(mode="parallel", n=1, rehearser_think_chars=200, repair_candidates=0)
    traj = run_episode(backend, _task(), config, env)
    (step,) = call_steps(traj.turns)
    assert step.stated_facts is not None and breaks_rule(step.stated_facts) is ruled
    assert (step.ruled, step.held, step.trusted, step.unsure) == (ruled, ruled, ruled, not ruled)
    assert env.state()["accounts"]["ACC-1005"]["balance"] == (15.5 if ruled else 5.5)
    assert breaks_rule("ACC-1004: frozen, balance 5000.0; amount 20 vs balance 5000.0: within. Outcome: ")
    assert not breaks_rule("ACC-1002: active, balance 8400.0, 1000.0 left today; amount 20 vs balance 8400.0: within")


def test_a_foreseen_reason_no_read_holds_is_checked_for_real(scripted):
    """Sure of the freeze (0.95), the rehearser also gave its reason, "stolen_card", which no
    read of the account holds: told as the reason, it would be the rehearsal's. The held call
    runs for real, and the actor answers from the real reason."""
    frozen = call_text("transfer", {"from_account_id": "ACC-1004", "to_account_id": "ACC-1001", "amount": 200})
    foreseen = {"error": {"code": "ACCOUNT_FROZEN", "message": "account ACC-1004 is frozen (stolen_card)"}}
    backend = scripted(
        actor=["<think></think>\nNo call.", frozen, "<think></think>\nACC-1004 is frozen (stolen_card).",
               "<think></think>\nThe transfer failed: account ACC-1004 is frozen (suspected_fraud)."],
        rehearser=[sure(result_text(foreseen), 0.95)],
    )
    request = "Move $200 from ACC-1004 to ACC-1001. If it can't go through, just tell me why."
    traj = run_episode(backend, _task(request), EpisodeConfig(mode="parallel", n=1), create("bank"))
    (step,) = call_steps(traj.turns)
    assert step.checked and not step.trusted and "suspected_fraud" in step.real["error"]["message"]
    assert traj.turns[1].set_aside and "stolen_card" not in traj.final_answer and "suspected_fraud" in traj.final_answer
    # The same foresight without the made-up reason stands.
    from envace_demo.engine.verdict import foreseen_unread
    assert foreseen_unread(step) == ["stolen_card"]
    step.rehearsed = {"error": {"code": "ACCOUNT_FROZEN", "message": "account ACC-1004 is frozen"}}
    assert foreseen_unread(step) == []
