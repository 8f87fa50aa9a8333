import json

import pytest

from conftest import SHARED_BFCL, VENDORED_BFCL
from envace_demo.errors import TaskError
from envace_demo.record import ToolCall
from envace_demo.tasks import Task, env_tasks, evaluate, find_task, load_task_file, task_from_record


def test_every_example_environment_has_tasks_with_checks():
    from envace_demo.envs.registry import list_environments

    envs = list_environments()
    assert len(envs) >= 3
    for env in envs:
        tasks = env_tasks(env.name)
        assert len(tasks) >= 5
        assert all(t.check for t in tasks) and all(t.env == env.name for t in tasks)


def test_state_check_reads_dotted_and_list_paths():
    task = Task("t", "p", [], check={"state": [{"path": "a.b", "equals": 1}, {"path": ["f", "/x.txt"], "exists": False}]})
    assert evaluate(task, [], None, {"a": {"b": 1}, "f": {}}).success
    verdict = evaluate(task, [], None, {"a": {"b": 2}, "f": {"/x.txt": "hi"}})
    assert not verdict.success and len(verdict.reasons) == 2
    assert "a.b: expected 1, got 2" in verdict.reasons[0]


def test_includes_calls_and_answer_contains():
    task = find_task("bank", "check-balance")
    good = [ToolCall("get_account", {"account_id": "ACC-1003"})]
    assert evaluate(task, good, "It is 310.25 USD", {}).success
    verdict = evaluate(task, [ToolCall("get_account", {"account_id": "ACC-1001"})], "no idea", {})
    assert not verdict.success
    assert any("no committed call matches" in r for r in verdict.reasons)
    assert any("310.25" in r for r in verdict.reasons)


def test_no_check_gives_no_verdict():
    assert evaluate(Task("t", "p", []), [], "x", None) is None


def test_bfcl_records_become_tasks_with_a_calls_check():
    path = (VENDORED_BFCL if VENDORED_BFCL.exists() else SHARED_BFCL) / "bfcl_simple.jsonl"
    tasks = load_task_file(path, limit=5)
    assert len(tasks) == 5 and tasks[0].source == "bfcl"
    assert tasks[0].name == "simple_python_0" and "triangle" in tasks[0].prompt
    assert evaluate(tasks[0], [ToolCall("calculate_triangle_area", {"base": 10, "height": 5})], None, None).success
    assert not evaluate(tasks[0], [ToolCall("calculate_triangle_area", {"base": 10.0, "height": 5})], None, None).success


def test_project_format_with_inline_tools(tmp_path):
    f = tmp_path / "tasks.jsonl"
    f.write_text(json.dumps({"name": "w", "prompt": "weather?", "tools": [{"name": "get_weather", "parameters": {"type": "object", "properties": {}}}],
                             "check": {"calls": [{"get_weather": {}}]}}) + "\n")
    (task,) = load_task_file(f)
    assert task.tools[0].name == "get_weather" and task.env is None


@pytest.mark.parametrize("line, message", [
    ("{not json", "tasks.jsonl:1: invalid JSON"),
    ("[1, 2]", "tasks.jsonl:1: expected a JSON object"),
    ('{"name": "x"}', "a non-empty 'prompt'"),
    ('{"name": "x", "prompt": "p"}', "needs an 'env' or 'tools'"),
    ('{"name": "x", "prompt": "p", "env": "bank", "check": {"teleport": 1}}', "unknown key(s) ['teleport']"),
    ('{"name": "x", "prompt": "p", "env": "nowhere"}', "nowhere"),
    ('{"name": "x", "prompt": "p", "tools": [{"name": "f", "parameters": {"type": "strng"}}]}', "tasks.jsonl:1: tools[0]"),
])
def test_bad_task_lines_give_located_errors(tmp_path, line, message):
    f = tmp_path / "tasks.jsonl"
    f.write_text(line + "\n")
    with pytest.raises(TaskError) as err:
        load_task_file(f)
    assert message in str(err.value)


def test_unknown_task_name_lists_the_tasks():
    with pytest.raises(TaskError, match="check-balance"):
        find_task("bank", "nope")


def test_missing_file_is_a_task_error(tmp_path):
    with pytest.raises(TaskError, match="cannot read"):
        load_task_file(tmp_path / "absent.jsonl")
