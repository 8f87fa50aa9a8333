"""Tasks and their success checks.

A task is a user request over some tools, with an optional environment to commit
against and an optional check. Task files are JSONL, one task a line, either the
project's format::

    {"name": "...", "prompt": "...", "env": "bank", "check": {...}}
    {"name": "...", "prompt": "...", "tools": [...], "check": {"calls": [...]}}

or BFCL records (``question``/``function``/``ground_truth``), read as tasks with no
environment and a ``calls`` check.

Check keys (every key given must hold):
  ``state``: ``[{"path": "a.b" | ["a", "b"], "equals": V}]`` or ``{"path": ..., "exists": false}``
  over the environment's final state;
  ``includes_calls``: each expected call (BFCL ground-truth form) matches some committed call;
  ``calls``: the committed calls match exactly as BFCL judges them (``[]``: no call);
  ``answer_contains``: case-insensitive substrings of the final answer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from envace_demo.bfcl import check_calls, match_call
from envace_demo.checks import CHECK_KEYS, validate_check
from envace_demo.envs.registry import create, load_tasks
from envace_demo.errors import EnvaceError, InputError, TaskError
from envace_demo.policy import DEFAULT_POLICY, InputPolicy, read_user_file
from envace_demo.record import ToolCall
from envace_demo.schemas import Tool, check_plain_json, load_tools
from envace_demo.task import Task, Verdict

__all__ = ["CHECK_KEYS", "Task", "Verdict", "evaluate", "load_task_file", "read_jsonl", "task_from_record"]
_MISSING = object()


def task_from_record(
    record: Any,
    where: str,
    env_tools: dict[str, list[Tool]] | None = None,
    policy: InputPolicy = DEFAULT_POLICY,
) -> Task:
    """One task from a parsed JSONL record (project format or BFCL), its tools and check
    loaded under ``policy``."""
    if not isinstance(record, dict):
        raise TaskError(f"{where}: expected a JSON object, got {type(record).__name__}")
    try:
        if {"question", "function", "ground_truth"} <= set(record):
            question = record["question"]
            prompt = question[0][-1]["content"] if question and question[0] else ""
            if not isinstance(prompt, str):
                raise TaskError(f"{where}: the question's content must be text")
            policy.check_prompt(prompt, "prompt")
            _check_size("ground_truth", record["ground_truth"], where, policy)
            return Task(
                name=str(record.get("id", where)),
                prompt=prompt,
                tools=load_tools(record["function"], policy),
                check=validate_check({"calls": record["ground_truth"]}, where),
                source="bfcl",
            )
        name, prompt = record.get("name"), record.get("prompt")
        if not isinstance(name, str) or not isinstance(prompt, str) or not prompt.strip():
            raise TaskError(f"{where}: a task needs a string 'name' and a non-empty 'prompt'")
        # Every field of every task, under the same policy: the prompt, the tools, the check.
        policy.check_prompt(prompt, "prompt")
        _check_size("check", record.get("check"), where, policy)
        env = record.get("env")
        if env is not None:
            if env_tools is None:
                tools = create(env).tools()
            else:
                tools = env_tools[env]
        elif "tools" in record:
            tools = load_tools(record["tools"], policy)
        else:
            raise TaskError(f"{where}: a task needs an 'env' or 'tools'")
        follow_ups = record.get("follow_ups", [])
        if not isinstance(follow_ups, list) or not all(isinstance(u, str) and u.strip() for u in follow_ups):
            raise TaskError(f"{where}: 'follow_ups' must be a list of non-empty strings (the user's later turns)")
        for k, turn in enumerate(follow_ups):
            policy.check_prompt(turn, f"follow_ups[{k}]")
        return Task(
            name=name,
            prompt=prompt,
            tools=tools,
            env=env,
            check=validate_check(record.get("check"), where),
            split=str(record.get("split", "train")),
            source="project",
            follow_ups=list(follow_ups),
        )
    except TaskError:
        raise
    except EnvaceError as err:
        raise TaskError(f"{where}: {err}") from None
    except (KeyError, IndexError, TypeError) as err:
        raise TaskError(f"{where}: malformed record ({type(err).__name__}: {err})") from None


def _check_size(field_name: str, value: Any, where: str, policy: InputPolicy) -> None:
    """A check (or BFCL ground truth) is plain JSON no larger than a tool list may be."""
    try:
        check_plain_json(value, field_name, policy)
    except EnvaceError as err:
        raise TaskError(f"{where}: {err}") from None


def read_jsonl(
    path: Path, limit: int | None = None, policy: InputPolicy = DEFAULT_POLICY
) -> Iterable[tuple[str, Any]]:
    """(``file:line``, parsed record) for each non-blank line; at most ``limit`` records,
    and never more than the policy's ``max_tasks``."""
    name = Path(path).name
    caps = [c for c in (limit, policy.max_tasks) if c is not None]
    cap = min(caps) if caps else None
    count = 0
    try:
        text = read_user_file(path, policy, name)
    except InputError as err:
        raise TaskError(str(err)) from None
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{name}:{lineno}"
        try:
            yield where, json.loads(line)
        except json.JSONDecodeError as err:
            raise TaskError(f"{where}: invalid JSON ({err.msg} at column {err.colno})") from None
        except RecursionError:
            raise TaskError(f"{where}: nested too deeply") from None
        count += 1
        if cap is not None and count >= cap:
            return


def load_task_file(path: Path, limit: int | None = None, policy: InputPolicy = DEFAULT_POLICY) -> list[Task]:
    return [task_from_record(rec, where, policy=policy) for where, rec in read_jsonl(path, limit, policy)]


def env_tasks(env: str) -> list[Task]:
    """The example tasks of a built-in environment."""
    tools = create(env).tools()
    return [
        task_from_record({**rec, "env": env}, f"examples/{env}/tasks.jsonl[{i}]", {env: tools})
        for i, rec in enumerate(load_tasks(env))
    ]


def find_task(env: str, name: str) -> Task:
    tasks = env_tasks(env)
    for task in tasks:
        if task.name == name:
            return task
    raise TaskError(f"no task {name!r} in environment {env!r}; tasks: {', '.join(t.name for t in tasks)}")


# ---- success checks ----------------------------------------------------------------


def _lookup(state: Any, path: str | list) -> Any:
    keys = path.split(".") if isinstance(path, str) else list(path)
    node = state
    for key in keys:
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and isinstance(key, int) and -len(node) <= key < len(node):
            node = node[key]
        else:
            return _MISSING
    return node


def evaluate(task: Task, calls: list[ToolCall], answer: str | None, state: dict | None) -> Verdict | None:
    """Judge an episode; None when the task has no check."""
    check = task.check
    if not check:
        return None
    reasons: list[str] = []
    for cond in check.get("state", []):
        if state is None:
            reasons.append("state check needs an environment")
            continue
        value = _lookup(state, cond["path"])
        if "exists" in cond:
            if (value is not _MISSING) != bool(cond["exists"]):
                reasons.append(f"{cond['path']}: expected {'present' if cond['exists'] else 'absent'}")
        elif value is _MISSING or value != cond.get("equals"):
            got = "missing" if value is _MISSING else json.dumps(value)
            reasons.append(f"{cond['path']}: expected {json.dumps(cond.get('equals'))}, got {got}")
    schemas = {t.original_name: t.parameters for t in task.tools}
    for expected in check.get("includes_calls", []):
        (fname,) = expected
        if not any(match_call(c.name, c.arguments, expected, schemas.get(fname)).ok for c in calls):
            reasons.append(f"no committed call matches {json.dumps(expected)}")
    if "calls" in check:
        result = check_calls(calls, check["calls"], task.tools)
        if not result.ok:
            reasons.append(result.reason)
    text = (answer or "").lower()
    for needle in check.get("answer_contains", []):
        if needle.lower() not in text:
            reasons.append(f"final answer does not mention {needle!r}")
    return Verdict(success=not reasons, reasons=reasons)
