"""BFCL v4 multi-turn end to end: the entries as conversation tasks, their live backends,
the decoded form scored by BFCL's own multi_turn_checker, and the oracle backend that
replays the ground truth through the whole harness. No model."""

from __future__ import annotations

import ast
import json
from dataclasses import fields
from types import SimpleNamespace as NS

import pytest

pytest.importorskip("bfcl_eval", reason="bfcl-eval is installed by `make setup` (--no-deps)")

from envace_demo import bfcl_multi
from envace_demo.bfcl_multi import data, paper, scoring
from envace_demo.bfcl_multi.environment import EXECUTION_ERROR, BFCLMultiTurnEnvironment
from envace_demo.bfcl_multi.oracle import ANSWER, OracleBackend
from envace_demo.calls import parse_action, parse_execution_result
from envace_demo.engine import Episode, EpisodeConfig
from envace_demo.envs.registry import open_environment
from envace_demo.errors import ModelError, TaskError
from envace_demo.events import EpisodeFinished
from envace_demo.models.base import Prompt, Sampling
from envace_demo.prompts import rehearser_messages, Conversation
from envace_demo.record import CallStep, ToolCall, Turn
from envace_demo.tasks import Task

BASE0, MISS0 = "multi_turn_base_0", "multi_turn_miss_func_0"


# ---- entries as tasks ------------------------------------------------------------------------------


def test_the_four_categories_load_with_their_ground_truth():
    for category in data.CATEGORIES:
        ids = data.entry_ids(category)
        assert len(ids) == 200 and ids[0] == f"multi_turn_{category}_0"
    entry = data.entry(BASE0)
    assert entry["involved_classes"] == ["TwitterAPI", "GorillaFileSystem"]
    assert len(entry["ground_truth"]) == len(entry["question"]) == 4
    assert data.entry(BASE0) is not data.entry(BASE0)  # a copy each time


def test_an_entry_becomes_a_conversation_task_over_its_function_docs():
    task = bfcl_multi.task_from_entry(BASE0)
    assert task.name == BASE0 and task.env == "bfcl-multi-turn:multi_turn_base_0"
    assert task.split == "heldout" and task.source == bfcl_multi.SOURCE and task.check is None
    assert task.prompt.startswith("Move 'final_report.pdf' within document directory")
    assert len(task.user_turns) == 4 and not task.added_tools
    names = {t.name for t in task.tools}
    assert {"cd", "mv", "sort", "post_tweet"} <= names and all(t.name == t.original_name for t in task.tools)
    cd = next(t for t in task.tools if t.name == "cd")
    assert cd.description.endswith(data.PYTHON_HINT)  # BFCL's language hint, as its loader adds it
    assert cd.parameters["type"] == "object" and cd.parameters["required"] == ["folder"]  # BFCL "dict" read


def test_a_miss_func_entry_holds_its_function_back_until_its_empty_turn():
    task = bfcl_multi.task_from_entry(MISS0)
    assert data.entry(MISS0)["question"][3] == []  # BFCL's empty turn: the function arrives
    assert task.user_turns[3] == bfcl_multi.ADDED_FUNCTIONS_MESSAGE
    from bfcl_eval.constants.default_prompts import DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC

    assert bfcl_multi.ADDED_FUNCTIONS_MESSAGE == DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC
    assert "sort" not in {t.name for t in task.tools}
    assert [t.name for t in task.added_tools[3]] == ["sort"]
    assert "sort" not in {t.name for t in task.tools_at(2)} and "sort" in {t.name for t in task.tools_at(3)}


def test_load_multi_turn_limits_per_category_and_refuses_unknown_ones():
    tasks = bfcl_multi.load_multi_turn(["base", "miss_param"], limit=2)
    assert [t.name for t in tasks] == ["multi_turn_base_0", "multi_turn_base_1",
                                       "multi_turn_miss_param_0", "multi_turn_miss_param_1"]
    with pytest.raises(TaskError, match="expected some of base"):
        bfcl_multi.load_multi_turn(["web_search"])


def test_suite_specs_and_eval_tasks():
    assert bfcl_multi.parse_suite("bfcl-multi-turn") == data.CATEGORIES
    assert bfcl_multi.parse_suite("bfcl-multi-turn:base, miss_func") == ("base", "miss_func")
    with pytest.raises(TaskError, match="--suite"):
        bfcl_multi.parse_suite("bfcl-live")
    (etask,) = bfcl_multi.suite_tasks("bfcl-multi-turn:miss_func", limit=1)
    assert etask.task_id == "bfcl_multi_turn:multi_turn_miss_func_0" and etask.category == "multi_turn_miss_func"


# ---- the environment ---------------------------------------------------------------------------------


def test_the_environment_refuses_a_name_outside_the_whitelist():
    env = BFCLMultiTurnEnvironment(BASE0)
    for name in ("eval", "_load_scenario", "__init__", "get_flight_cost", "cd(folder='x')", 7):
        result = env.execute(name, {})
        assert result["error"]["code"] == "TOOL_NOT_AVAILABLE", name
    assert env.state() == BFCLMultiTurnEnvironment(BASE0).state()  # nothing ran


def test_the_environment_refuses_arguments_outside_the_schema():
    env = BFCLMultiTurnEnvironment(BASE0)
    before = env.state()
    for arguments in ({"folder": 3}, {}, {"folder": "document", "extra": 1}, ["document"]):
        result = env.execute("cd", arguments)
        assert result["error"]["code"] == "INVALID_PARAMETERS", arguments
    assert env.state() == before


def test_state_carries_from_one_call_to_the_next():
    env = open_environment("bfcl-multi-turn:multi_turn_base_0")
    assert isinstance(env, BFCLMultiTurnEnvironment)
    assert env.execute("cd", {"folder": "document"}) == {"current_working_directory": "document"}
    assert env.execute("mkdir", {"dir_name": "temp"}) == {"result": None}  # mkdir returns None
    listing = env.execute("ls", {})
    assert {"final_report.pdf", "temp"} <= set(listing["current_directory_content"])
    state = env.state()
    json.dumps(state)  # plain JSON, the file tree's parent links included
    document = state["GorillaFileSystem"]["root"]["contents"]["document"]["contents"]
    assert document["temp"]["contents"] == {} and document["temp"]["parent"] == "<Directory document>"
    env.reset()
    assert "temp" not in env.state()["GorillaFileSystem"]["root"]["contents"]["document"]["contents"]


def test_a_backend_exception_is_an_error_response(monkeypatch):
    env = BFCLMultiTurnEnvironment(BASE0)

    def broken(**_):
        raise KeyError("boom")

    monkeypatch.setattr(env.instances["GorillaFileSystem"], "cd", broken)
    result = env.execute("cd", {"folder": "document"})
    assert result["error"]["code"] == EXECUTION_ERROR and "KeyError" in result["error"]["message"]


def test_tools_are_the_offered_docs_and_the_whitelist_adds_the_held_back_ones():
    env = BFCLMultiTurnEnvironment(MISS0)
    assert "sort" not in {t.name for t in env.tools()}
    assert "sort" in {t.name for t in env.all_tools()} and env.writes("sort") is None


# ---- the decoded form and BFCL's checker ---------------------------------------------------------------


def test_call_strings_are_reprs_of_json_values_and_refuse_anything_else():
    text = scoring.call_string("echo", {"content": "it's \"x\")\n", "n": [1, 2.5, None, True]}, ["echo"])
    node = ast.parse(text, mode="eval").body
    assert node.func.id == "echo"
    assert {k.arg: ast.literal_eval(k.value) for k in node.keywords} == {"content": "it's \"x\")\n", "n": [1, 2.5, None, True]}
    assert scoring.call_string("sort", {"file_name": "a.txt"}) == "sort(file_name='a.txt')"
    for name, arguments in [("__import__", {}), ("ls", {"a=1);x": 1}), ("ls", {"a": object()}),
                            ("ls", {"a": float("nan")}), ("os.system", {}), ("ls", {"for": 1})]:
        with pytest.raises(scoring.DecodeError):
            scoring.call_string(name, arguments, ["ls", "__import__", "os.system"])
    with pytest.raises(scoring.DecodeError, match="not one of"):
        scoring.call_string("rm", {}, ["ls"])


@pytest.mark.parametrize("entry_id", [BASE0, MISS0])
def test_the_decoded_ground_truth_scores_valid_through_bfcls_checker(entry_id):
    decoded = scoring.decoded_ground_truth(entry_id)
    assert decoded[0] == [["cd(folder='document')", "mkdir(dir_name='temp')", "mv(source='final_report.pdf',destination='temp')"]]
    sort_turn = 2 if entry_id == BASE0 else 3
    assert decoded[sort_turn] == [["sort(file_name='final_report.pdf')"]]  # positional named by the signature
    if entry_id == MISS0:
        assert decoded[2] == []  # the turn before the function arrives: no call is right
    assert scoring.check_decoded(entry_id, decoded) == {"valid": True}


def test_a_result_missing_one_turns_calls_is_invalid_with_the_checkers_reason():
    decoded = scoring.decoded_ground_truth(BASE0)
    decoded[1] = []
    result = scoring.check_decoded(BASE0, decoded)
    assert result == {"valid": False, "error_type": "multi_turn:empty_turn_model_response",
                      "error_message": "Model response list is empty for turn 1"}


def test_a_wrong_argument_fails_on_the_state_and_checks_do_not_leak_between_runs():
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    before = set(vars(multi_turn_utils))
    decoded = scoring.decoded_ground_truth(BASE0)
    decoded[0] = [["cd(folder='document')", "mkdir(dir_name='tmp')", "mv(source='final_report.pdf',destination='tmp')"]]
    result = scoring.check_decoded(BASE0, decoded)
    assert not result["valid"] and result["error_type"] == "multi_turn:instance_state_mismatch"
    assert scoring.check_decoded(BASE0, scoring.decoded_ground_truth(BASE0))["valid"]  # a fresh state each check
    assert set(vars(multi_turn_utils)) == before  # BFCL's instances are removed after each check


def test_an_episode_that_stopped_before_its_last_turn_is_force_terminated():
    decoded = scoring.decoded_ground_truth(BASE0)
    result = scoring.check_decoded(BASE0, decoded, turns_reached=2)
    assert result["error_type"] == scoring.FORCE_TERMINATED and "2 of the 4" in result["error_message"]


def _turn(user_turn: int, steps: list[CallStep]) -> Turn:
    turn = Turn(index=0, action=parse_action("x"), calls=steps)
    turn.user_turn = user_turn  # the engine's field; set here as it does
    return turn


def test_decoding_a_trajectory_keeps_the_calls_that_reached_the_backends():
    cd = ToolCall("cd", {"folder": "document"})
    refused = CallStep(ToolCall("cd", {"folder": 1}), valid=False, real={"error": {"code": "INVALID_PARAMETERS"}})
    held = CallStep(ToolCall("rm", {"file_name": "x"}), valid=True, held=True)
    backend_error = CallStep(ToolCall("cat", {"file_name": "nope"}), valid=True, real={"error": "No such file"})
    traj = NS(environment="bfcl-multi-turn:" + BASE0, ended="answer", turns=[
        _turn(0, [CallStep(cd, valid=True, real={"current_working_directory": "document"}), refused, held]),
        _turn(0, []),
        _turn(2, [backend_error]),
    ])
    assert scoring.decoded_from_trajectory(traj) == [[["cd(folder='document')"]], [], [["cat(file_name='nope')"]], []]
    assert scoring.turns_reached(traj) == 3
    result = scoring.score_trajectory(traj)
    assert result["valid"] is False and result["error_type"] == scoring.FORCE_TERMINATED
    assert bfcl_multi.row_fields(traj)["bfcl"]["decoded"] == result["decoded"]
    assert bfcl_multi.row_fields(NS(environment="bank", turns=[])) == {}


# ---- the oracle -------------------------------------------------------------------------------------------


def _ask(oracle, messages, tools):
    prompt = oracle.prompt(messages, tools=[t.to_openai() for t in tools])
    return oracle.generate(prompt, Sampling()).text


@pytest.mark.parametrize("entry_id", [BASE0, MISS0])
def test_the_oracle_emits_the_ground_truth_turn_by_turn_and_it_scores_valid(entry_id):
    """The harness without the engine: each user turn's step from the oracle, run on the
    entry's environment, then decoded and judged by BFCL's checker."""
    task = bfcl_multi.task_from_entry(entry_id)
    env = open_environment(task.env)
    oracle = OracleBackend([task])
    truth = data.ground_truth_calls(entry_id)
    messages, turns = [], []
    for k, user in enumerate(task.user_turns):
        messages.append({"role": "user", "content": user})
        action = parse_action(_ask(oracle, messages, task.tools_at(k)), {t.name for t in task.tools_at(k)})
        assert action.error is None and action.calls == truth[k], k
        steps = [CallStep(c, valid=True, real=env.execute(c.name, c.arguments)) for c in action.calls]
        if steps:
            turns.append(_turn(k, steps))
            messages.append({"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in action.calls]})
            messages += [{"role": "tool", "name": s.call.name, "content": json.dumps(s.real)} for s in steps]
        answer = parse_action(_ask(oracle, messages, task.tools_at(k)))
        assert answer.calls == [] and answer.content == ANSWER
        messages.append({"role": "assistant", "content": ANSWER})
        turns.append(_turn(k, []))
    traj = NS(environment=task.env, ended="answer", turns=turns)
    assert bfcl_multi.judge(task, traj).success is True
    assert scoring.decoded_from_trajectory(traj) == scoring.decoded_ground_truth(entry_id)


def test_the_oracles_rehearsals_are_well_formed_successes():
    task = bfcl_multi.task_from_entry(BASE0)
    call = ToolCall("cd", {"folder": "document"})
    messages = rehearser_messages(task.tools, [], Conversation(task.prompt), "", call, task.tools[0])
    oracle = OracleBackend([BASE0])
    text = oracle.generate(Prompt(messages, role="rehearser"), Sampling()).text
    value, error = parse_execution_result(text)
    assert error is None and value == {"status": "ok"}


def test_the_oracle_tells_twins_apart_only_where_the_conversation_does():
    """multi_turn_base_38 and its long_context twin share their conversation and differ in
    their first turn's ground truth: unbound, the oracle refuses; bound to one, it answers."""
    task = bfcl_multi.task_from_entry("multi_turn_base_38")
    messages = [{"role": "user", "content": task.prompt}]
    with pytest.raises(ModelError, match="share this conversation"):
        _ask(OracleBackend(), messages, task.tools)
    text = _ask(OracleBackend(["multi_turn_base_38"]), messages, task.tools)
    assert parse_action(text).calls == data.ground_truth_calls("multi_turn_base_38")[0]
    with pytest.raises(ModelError, match="not a BFCL multi-turn entry"):
        _ask(OracleBackend(), [{"role": "user", "content": "hello"}], task.tools)


@pytest.mark.parametrize("mode", ["none", "parallel"])
@pytest.mark.parametrize("entry_id", [BASE0, MISS0])
def test_the_oracle_scores_through_the_engine(entry_id, mode):
    """The whole harness: the engine's conversation over the entry's user turns, the oracle
    as the model, the entry's live backends, BFCL's checker as the judge."""
    if "user_turn" not in {f.name for f in fields(Turn)}:
        pytest.skip("the engine does not run conversations yet")
    task = bfcl_multi.task_from_entry(entry_id)
    config = EpisodeConfig(mode=mode, n=1, max_steps=20)
    events = Episode(OracleBackend([task]), task, config, open_environment(task.env)).run()
    traj = next(e for e in events if isinstance(e, EpisodeFinished)).trajectory
    assert traj.ended == "answer"
    assert bfcl_multi.judge(task, traj).success is True
    assert scoring.decoded_from_trajectory(traj) == scoring.decoded_ground_truth(entry_id)
    if traj.success is not None:  # the engine defers to bfcl_multi.judge
        assert traj.success is True


def test_eval_suite_with_the_oracle_backend_writes_bfcls_verdict_on_each_row(tmp_path, capsys):
    from envace_demo.cli import main

    if "user_turn" not in {f.name for f in fields(Turn)}:
        pytest.skip("the engine does not run conversations yet")
    code = main(["eval", "--suite", "bfcl-multi-turn:base,miss_func", "--limit", "1", "--backend", "oracle",
                 "--modes", "none,sequential", "--n", "1", "--max-steps", "20", "--json", "--no-progress",
                 "--out", str(tmp_path)])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    rows = report["tasks"]
    assert {(r["task_id"], r["mode"]) for r in rows} == {
        (f"bfcl_multi_turn:{i}", m) for i in (BASE0, MISS0) for m in ("none", "sequential")}
    for row in rows:
        assert row["error"] is None and row["bfcl"]["valid"] is True, row["bfcl"]
        assert row["bfcl"]["decoded"] == scoring.decoded_ground_truth(row["task"])
        assert row["success"] in (None, True)  # True once the engine defers to bfcl_multi.judge
    assert (tmp_path / "report.md").exists()


# ---- the guard and the paper ---------------------------------------------------------------------------


def test_is_bfcl_multi_turn_catches_entries_and_their_requests():
    task = bfcl_multi.task_from_entry(BASE0)
    assert bfcl_multi.is_bfcl_multi_turn(task)
    assert bfcl_multi.is_bfcl_multi_turn(NS(name="multi_turn_long_context_7"))
    copied = Task(name="generated-1", prompt="  " + task.follow_ups[0].upper(), tools=[], env="files")
    assert bfcl_multi.is_bfcl_multi_turn(copied)  # a training task repeating an entry's request
    from envace_demo.tasks import env_tasks

    assert not any(bfcl_multi.is_bfcl_multi_turn(t) for t in env_tasks("bank"))


def test_ours_versus_the_paper_reads_the_bfcl_rows_of_a_summary():
    def row(category, mode, mean, n):
        return {"category": category, "mode": mode, "success": {"mean": mean, "n": n, "ci": None}}

    summary = {"rows": [row("multi_turn_base", "none", 0.5, 2), row("multi_turn_miss_func", "none", 0.0, 2),
                        row("multi_turn_base", "parallel", 1.0, 2), row("multi_turn_miss_func", "parallel", 0.5, 2),
                        row("overall", "none", 0.25, 4), row("bank", "none", 1.0, 1)]}
    mine = paper.ours(summary)
    assert mine["none"]["accuracy"] == 25.0 and mine["parallel"]["accuracy"] == 75.0 and mine["none"]["episodes"] == 4
    text = paper.comparison_markdown(summary, "oracle")
    assert "| none | 25.0 | 4 | 41.9 | – |" in text and "| parallel | 75.0 | 4 | 43.9 | 41.4 |" in text
    assert "| sequential | – | 0 | 42.3 | 38.8 |" in text and paper.SOURCE in text
    assert "Only 2 of BFCL's 4" in text
    assert paper.comparison_markdown({"rows": [row("bank", "none", 1.0, 1)]}) == ""


@pytest.mark.slow
def test_every_entrys_decoded_ground_truth_scores_valid():
    """All 800 entries (about half a minute): the decoded form and the checker agree with BFCL's
    ground truth everywhere."""
    for category in data.CATEGORIES:
        for entry_id in data.entry_ids(category):
            assert scoring.check_decoded(entry_id, scoring.decoded_ground_truth(entry_id)) == {"valid": True}, entry_id


def test_the_recipe_refuses_bfcl_multi_turn_entries_as_training_tasks(tmp_path):
    from envace_demo.bfcl_multi import load_multi_turn
    from envace_demo.errors import TaskError
    from envace_demo.train.data import task_set

    (entry,) = load_multi_turn(["base"], 1)
    # A task file that repeats an entry's request over the files example: still the benchmark.
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({"name": "copied", "prompt": entry.prompt, "env": "files", "check": None}) + "\n")
    with pytest.raises(TaskError, match="BFCL multi-turn entry"):
        task_set(env="files", tasks_file=path)
