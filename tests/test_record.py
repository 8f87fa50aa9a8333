"""The trajectory record: a turn holds its calls; one description gives JSON, loading and schema."""

import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from conftest import result_text
from envace_demo import prompts, record
from envace_demo.engine import EpisodeConfig, run_episode
from envace_demo.envs.registry import create
from envace_demo.record import Trajectory, TrajectoryError, load_trajectory, record_schema
from envace_demo.tasks import find_task

# Version-1 exports: the showcase records as they were recorded before the record modelled turns.
V1_RECORDS = Path(__file__).resolve().parent / "data"
TWO_CALLS = (
    "<think>both</think>\n<tool_call>\n"
    + json.dumps({"name": "get_account", "arguments": {"account_id": "ACC-1003"}})
    + "\n</tool_call>\n<tool_call>\n"
    + json.dumps({"name": "get_account", "arguments": {"account_id": "ACC-1001"}})
    + "\n</tool_call>"
)
ANSWER = "<think>done</think>\nDone."


def _two_call_record(scripted):
    backend = scripted(actor=[TWO_CALLS, ANSWER, TWO_CALLS, ANSWER], rehearser=[result_text({"balance": 1.0})] * 4)
    # The memory shown and every committed call rehearsed: the committed run acts and rehearses anew.
    config = EpisodeConfig(mode="parallel", n=1, memory_shown="always", rehearse_committed="all", imagined_reads="rehearse")
    traj = run_episode(backend, find_task("bank", "check-balance"), config, create("bank"))
    return traj, backend


def test_a_turn_holds_its_calls_and_its_usage_is_counted_once(scripted):
    traj, _ = _two_call_record(scripted)
    calls_turn, answer = traj.turns
    assert [c.call.arguments["account_id"] for c in calls_turn.calls] == ["ACC-1003", "ACC-1001"]
    assert answer.calls == [] and answer.action.content == "Done."
    acted = sum(t.act_tokens for t in traj.turns + traj.rehearsals[0].turns)
    rehearsed = sum(c.rehearse_tokens for t in traj.turns + traj.rehearsals[0].turns for c in t.calls)
    assert traj.totals()["tokens"] == acted + rehearsed and traj.totals()["real_calls"] == 2
    exported = traj.to_dict()["turns"][0]
    assert "action" not in exported["calls"][0] and exported["action"]["calls"][1]["arguments"] == {"account_id": "ACC-1001"}


def test_the_committed_actor_sees_the_real_responses_and_the_rehearsal_the_rehearsed_ones(scripted):
    traj, backend = _two_call_record(scripted)
    answer_prompts = [p for p in backend.prompts if "Current tool to simulate" not in p][1::2]
    imagined, committed = (json.loads(p)["messages"] for p in answer_prompts)
    assert [m["content"] for m in imagined if m["role"] == "tool"] == ['{"balance": 1.0}'] * 2
    real = [json.loads(m["content"]) for m in committed if m["role"] == "tool"]
    assert [r["account_id"] for r in real] == ["ACC-1003", "ACC-1001"] and real[0]["balance"] == 310.25
    assert prompts.Turn is record.Turn  # the prompt builder reads the record's turns


def test_an_export_fits_its_schema_and_loads_back_the_same(scripted):
    traj, _ = _two_call_record(scripted)
    data = json.loads(json.dumps(traj.to_dict()))
    schema = record_schema()
    Draft202012Validator.check_schema(schema)
    assert list(Draft202012Validator(schema).iter_errors(data)) == []
    assert data["version"] == 3 and schema["properties"]["version"] == {"const": 3}
    assert load_trajectory(json.dumps(data)).to_dict() == data


@pytest.mark.parametrize("env", ["bank", "files", "library"])
def test_a_version_1_record_loads_as_turns(env):
    old = json.loads((V1_RECORDS / f"record-v1-{env}.json").read_text())
    assert old["version"] == 1
    traj = load_trajectory(old)
    steps = [s for s in old["steps"] if s["call"]]
    assert [c.call.name for c in record.call_steps(traj.turns)] == [s["call"]["name"] for s in steps]
    assert [c.real for c in record.call_steps(traj.turns)] == [s["real"] for s in steps]
    assert traj.turns[0].actor_prompt == old["steps"][0]["prompts"]["actor"]
    assert {k: traj.totals()[k] for k in old["totals"]} == old["totals"]  # the same counts, now without per-call copies of a turn
    assert Trajectory.from_dict(traj.to_dict()).to_dict() == traj.to_dict()


def test_a_version_1_turn_with_several_calls_becomes_one_turn():
    action = {"text": "t", "calls": [{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]}
    steps = [
        {"index": 0, "action": action, "call": {"name": "a", "arguments": {}}, "call_index": 0, "act_tokens": 7,
         "prompts": {"actor": "p", "rehearser": "r"}},
        {"index": 1, "action": action, "call": {"name": "b", "arguments": {}}, "call_index": 1, "act_tokens": 0},
        {"index": 2, "action": {"text": "oops", "error": "JSON_DECODE_ERROR"}, "call": None, "error": "JSON_DECODE_ERROR: x"},
    ]
    traj = load_trajectory({"version": 1, "mode": "none", "model": {}, "tools": [], "prompt": "q", "steps": steps})
    first, broken = traj.turns
    assert [c.call.name for c in first.calls] == ["a", "b"] and first.act_tokens == 7
    assert first.actor_prompt == "p" and first.calls[0].rehearser_prompt == "r" and first.calls[1].rehearser_prompt is None
    assert broken.calls == [] and broken.error == "JSON_DECODE_ERROR: x" and broken.index == 1


def test_a_record_of_an_unknown_version_is_refused_by_name():
    with pytest.raises(TrajectoryError, match=r"^record\.version: 4 is not a version this program reads \(1 to 3\)"):
        load_trajectory({"version": 4, "mode": "none", "model": {}, "tools": [], "prompt": "q"})


def test_a_version_2_record_upgrades_to_a_conversation_of_one_user_turn():
    old = {"version": 2, "mode": "none", "model": {}, "tools": [], "prompt": "q", "final_answer": "a",
           "turns": [{"index": 0, "action": {"text": "a", "content": "a"}}]}
    traj = load_trajectory(old)
    assert traj.follow_ups == [] and traj.answers == ["a"] and traj.turns[0].user_turn == 0
    assert Trajectory.from_dict(traj.to_dict()) == traj
