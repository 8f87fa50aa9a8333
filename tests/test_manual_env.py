"""The manual environment: the user types each committed call's real response.

The engine runs in one thread and blocks in ``execute``; the tests answer from
another thread (as a UI event or an API request would) or from ``on_request``
(as the CLI does).
"""

from __future__ import annotations

import threading
import time

import pytest

from conftest import call_text, result_text
from envace_demo.engine import Episode, EpisodeConfig, run_episode
from envace_demo.envs.manual import ManualEnvironment, ResponseError, parse_response
from envace_demo.events import EpisodeFinished, TurnUpdated
from envace_demo.schemas import load_tools
from envace_demo.tasks import Task

TOOLS = load_tools([{"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                           "required": ["city"]}}])
CALL = call_text("get_weather", {"city": "Oslo"})
ANSWER = "<think>ok</think>\nIt is 4 degrees in Oslo."


def _task() -> Task:
    return Task(name="w", prompt="Weather in Oslo?", tools=TOOLS)


def _answer_when_waiting(env: ManualEnvironment, response, seen: list) -> threading.Thread:
    def typist():
        while env.pending() is None:
            time.sleep(0.01)
        seen.append(env.pending())
        env.respond(response, env.pending().id)

    thread = threading.Thread(target=typist, daemon=True)
    thread.start()
    return thread


def test_a_response_typed_in_another_thread_is_the_real_response(scripted):
    env = ManualEnvironment(TOOLS, timeout=10)
    seen: list = []
    typist = _answer_when_waiting(env, '{"temperature_c": 4, "sky": "rain"}', seen)
    backend = scripted(actor=[CALL, ANSWER, CALL, ANSWER], rehearser=[result_text({"temperature_c": 5, "sky": "rain"})] * 2)
    events = list(Episode(backend, _task(), EpisodeConfig(mode="parallel", n=1), env).run())
    typist.join(1)
    traj = events[-1].trajectory
    assert isinstance(events[-1], EpisodeFinished) and traj.ended == "answer"
    turn = traj.turns[0]
    step = turn.calls[0]
    assert step.real == {"temperature_c": 4, "sky": "rain"} and step.rehearsed == {"temperature_c": 5, "sky": "rain"}
    assert 0 < step.fidelity < 1
    assert seen[0].name == "get_weather" and seen[0].arguments == {"city": "Oslo"}
    # The rehearsed response was on screen before the user had to type.
    phases = [e.phase for e in events if isinstance(e, TurnUpdated) and e.where == "commit" and e.turn is turn]
    assert phases == ["acted", "rehearsed", "executed"]
    assert traj.final_state == {"calls": [{"name": "get_weather", "arguments": {"city": "Oslo"},
                                           "response": {"temperature_c": 4, "sky": "rain"}}]}
    assert env.pending() is None


def test_on_request_can_answer_at_once(scripted):
    env = ManualEnvironment(TOOLS, timeout=5, on_request=lambda call: env.respond([1, 2], call.id))
    traj = run_episode(scripted(actor=[CALL, ANSWER]), _task(), EpisodeConfig(mode="none"), env)
    assert traj.turns[0].calls[0].real == [1, 2] and traj.ended == "answer"


def test_bad_text_is_refused_and_the_call_keeps_waiting(scripted):
    errors: list = []

    def typist(call):
        for text in ("{not json", '"sunny"'):
            try:
                env.respond(text, call.id)
                return
            except ResponseError as err:
                errors.append(str(err))

    env = ManualEnvironment(TOOLS, timeout=5, on_request=typist)
    traj = run_episode(scripted(actor=[CALL, ANSWER]), _task(), EpisodeConfig(mode="none"), env)
    assert errors and "not valid JSON" in errors[0]
    assert traj.turns[0].calls[0].real == {"result": "sunny"}  # a bare value is wrapped


@pytest.mark.timing
def test_nobody_answering_ends_the_episode_with_an_error_step(scripted):
    env = ManualEnvironment(TOOLS, timeout=0.3)
    started = time.monotonic()
    traj = run_episode(scripted(actor=[CALL]), _task(), EpisodeConfig(mode="none"), env)
    assert time.monotonic() - started < 5
    assert traj.ended == "environment_error" and "no response within 0.3 s" in traj.turns[0].calls[0].error


def test_abort_and_cancel_stop_the_wait(scripted):
    env = ManualEnvironment(TOOLS, timeout=30, on_request=lambda call: env.abort("the user gave up"))
    traj = run_episode(scripted(actor=[CALL]), _task(), EpisodeConfig(mode="none"), env)
    assert "the user gave up" in traj.turns[0].calls[0].error

    cancel = threading.Event()
    env = ManualEnvironment(TOOLS, timeout=30, cancel=cancel, on_request=lambda call: cancel.set())
    traj = run_episode(scripted(actor=[CALL]), _task(), EpisodeConfig(mode="none"), env)
    assert "cancelled while waiting" in traj.turns[0].calls[0].error


def test_responding_with_no_call_waiting_or_to_a_stale_call_is_refused():
    env = ManualEnvironment(TOOLS)
    with pytest.raises(ResponseError, match="no tool call is waiting"):
        env.respond("{}")
    stale: list = []

    def typist(call):
        stale.append(call.id)
        with pytest.raises(ResponseError, match=f"call {call.id + 7} is no longer waiting"):
            env.respond("{}", call.id + 7)
        env.respond("{}", call.id)

    env.on_request = typist
    assert env.execute("get_weather", {"city": "Oslo"}) == {}
    assert env.execute("get_weather", {"city": "Rome"}) == {}
    assert stale == [1, 2]
    env.reset()
    assert env.state() == {"calls": []}


def test_parse_response():
    assert parse_response('{"a": 1}') == {"a": 1} and parse_response("3") == {"result": 3}
    with pytest.raises(ResponseError):
        parse_response("")
