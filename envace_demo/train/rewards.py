"""Reward: task success only (method doc §4), scored as a checklist.

The paper's judge scores a weighted checklist; here the checklist is the task's
own check, one item per condition: each ``state`` path, each ``includes_calls``
entry, the ``calls`` match as a whole, each ``answer_contains`` needle. The
episode's score is the fraction of items that hold (1.0 = the task succeeded),
and that one score goes on every generation of the episode, actor and rehearser
alike; a generation that is empty outside its reasoning loses ``empty_penalty``.

A rollout is imagined: nothing real ran. ``state`` items are judged by replaying
the rollout's calls, in order, on a fresh instance of the task's environment after
the rollout (the policy never sees those responses).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from envace_demo.record import Rehearsal, ToolCall, call_steps
from envace_demo.schemas import find_tool
from envace_demo.tasks import Task, evaluate

CHECK_KINDS = ("state", "includes_calls", "calls", "answer_contains")


@dataclass
class Score:
    value: float  # fraction of checklist items that hold, in [0, 1]
    success: bool  # every item holds
    parts: dict[str, float] = field(default_factory=dict)  # check kind -> fraction of its items that hold


def checklist(task: Task) -> list[tuple[str, dict]]:
    """(kind, one-item check) for every item of the task's check."""
    check = task.check or {}
    items: list[tuple[str, dict]] = []
    for kind in CHECK_KINDS:
        if kind not in check:
            continue
        if kind == "calls":  # an exact match of the whole call list: one item
            items.append((kind, {"calls": check["calls"]}))
        else:
            items.extend((kind, {kind: [entry]}) for entry in check[kind])
    return items


def score_episode(task: Task, calls: list[ToolCall], answer: str | None, state: dict | None) -> Score:
    """Score an episode's calls, final answer and final state against ``task``'s check."""
    items = checklist(task)
    if not items:
        return Score(0.0, False)
    held: dict[str, list[bool]] = {}
    for kind, one in items:
        verdict = evaluate(replace(task, check=one), calls, answer, state)
        held.setdefault(kind, []).append(bool(verdict and verdict.success))
    flat = [ok for oks in held.values() for ok in oks]
    parts = {kind: sum(oks) / len(oks) for kind, oks in held.items()}
    return Score(sum(flat) / len(flat), all(flat), parts)


def replay_state(task: Task, calls: list[ToolCall]) -> dict | None:
    """The state a fresh environment reaches when ``calls`` run on it; None without one."""
    if task.env is None:
        return None
    from envace_demo.envs.registry import create

    env = create(task.env)
    for call in calls:
        tool = find_tool(task.tools, call.name)
        if tool is not None:  # an unknown name changes nothing
            env.execute(tool.original_name, call.arguments)
    return env.state()


def score_rehearsal(task: Task, rehearsal: Rehearsal) -> Score:
    """The score of one imagined rollout."""
    calls = [s.call for s in call_steps(rehearsal.turns)]
    needs_state = bool((task.check or {}).get("state"))
    state = replay_state(task, calls) if needs_state else None
    return score_episode(task, calls, rehearsal.final_answer, state)


def row_reward(score: float, empty: bool, empty_penalty: float) -> float:
    return score - (empty_penalty if empty else 0.0)


def trainable(task: Task) -> bool:
    """A task gives a reward only if it has a check."""
    return bool(checklist(task))
