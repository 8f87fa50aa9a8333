"""Keeping generated tasks apart from the example tasks held out for evaluation."""

from __future__ import annotations

import json

from envace_demo.tasks import Task, env_tasks
from envace_demo.train.generate.script import ScriptedTask


def heldout_tasks(env: str) -> list[Task]:
    return [t for t in env_tasks(env) if t.split == "heldout"]


def _signature(calls: list[tuple[str, dict]]) -> str:
    return json.dumps(sorted((n, sorted(a.items())) for n, a in calls), default=str)


def _check_calls(task: Task) -> list[tuple[str, dict]]:
    """The calls a check asks for, each argument at its first accepted value."""
    out = []
    for expected in (task.check or {}).get("includes_calls", []):
        ((name, args),) = expected.items()
        out.append((name, {k: v[0] for k, v in args.items() if v and v[0] != ""}))
    return out


def _asks_a_change(task: Task) -> bool:
    """Whether the task's state check asks for a state other than the seeded one. A check
    that nothing changed (a refusal's) is shared by every refusal on the same entity; its
    request and calls tell those tasks apart, not the check."""
    from dataclasses import replace

    from envace_demo.envs.registry import create
    from envace_demo.tasks import evaluate

    state_only = replace(task, check={"state": task.check["state"]})
    return not evaluate(state_only, [], None, create(task.env).state()).success


def overlaps_heldout(scripted: ScriptedTask, heldout: list[Task]) -> str | None:
    """Why ``scripted`` is too close to a held-out task (same request, the same calls its
    check asks for, one of those calls among its calls or context reads, or the same
    state check where that check asks for a change), or None."""
    mine = _signature([(c.name, c.arguments) for c in scripted.calls])
    shown = {_signature([(c.name, c.arguments)]) for step in scripted.steps
             for c in (step.call, *(read for read, _ in step.context))}
    prompt = " ".join(scripted.task.prompt.lower().split())
    for task in heldout:
        if " ".join(task.prompt.lower().split()) == prompt:
            return f"same request as held-out task {task.name}"
        wanted = _check_calls(task)
        if wanted and _signature(wanted) == mine:
            return f"same calls as held-out task {task.name}"
        for call in wanted:
            if _signature([call]) in shown:
                return f"shows the {call[0]} call held-out task {task.name} asks for"
        state = (task.check or {}).get("state")
        if state and state == (scripted.task.check or {}).get("state") and _asks_a_change(task):
            return f"same state check as held-out task {task.name}"
    return None
