"""The episode engine.

Control-flow tests use the ``scripted`` backend (exact outputs to force each
path: failures, limits, cancellation); the end-to-end tests at the bottom run the
real embedded model in every mode.
"""

import json
import threading

import pytest

from conftest import call_text, result_text
from envace_demo.engine import Episode, EpisodeConfig, run_episode
from envace_demo.envs.registry import create
from envace_demo.errors import ConfigError
from envace_demo.events import EpisodeFinished, EpisodeStarted, Generating, MemoryReady, RehearsalFinished, TurnUpdated
from envace_demo.models.base import Sampling
from envace_demo.prompts import CURRENT_TOOL
from envace_demo.record import Trajectory, call_steps
from envace_demo.schemas import load_tools
from envace_demo.tasks import Task, find_task

BALANCE = call_text("get_account", {"account_id": "ACC-1003"})
ANSWER = "<think>done</think>\nThe balance of ACC-1003 is 310.25 USD."


def _task():
    return find_task("bank", "check-balance")


def test_none_mode_executes_for_real_and_checks_success(scripted):
    backend = scripted(actor=[BALANCE, ANSWER])
    traj = run_episode(backend, _task(), EpisodeConfig(mode="none"), create("bank"))
    assert traj.ended == "answer"
    tool_turn, final = traj.turns
    (tool_step,) = tool_turn.calls
    assert tool_step.call.name == "get_account" and tool_step.valid is True
    assert tool_step.rehearsed is None  # no rehearsal in mode none
    assert tool_step.real["balance"] == 310.25
    assert final.calls == [] and final.action.content.startswith("The balance")
    assert traj.success is True and traj.check_reasons == []
    assert traj.totals()["real_calls"] == 1


def test_parallel_mode_rehearses_then_commits_each_call_rehearsed_and_real(scripted):
    predicted = {"account_id": "ACC-1003", "owner": "Ben Okafor", "balance": 300.0}
    backend = scripted(
        actor=[BALANCE, BALANCE, ANSWER, ANSWER, BALANCE, ANSWER],  # 2 imagined, then the commit
        rehearser=[result_text(predicted)] * 3,
    )
    events = list(Episode(backend, _task(), EpisodeConfig(mode="parallel", n=2, memory_shown="always", imagined_reads="rehearse"),
                          create("bank")).run())
    assert isinstance(events[0], EpisodeStarted) and isinstance(events[-1], EpisodeFinished)
    assert sum(isinstance(e, RehearsalFinished) for e in events) == 2
    memory_events = [e for e in events if isinstance(e, MemoryReady)]
    assert "Attempt 2:" in memory_events[0].memory["text"]
    traj = events[-1].trajectory
    assert [r.ended for r in traj.rehearsals] == ["answer", "answer"]
    assert all(r.turns[0].calls[0].rehearsed == predicted and r.turns[0].calls[0].real is None for r in traj.rehearsals)
    turn = traj.turns[0]
    (step,) = turn.calls
    assert step.rehearsed == predicted and step.real["balance"] == 310.25
    assert 0.0 < step.fidelity < 1.0 and traj.fidelity == step.fidelity
    # A fidelity below the floor (0.75) withdraws the memory after the call, and says so.
    withdrawn = step.fidelity < 0.75
    assert len(memory_events) == 1 + withdrawn and ("withdrawn" in traj.memory) is withdrawn
    # The committed actor was guided by the memory: it sits in its prompt.
    assert "Rehearsal memory" in turn.actor_prompt and step.rehearser_prompt
    phases = [e.phase for e in events if isinstance(e, TurnUpdated) and e.where == "commit" and e.turn is turn]
    assert phases == ["acted", "rehearsed", "executed"]
    assert [e.call for e in events if isinstance(e, TurnUpdated) and e.where == "commit" and e.turn is turn] == [0] * 3
    assert traj.success is True


def test_sequential_attempts_see_earlier_ones(scripted):
    backend = scripted(actor=[BALANCE, ANSWER, BALANCE, ANSWER, BALANCE, ANSWER],
                       rehearser=[result_text({"balance": 1.0})] * 3)
    traj = run_episode(backend, _task(), EpisodeConfig(mode="sequential", n=2), create("bank"))
    actor_prompts = [p for p in backend.prompts if "Current tool to simulate" not in p]
    assert "Rehearsal memory" not in actor_prompts[0]
    assert "Attempt 1:" in actor_prompts[2]  # attempt 2 starts from attempt 1's memory
    assert len(traj.rehearsals) == 2 and traj.turns[0].calls[0].real is not None


def test_imagine_mode_makes_no_real_call(scripted):
    tools = load_tools([{"name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}])
    backend = scripted(actor=[call_text("lookup", {"q": "x"}), "<think>ok</think>Found it."],
                       rehearser=[result_text({"hits": 1})])
    traj = run_episode(backend, Task("t", "find x", tools), EpisodeConfig(mode="imagine", n=1))
    assert traj.turns == [] and traj.final_answer == "Found it."
    assert traj.rehearsals[0].turns[0].calls[0].rehearsed == {"hits": 1}
    assert traj.success is None


def test_parse_error_ends_the_episode_with_an_error_step(scripted):
    backend = scripted(actor=['<tool_call>\n{"name": "get_account", "arguments": {oops}\n</tool_call>'])
    traj = run_episode(backend, _task(), EpisodeConfig(mode="none"), create("bank"))
    assert traj.ended == "parse_error"
    assert traj.turns[0].error.startswith("JSON_DECODE_ERROR") and traj.turns[0].calls == []
    assert traj.success is False


def test_unknown_tool_is_an_invalid_tool_name(scripted):
    backend = scripted(actor=[call_text("rm_rf", {})])
    traj = run_episode(backend, _task(), EpisodeConfig(mode="none"), create("bank"))
    assert traj.turns[0].error.startswith("INVALID_TOOL_NAME")


def test_schema_invalid_arguments_are_flagged_and_the_real_env_answers(scripted):
    backend = scripted(actor=[call_text("get_account", {"account_id": 7}), ANSWER])
    traj = run_episode(backend, _task(), EpisodeConfig(mode="none"), create("bank"))
    step = traj.turns[0].calls[0]
    assert step.valid is False and step.validation_errors
    assert "error" in step.real  # the real environment refused it too
    assert traj.totals()["real_errors"] == 1


def test_failing_environment_gives_an_error_step_not_a_crash(scripted):
    env = create("bank")

    def explode(name, args):
        raise RuntimeError("database connection lost")

    env.execute = explode
    traj = run_episode(scripted(actor=[BALANCE]), _task(), EpisodeConfig(mode="none"), env)
    assert traj.ended == "environment_error"
    assert "database connection lost" in traj.turns[0].calls[0].error
    assert traj.turns[0].calls[0].real["error"]["code"] == "ENVIRONMENT_FAILURE"


def test_past_its_last_step_a_committed_run_answers_and_makes_no_more_calls(scripted):
    """max_steps turns that call tools, then an answer: the step budget spent, the actor is
    asked once more with no call on offer; a call it makes anyway is not run."""
    backend = scripted(actor=[BALANCE] * 2 + [ANSWER])  # the same read twice: made twice, as asked
    config = EpisodeConfig(mode="none", max_steps=2, repeated_reads_answer=False)
    traj = run_episode(backend, _task(), config, create("bank"))
    assert traj.ended == "answer" and len(traj.turns) == 3 and traj.final_answer
    assert traj.totals()["real_calls"] == 2
    backend = scripted(actor=[BALANCE] * 3)
    traj = run_episode(backend, _task(), config, create("bank"))
    assert traj.ended == "max_steps" and len(traj.turns) == 3 and traj.totals()["real_calls"] == 2
    assert "past the last step" in traj.turns[-1].error and not traj.turns[-1].calls


def test_the_answer_past_the_last_step_is_offered_no_call(scripted):
    seen = []

    class Constrained(type(scripted(actor=[]))):
        supports_constraints = True

        def generate(self, prompt, sampling, constraint=None, on_token=None, cancel=None):
            seen.append(constraint)
            return super().generate(prompt, sampling, constraint, on_token, cancel)

    backend = Constrained(actor=[BALANCE, ANSWER])
    traj = run_episode(backend, _task(), EpisodeConfig(mode="none", max_steps=1, require_first_call=True),
                       create("bank"))
    assert traj.ended == "answer" and [bool(c.tools) for c in seen] == [True, False]
    assert seen[0].require_call and not seen[1].require_call


@pytest.mark.timing
def test_wall_clock_limit_ends_the_episode(scripted):
    backend = scripted(actor=[BALANCE], delay=5.0)
    traj = run_episode(backend, _task(), EpisodeConfig(mode="none", episode_seconds=0.3), create("bank"))
    assert traj.ended == "time_limit" and traj.seconds < backend.delay  # before the generation would end


@pytest.mark.timing
def test_cancel_stops_a_running_generation(scripted):
    backend = scripted(actor=[BALANCE], delay=5.0)
    cancel = threading.Event()
    episode = Episode(backend, _task(), EpisodeConfig(mode="parallel", n=1), create("bank"), cancel=cancel)
    threading.Timer(0.3, cancel.set).start()
    events = list(episode.run())
    traj = events[-1].trajectory
    assert traj.ended == "cancelled" and traj.seconds < backend.delay  # before the generation would end
    assert traj.rehearsals[0].ended == "cancelled"


def test_no_environment_stops_after_the_first_calls_and_checks_them_bfcl_style(scripted):
    tools = load_tools([{"name": "math.factorial", "parameters": {"type": "dict", "properties": {"number": {"type": "integer"}}, "required": ["number"]}}])
    task = Task("bfcl", "factorial of 5", tools, check={"calls": [{"math.factorial": {"number": [5]}}]})
    backend = scripted(actor=[call_text("math_factorial", {"number": 5})])
    traj = run_episode(backend, task, EpisodeConfig(mode="none"))
    assert traj.ended == "no_environment" and traj.success is True


def test_the_mode_policy_says_what_each_mode_runs():
    from envace_demo.modes import mode_policy

    none, parallel, sequential, imagine = (mode_policy(m, 3) for m in ("none", "parallel", "sequential", "imagine"))
    assert (none.rehearsals, none.rehearse_calls, none.commit) == (0, False, True)
    assert (parallel.rehearsals, parallel.sequential, parallel.rehearse_calls, parallel.commit) == (3, False, True, True)
    assert sequential.sequential and sequential.rehearsals == 3
    assert (imagine.rehearsals, imagine.commit) == (3, False)


def test_bad_mode_or_n_is_a_config_error():
    with pytest.raises(ConfigError, match="mode must be one of"):
        EpisodeConfig(mode="dream")
    with pytest.raises(ConfigError, match="n must be"):
        EpisodeConfig(mode="parallel", n=0)


def test_record_round_trips_through_json(scripted):
    backend = scripted(actor=[BALANCE, ANSWER, BALANCE, ANSWER], rehearser=[result_text({"balance": 310.25})] * 2)
    traj = run_episode(backend, _task(), EpisodeConfig(mode="parallel", n=1), create("bank"))
    data = json.loads(json.dumps(traj.to_dict()))
    for key in ("version", "mode", "model", "tools", "rehearsals", "memory", "turns", "final_answer", "success"):
        assert key in data
    assert data["version"] == 3 and set(data["turns"][0]["action"]) >= {"text", "thinking", "calls"}
    assert "action" not in data["turns"][0]["calls"][0]  # a call does not repeat its turn
    again = Trajectory.from_dict(data)
    assert again.to_dict() == data


# ---- the time budget: rehearsals have a share, the committed run a reserve -----------------------

PREDICTED = result_text({"account_id": "ACC-1003", "owner": "Ben Okafor", "balance": 300.0})


def _committed_actor(text):
    """Calls get_account, then answers once a real result is in the conversation."""
    return ANSWER if '"role": "tool"' in text and "Rehearsal memory" in text else BALANCE


def test_a_run_whose_rehearsals_exceed_their_share_still_commits():
    from helpers import PacedBackend

    # Rehearsals never answer and each of their generations is slow: without a share they
    # would spend the whole limit (50 steps) and the run would commit nothing.
    backend = PacedBackend(actor=[_committed_actor] * 200, rehearser=[PREDICTED] * 200,
                           pace=lambda text, committing: 0.0 if committing else 0.25)
    # The memory stays (floor off): the scripted committed actor answers when it reads it.
    config = EpisodeConfig(mode="parallel", n=2, max_steps=50, episode_seconds=4.0, rehearsal_share=0.5,
                           memory_fidelity_floor=None, memory_shown="always", imagined_until="answer",
                           answer_without_memory=False)
    events = list(Episode(backend, _task(), config, create("bank")).run())
    traj = events[-1].trajectory
    assert [r.ended for r in traj.rehearsals] == ["rehearsal_time"] * 2 and all(r.cut for r in traj.rehearsals)
    assert all(r.turns for r in traj.rehearsals)  # they got somewhere before the cut
    memory = [e.memory for e in events if isinstance(e, MemoryReady)][0]
    assert "cut short: the rehearsal time ran out" in memory["text"] and "get_account" in memory["text"]
    assert all(a["cut"] for a in memory["attempts"])
    # The committed run had its reserve: it called for real, then answered.
    assert traj.totals()["real_calls"] == 1 and traj.turns[0].calls[0].real["balance"] == 310.25
    assert traj.ended == "answer" and traj.success is True


def _cut_by_the_rehearsal_time(n: int):
    """A parallel episode of ``n`` imagined runs whose rehearsals outlast their share of the time."""
    from helpers import PacedBackend

    slow_rehearser = PacedBackend(actor=[BALANCE] * 50 + [ANSWER] * 5, rehearser=[PREDICTED] * 50,
                                  pace=lambda text, committing: 0.6 if CURRENT_TOOL in text and not committing else 0.0)
    config = EpisodeConfig(mode="parallel", n=n, max_steps=50, episode_seconds=2.0, rehearsal_share=0.25,
                           imagined_reads="rehearse")
    return run_episode(slow_rehearser, _task(), config, create("bank"))


def test_a_call_cut_by_the_rehearsal_time_says_so_in_the_memory():
    traj = _cut_by_the_rehearsal_time(1)
    (rehearsal,) = traj.rehearsals
    last = rehearsal.turns[-1].calls[-1]
    assert rehearsal.cut and last.rehearsal_cut and last.rehearsed is None
    assert "not rehearsed (the time ran out)" in traj.memory["text"]
    assert "error: the rehearsal time ran out" not in traj.memory["text"]  # said once, on its line


def test_imagined_runs_the_time_left_unstarted_are_not_said_to_be_skipped_by_foresight():
    """The lead goes first; cut by the rehearsal time, it foresaw nothing, but the others
    were left out by the time, not by that: the memory does not say they were skipped."""
    traj = _cut_by_the_rehearsal_time(2)
    (rehearsal,) = traj.rehearsals
    assert rehearsal.cut and "others_skipped" not in traj.memory


def test_a_committed_call_whose_rehearsal_runs_long_is_still_made_for_real():
    from helpers import PacedBackend

    # The rehearsal phase answers at once; the committed call's rehearsal would take 60 s.
    # (The committed answer, given with the memory in view, is worded again without it.)
    backend = PacedBackend(actor=[ANSWER, BALANCE, ANSWER, ANSWER], rehearser=[PREDICTED],
                           pace=lambda text, committing: 60.0 if committing and CURRENT_TOOL in text else 0.0)
    traj = run_episode(backend, _task(), EpisodeConfig(mode="parallel", n=1, episode_seconds=3.0, rehearse_committed="all",
                                                       memory_shown="always"), create("bank"))
    (step,) = traj.turns[0].calls
    assert step.rehearsal_cut and step.rehearsed is None and step.fidelity == 0.0  # a miss, counted
    assert step.real["balance"] == 310.25 and step.error is None
    assert traj.ended == "answer" and traj.success is True


def test_sequential_attempts_that_cannot_start_in_the_share_are_not_begun():
    from helpers import PacedBackend

    def actor(text):  # each attempt, and the committed run: look up, then answer
        return ANSWER if '"role": "tool"' in text else BALANCE

    backend = PacedBackend(actor=[actor] * 20, rehearser=[PREDICTED] * 20,
                           pace=lambda text, committing: 0.3 if CURRENT_TOOL in text else 0.0)
    config = EpisodeConfig(mode="sequential", n=8, episode_seconds=3.0, rehearsal_share=0.3, imagined_reads="rehearse")
    traj = run_episode(backend, _task(), config, create("bank"))
    assert 1 <= len(traj.rehearsals) < 8
    assert traj.totals()["real_calls"] == 1 and traj.ended == "answer"


def test_imagine_mode_has_no_rehearsal_share_to_keep():
    from helpers import PacedBackend

    backend = PacedBackend(actor=[BALANCE, BALANCE, ANSWER], rehearser=[PREDICTED] * 2,
                           pace=lambda text, committing: 0.3)
    traj = run_episode(backend, _task(), EpisodeConfig(mode="imagine", n=1, episode_seconds=3.0, rehearsal_share=0.1),
                       create("bank"))
    assert traj.rehearsals[0].ended == "answer" and not traj.rehearsals[0].cut


def test_rehearsal_share_must_leave_time_to_both_phases():
    with pytest.raises(ConfigError, match="rehearsal_share"):
        EpisodeConfig(rehearsal_share=1.0)


# ---- writes: a real call that changes state, and one the request did not ask for ------------------


def test_a_real_write_is_marked_and_an_unrequested_one_flagged(scripted):
    deposit = call_text("deposit", {"account_id": "ACC-1003", "amount": 100.0})
    backend = scripted(actor=[BALANCE, deposit, ANSWER])
    traj = run_episode(backend, _task(), EpisodeConfig(mode="none"), create("bank"))  # asks only to read
    read, write = call_steps(traj.turns)
    assert (read.write, read.unrequested_write) == (False, False)
    assert (write.write, write.unrequested_write) == (True, True)
    asked = find_task("bank", "deposit-cash")
    traj = run_episode(scripted(actor=[call_text("deposit", {"account_id": "ACC-1001", "amount": 250.0}), ANSWER]),
                       asked, EpisodeConfig(mode="none"), create("bank"))
    (step,) = call_steps(traj.turns)
    assert step.write is True and step.unrequested_write is False  # the request asked for it


def test_writes_are_unknown_without_a_check_or_a_declaring_environment(scripted):
    deposit = call_text("deposit", {"account_id": "ACC-1003", "amount": 100.0})
    typed = Task("typed", "what is my balance?", create("bank").tools())  # a typed request: no check
    traj = run_episode(scripted(actor=[deposit, ANSWER]), typed, EpisodeConfig(mode="none"), create("bank"))
    (step,) = call_steps(traj.turns)
    assert step.write is True and step.unrequested_write is False
    traj = run_episode(scripted(actor=[deposit]), _task(), EpisodeConfig(mode="none"))  # no environment
    assert call_steps(traj.turns)[0].write is None


# ---- the real embedded model, every mode ---------------------------------------------------------

def _config(mode, n=2):
    # One committed turn: the point is every mode's mechanics on the real model, not its skill
    # (and no time limit that a busy machine would reach first).
    return EpisodeConfig(mode=mode, n=n, sampling=Sampling(seed=0, max_new_tokens=160), max_steps=1,
                         require_first_call=True, episode_seconds=1800, imagined_reads="rehearse",
                         imagined_others="always")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["none", "parallel", "sequential"])
def test_embedded_model_episode(embedded_backend, mode):
    events = list(Episode(embedded_backend, _task(), _config(mode), create("bank")).run())
    traj = events[-1].trajectory
    assert any(isinstance(e, Generating) for e in events)  # it streamed
    tool_steps = call_steps(traj.turns)
    assert tool_steps, traj.ended
    for step in tool_steps:
        assert step.valid is True  # constrained decoding: offered name, schema-valid arguments
        assert step.real is not None
        if mode != "none":
            assert step.rehearsed is not None and step.fidelity is not None
    if mode != "none":
        assert len(traj.rehearsals) == 2 and traj.memory["text"]
        _assert_first_rehearsal_prompt_is_the_training_format(traj)
    json.dumps(traj.to_dict())


def _assert_first_rehearsal_prompt_is_the_training_format(traj):
    """The rehearser's user message in the record, against the training builders' output for
    the same inputs (the response-schema line being the one allowed extra)."""
    import training_format

    turn = traj.rehearsals[0].turns[0]
    step = next(c for c in turn.calls if c.rehearsal_text is not None)
    user = step.rehearser_prompt.split("<|im_start|>user\n", 1)[1].split("<|im_end|>", 1)[0]
    tools = create("bank").tools()
    tool = next(t for t in tools if t.name == step.call.name)
    want = training_format.user_message([t.to_openai() for t in tools], {}, [{"role": "user", "content": traj.prompt}],
                                         turn.action.text, tool.to_openai(), step.call.arguments)
    line = "- response schema (JSON Schema): " + json.dumps(tool.response, ensure_ascii=True, separators=(",", ":"))
    assert user == want.removesuffix("\n\n/think") + "\n" + line + "\n\n/think"


@pytest.mark.slow
def test_embedded_model_imagines_a_pasted_schema(embedded_backend):
    tools = load_tools([{"type": "function", "function": {"name": "get_weather", "description": "Current weather of a city.",
                        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])
    traj = run_episode(embedded_backend, Task("w", "What's the weather in Oslo?", tools), _config("imagine", 1))
    step = traj.rehearsals[0].turns[0].calls[0]
    assert step.call.name == "get_weather" and isinstance(step.rehearsed, (dict, list)) and step.rehearsed


def test_calls_that_fail_validation_are_answered_by_the_engine_not_the_model(scripted):
    bad = call_text("get_account", {"account_id": "1003"})  # breaks the declared ^ACC-[0-9]{4}$
    backend = scripted(actor=[bad, ANSWER, bad, ANSWER], rehearser=[])  # the rehearser is never asked
    # Held by default (tests/test_foresight.py); here the real call is made to compare verdicts.
    config = EpisodeConfig(mode="parallel", n=1, hold_predicted_failures=False)
    traj = run_episode(backend, _task(), config, create("bank"))
    for step in (traj.rehearsals[0].turns[0].calls[0], traj.turns[0].calls[0]):
        assert step.valid is False and step.rehearsal_text is None
        error = step.rehearsed["error_tool_call"]
        assert error["code"] == "INVALID_PARAMETERS"
        assert error["details"]["errors"] == step.validation_errors and "does not match" in step.validation_errors[0]
    step = traj.turns[0].calls[0]
    assert step.real["error"]["code"] == "INVALID_PARAMETERS"  # the environment's own verdict
    assert step.fidelity >= 0.5  # same failure, worded differently


def test_a_failure_met_again_in_an_unchanged_world_is_said_by_the_engine(scripted):
    withdraw = call_text("withdraw", {"account_id": "ACC-1005", "amount": 400})  # 15.50 on the account
    balance_call = call_text("get_account", {"account_id": "ACC-1005"})
    paid = {"transaction_id": "TX-5008", "account_id": "ACC-1005", "amount": 400, "new_balance": 0}
    backend = scripted(
        # one imagined run that answers at once, then the committed run
        actor=[ANSWER, withdraw, call_text("withdraw", {"account_id": "ACC-1005", "amount": 400.0}), balance_call, withdraw,
               ANSWER],
        rehearser=[result_text(paid), result_text({"balance": 15.5}), result_text(paid)],  # three asks, not four
    )
    task = Task("w", "Withdraw $400 from ACC-1005.", create("bank").tools())
    config = EpisodeConfig(mode="parallel", n=1, max_steps=6, hold_predicted_failures=False, rehearse_committed="all")
    traj = run_episode(backend, task, config, create("bank"))
    first, again, balance, after_success = call_steps(traj.turns)
    assert first.real["error"]["code"] == "INSUFFICIENT_FUNDS" and first.rehearsal_text is not None
    # The same call (400 == 400.0), nothing in between: the engine repeats the real failure.
    assert again.rehearsal_text is None and again.rehearsed == first.real and again.fidelity == 1.0
    assert balance.real["balance"] == 15.5 and balance.rehearsal_text is not None
    # A call succeeded since: the world may have changed, so the model is asked again.
    assert after_success.rehearsal_text is not None and after_success.rehearsed == paid
    assert backend.rehearser == []


def test_repeated_failure_only_reuses_failures_of_the_same_call_with_nothing_succeeding_since():
    from envace_demo.record import ToolCall
    from envace_demo.validation import repeated_failure

    refused = {"error": {"code": "NOT_FOUND", "message": "no such file: /a"}}
    a, b = ToolCall("read_file", {"path": "/a"}), ToolCall("read_file", {"path": "/b"})
    assert repeated_failure(a, [(a, refused)]) == refused
    assert repeated_failure(a, [(a, refused), (b, {"error": {"code": "NOT_FOUND", "message": "b"}})]) == refused
    assert repeated_failure(a, [(a, refused), (b, {"content": "x"})]) is None  # a success since
    assert repeated_failure(a, [(a, {"content": "x"})]) is None  # a success is not reused
    assert repeated_failure(b, [(a, refused)]) is None  # other arguments
    assert repeated_failure(ToolCall("delete_file", {"path": "/a"}), [(a, refused)]) is None  # other tool
    assert repeated_failure(a, []) is None


def test_validation_error_names_the_failed_check():
    from envace_demo.engine import validation_error
    from envace_demo.record import ToolCall

    tool = create("bank").tools()[0]
    call = ToolCall("get_account", {"account_id": "x"})
    assert validation_error(call, None, [])["error_tool_call"]["code"] == "TOOL_NOT_AVAILABLE"
    assert validation_error(call, tool, ["account_id: bad"])["error_tool_call"]["details"] == {"errors": ["account_id: bad"]}
    assert validation_error(call, tool, []) is None  # valid: only the model can say what happens


def test_declared_formats_are_checked_for_the_badge():
    from envace_demo.engine import check_arguments

    (tool,) = load_tools([{"name": "book", "parameters": {"type": "object", "properties": {"day": {"type": "string", "format": "date"}}}}])
    assert check_arguments(tool, {"day": "2025-03-14"}) == []
    assert check_arguments(tool, {"day": "next tuesday"}) and "date" in check_arguments(tool, {"day": "x"})[0]


def test_a_step_cut_by_a_stop_says_what_it_lacks(scripted):
    cancel = threading.Event()
    predicted = {"account_id": "ACC-1003", "balance": 1.0}

    def stop_now(prompt):
        cancel.set()  # Stop pressed while the committed call is being rehearsed
        return result_text(predicted)

    # The committed turn reasons differently: its call is rehearsed anew (not taken from the rehearsal).
    again = call_text("get_account", {"account_id": "ACC-1003"}, thinking="once more")
    backend = scripted(actor=[BALANCE, ANSWER, again], rehearser=[result_text(predicted), stop_now])
    config = EpisodeConfig(mode="parallel", n=1, rehearse_committed="all", memory_shown="always", imagined_reads="rehearse")
    traj = run_episode(backend, _task(), config, create("bank"), cancel=cancel)
    assert traj.ended == "cancelled"
    ((step,),) = [t.calls for t in traj.turns]
    assert step.rehearsed is None and step.real is None
    assert step.error == "stopped before the rehearsal"


def test_a_required_first_turn_cut_by_the_token_limit_keeps_its_complete_calls(scripted):
    from dataclasses import replace

    class CutBackend(scripted):
        def generate(self, *args, **kwargs):  # every generation ends at the token limit
            return replace(super().generate(*args, **kwargs), finish_reason="length")

    cut = BALANCE + '\n<tool_call>\n{"name": "get_account", "arguments": {"acc'
    traj = run_episode(CutBackend(actor=[cut, ANSWER]), _task(),
                       EpisodeConfig(mode="none", require_first_call=True), create("bank"))
    step = traj.turns[0].calls[0]
    assert step.call.arguments == {"account_id": "ACC-1003"} and step.error is None
    assert step.real["balance"] == 310.25 and traj.ended == "max_new_tokens"


@pytest.mark.slow  # three constrained rehearsals of up to 200 tokens
def test_embedded_rehearsals_follow_the_declared_shape_and_copy_no_placeholder(embedded_backend):
    from jsonschema import Draft202012Validator

    from envace_demo.calls import parse_execution_result
    from envace_demo.models.base import Constraint
    from envace_demo.prompts import Conversation, copies_placeholder, find_placeholders, rehearser_messages, rehearser_prompt
    from envace_demo.record import ToolCall

    tools = create("bank").tools()
    (tool,) = [t for t in tools if t.name == "get_account"]
    call = ToolCall("get_account", {"account_id": "ACC-1003"})
    messages = rehearser_messages(tools, [], Conversation(_task().prompt), BALANCE, call, tool)
    prompt = rehearser_prompt(embedded_backend, messages)
    constraint = Constraint(role="rehearser", response_schema=tool.response)
    gens = embedded_backend.generate_many([prompt] * 3, Sampling(seed=0, max_new_tokens=200), [constraint] * 3)
    for gen in gens:
        value, problem = parse_execution_result(gen.text)
        assert problem is None, gen.text
        assert Draft202012Validator(tool.response).is_valid(value), gen.text
        assert copies_placeholder(value, find_placeholders(prompt.text)) == [], gen.text


def test_a_visitors_earlier_reads_are_the_rehearsers_few_shot_in_a_later_episode(scripted):
    """Reads made before any write hold in the fresh state every episode starts from."""
    from envace_demo.engine import known_reads

    tools = create("bank").tools()
    read = call_text("get_account", {"account_id": "ACC-1003"})
    write = call_text("deposit", {"account_id": "ACC-1003", "amount": 5})
    first = run_episode(scripted(actor=[read, write, read, "Done."]), Task("t", "Balance, then deposit 5", tools,
                        env="bank"), EpisodeConfig(mode="none", max_steps=4), create("bank"))
    known = known_reads(first)
    assert [c.name for c, _ in known] == ["get_account"]  # the read after the write is not kept
    assert known[0][1]["balance"] == 310.25

    config = EpisodeConfig(mode="parallel", n=1, max_steps=1, known_results=tuple(known), imagined_reads="rehearse")
    backend = scripted(actor=[read, read], rehearser=[result_text({"balance": 310.25})] * 2)
    traj = run_episode(backend, Task("t", "Balance?", tools, env="bank"), config, create("bank"))
    step = traj.rehearsals[0].turns[0].calls[0]
    user = json.loads(step.rehearser_prompt)["messages"][1]["content"]
    few_shot = user.split("Current conversation history:")[0]
    assert 'Tool name:\nget_account\nTool arguments:\n{\n"account_id": "ACC-1003"\n}' in few_shot
    assert '"balance": 310.25' in few_shot


def test_a_committed_call_in_a_rehearsed_prompt_takes_the_rehearsal_s_prediction(scripted):
    """The same call in the same rehearser prompt, byte for byte: the committed step shows
    what the rehearsal predicted for it, and the model is not asked again."""
    predicted = {"account_id": "ACC-1003", "owner": "Mei Lin", "balance": 300.0}
    # The committed actor's first action is the rehearsal's too (the same prompt and seed).
    backend = scripted(actor=[BALANCE, ANSWER, ANSWER], rehearser=[result_text(predicted)])
    traj = run_episode(backend, _task(), EpisodeConfig(mode="parallel", n=1, imagined_reads="rehearse"), create("bank"))
    assert traj.ended == "answer" and traj.turns[0].action_from == 0
    ((step,),) = [t.calls for t in traj.turns if t.calls]
    assert step.rehearsal_from == 0 and step.rehearsed == predicted and step.rehearse_tokens == 0
    assert step.rehearsal_text == traj.rehearsals[0].turns[0].calls[0].rehearsal_text
    assert step.real["balance"] == 310.25 and step.fidelity is not None and step.fidelity < 1
    assert sum(CURRENT_TOOL in p for p in backend.prompts) == 1  # one question, asked once
    assert Trajectory.from_dict(traj.to_dict()).turns[0].calls[0].rehearsal_from == 0


def test_the_committed_step_says_which_rehearsal_predicted_it(scripted):
    from envace_demo.ui import render

    backend = scripted(actor=[BALANCE, ANSWER, BALANCE, ANSWER], rehearser=[result_text({"balance": 1.0})])
    traj = run_episode(backend, _task(), EpisodeConfig(mode="parallel", n=1, imagined_reads="rehearse"), create("bank"))
    view = render.LiveView()
    view.trajectory = traj
    assert "predicted in rehearsal 1" in render.steps_html(view)


@pytest.mark.parametrize("adapter,offered", [(None, False), ("adapters/demo-cpu", True)])
def test_a_trained_rehearser_is_offered_the_failure_in_its_first_rehearsal(scripted, adapter, offered):
    """The rehearsal grammar (grammar.rehearsal_shape) gets the error branch for a model
    served with an adapter, before any real failure; not for the untrained one."""
    from conftest import ScriptedBackend

    class Recording(ScriptedBackend):
        supports_constraints = True

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.adapter, self.shapes, self.bounds = adapter, [], []

        def generate(self, prompt, sampling, constraint=None, **kwargs):
            if constraint is not None and constraint.role == "rehearser":
                self.shapes.append(constraint.response_schema)
                self.bounds.append(constraint.result_string)
            return super().generate(prompt, sampling, constraint=None, **kwargs)

    args = {"from_account_id": "ACC-1002", "to_account_id": "ACC-1001", "amount": 1500.0}
    refusal = {"error": {"code": "DAILY_LIMIT_EXCEEDED", "message": "account ACC-1002 can transfer 1000.00 USD more today"}}
    backend = Recording(actor=[call_text("transfer", args), "<think>x</think>\nDone."] * 2,
                        rehearser=[result_text(refusal)] * 2)
    task = find_task("bank", "transfer-over-daily-limit")
    config = EpisodeConfig(mode="parallel", n=1, max_steps=2, sampling=Sampling(max_new_tokens=64))
    traj = run_episode(backend, task, config, environment=create("bank"))
    assert backend.shapes and traj.rehearsals
    first = backend.shapes[0]
    assert ("anyOf" in first) is offered
    assert set(backend.bounds) == {96 if offered else 32}  # a trained rehearser writes longer values
    if offered:
        assert any("error" in branch.get("properties", {}) for branch in first["anyOf"])


TRANSFER = {"from_account_id": "ACC-1002", "to_account_id": "ACC-1001", "amount": 1500.0}
TRANSFER_DONE = {"transaction_id": "TX-5008", "from_account_id": "ACC-1002", "to_account_id": "ACC-1001",
                 "amount": 1500.0, "from_balance": 6900.0, "to_balance": 2750.0, "remaining_daily_limit": 0.0}


@pytest.mark.parametrize("floor", [0.5, None])
def test_a_real_refusal_of_a_rehearsed_success_withdraws_the_memory(scripted, floor):
    """The rehearsal predicted the transfer would go through; the bank refuses it. From then
    on the committed actor's prompt holds the real results alone (a small model otherwise
    sends the refused call again, as the memory shows it succeeding); the memory says where."""
    from envace_demo.ui import render

    allowed = dict(TRANSFER, amount=1000.0)
    backend = scripted(
        actor=[call_text("transfer", TRANSFER), "<think>x</think>\nDone.",  # the rehearsal
               call_text("transfer", TRANSFER), call_text("transfer", allowed), "<think>x</think>\nSent 1000."],
        # the committed call's prompt holds the accounts read first: it is rehearsed anew
        rehearser=[result_text(TRANSFER_DONE), result_text(TRANSFER_DONE), result_text(dict(TRANSFER_DONE, amount=1000.0))],
    )
    task = find_task("bank", "transfer-over-daily-limit")
    config = EpisodeConfig(mode="parallel", n=1, max_steps=3, memory_fidelity_floor=floor, memory_shown="always",
                           imagined_until="answer")
    events = list(Episode(backend, task, config, create("bank")).run())
    traj = events[-1].trajectory
    first, second = (t for t in traj.turns if t.calls)
    assert first.calls[0].real["error"]["code"] == "DAILY_LIMIT_EXCEEDED"
    assert "Rehearsal memory" in first.actor_prompt
    memories = [e.memory for e in events if isinstance(e, MemoryReady)]
    if floor is None:
        assert "Rehearsal memory" in second.actor_prompt and "withdrawn" not in traj.memory
        assert len(memories) == 1
        return
    assert "Rehearsal memory" not in second.actor_prompt
    mark = traj.memory["withdrawn"]
    assert mark["turn"] == first.index and mark["call"] == "transfer" and "DAILY_LIMIT_EXCEEDED" in mark["why"]
    assert len(memories) == 2 and memories[-1]["withdrawn"] == mark  # the live view hears of it
    assert second.calls[0].real["amount"] == 1000.0 and traj.success is True
    view = render.LiveView()
    view.trajectory = Trajectory.from_dict(traj.to_dict())
    assert "withdrawn here" in render.steps_html(view) and "withdrawn" in render.memory_html(view.trajectory.memory)


def test_the_cli_says_where_the_memory_was_withdrawn(scripted):
    import io

    from envace_demo.cli.episodes import _run_task

    backend = scripted(
        actor=[call_text("transfer", TRANSFER), "<think>x</think>\nDone.", call_text("transfer", TRANSFER),
               "<think>x</think>\nRefused."],
        rehearser=[result_text(TRANSFER_DONE)] * 2,
    )
    out = io.StringIO()
    task = find_task("bank", "transfer-over-daily-limit")
    _run_task(backend, task, EpisodeConfig(mode="parallel", n=1, max_steps=2, memory_shown="always",
                                                      imagined_until="answer"), out=out, environment=create("bank"))
    text = out.getvalue()
    assert text.count("--- rehearsal memory ---") == 1
    assert "[commit] rehearsal memory withdrawn: a success was rehearsed; the real call failed (DAILY_LIMIT_EXCEEDED)" in text


def test_the_memory_fidelity_floor_is_a_share():
    with pytest.raises(ConfigError, match="memory_fidelity_floor"):
        EpisodeConfig(memory_fidelity_floor=1.5)
