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
    ('{"name": "x", "prompt": "p", "env": "bank", "check": {"teleport": 1}}', "tasks.jsonl:1: check.teleport: unknown key; allowed: state"),
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


# ---- checks are validated when the task is loaded (regressions: these loaded, then failed
# inside the episode or passed by iterating a string) ----------------------------------------


@pytest.mark.parametrize("check, message", [
    ({"state": [{"equals": 1}]}, "upload.jsonl:3: check.state[0].path: missing"),
    ({"state": [{"path": "a", "equals": 1, "exists": True}]}, 'check.state[0]: give exactly one of "equals" or "exists"'),
    ({"state": [{"path": ""}]}, "check.state[0].path: expected a dotted path"),
    ({"state": {"path": "a", "equals": 1}}, "check.state: Input should be a valid list"),
    ({"includes_calls": [{"a": {}, "b": {}}]}, "check.includes_calls[0]: expected one function name"),
    ({"calls": [{"f": {"x": 1}}]}, "check.calls[0]: f.x: expected a list of accepted values"),
    ({"answer_contains": "balance"}, 'check.answer_contains: expected a list of strings, e.g. ["balance"]'),
    ({"answer_contains": ["ok", 3]}, "check.answer_contains[1]: Input should be a valid string"),
])
def test_a_malformed_check_is_refused_at_load_with_its_location(check, message):
    record = {"name": "x", "prompt": "p", "env": "bank", "check": check}
    with pytest.raises(TaskError) as err:
        task_from_record(record, "upload.jsonl:3")
    assert message in str(err.value)


def test_a_valid_check_keeps_only_what_was_given():
    check = {"state": [{"path": ["f", 0], "exists": False}], "answer_contains": ["ok"], "calls": []}
    assert task_from_record({"name": "x", "prompt": "p", "env": "bank", "check": check}, "t").check == check


def test_task_files_that_are_not_utf8_name_the_line_of_the_bad_byte(tmp_path):
    f = tmp_path / "upload.jsonl"
    f.write_bytes(b'{"name": "a", "prompt": "p", "env": "bank"}\n{"name": "caf\xe9", "prompt": "p"}\n')
    with pytest.raises(TaskError, match=r"^upload.jsonl: not UTF-8 text \(byte 0xe9 at line 2, column 14\)"):
        load_task_file(f)


def test_the_policy_caps_the_tasks_read_and_the_file_size(tmp_path):
    from envace_demo.policy import InputPolicy

    f = tmp_path / "many.jsonl"
    f.write_text("".join(json.dumps({"name": f"t{i}", "prompt": "p", "env": "bank"}) + "\n" for i in range(5)))
    assert len(load_task_file(f, policy=InputPolicy(max_tasks=3))) == 3
    assert len(load_task_file(f, limit=2, policy=InputPolicy(max_tasks=3))) == 2
    with pytest.raises(TaskError, match=r"many.jsonl: too large: \d+ bytes, at most 100"):
        load_task_file(f, policy=InputPolicy(max_file_bytes=100))
