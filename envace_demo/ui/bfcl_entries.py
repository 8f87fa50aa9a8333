"""BFCL v4 multi-turn entries as the app's examples (no gradio here).

A few entries are offered. In the Playground each is an example: its tools are the entry's
function docs, its environment is the entry's live backends in their initial state (kept
in the visitor's session for the conversation, as a built-in environment is), and its
user turns are sent one by one, the follow-up box prefilled with the next. In Compare's
Suite they run whole, scored by BFCL's own checker as ``eval --suite bfcl-multi-turn``
scores them. Public mode offers fewer entries, and only those whose user turns fit the
conversation cap.
"""

from __future__ import annotations

import functools
import json
from dataclasses import replace

from envace_demo.bfcl_multi import ENV_PREFIX, SOURCE, task_from_entry
from envace_demo.bfcl_multi import data
from envace_demo.errors import TaskError
from envace_demo.evaluation.batch import EvalTask
from envace_demo.record import Trajectory
from envace_demo.schemas import Tool
from envace_demo.tasks import Task

# Short conversations over one or two backends each; a miss_func one holds a function back.
EXAMPLE_ENTRIES = (
    "multi_turn_base_3",
    "multi_turn_miss_func_3",
    "multi_turn_base_9",
    "multi_turn_base_4",
    "multi_turn_base_23",
    "multi_turn_base_28",
)
PUBLIC_ENTRIES = 2  # how many public mode offers (each holds the shared model for several turns)


def is_entry(environment: str | None) -> bool:
    """Whether an environment value names a BFCL multi-turn entry (``bfcl-multi-turn:<id>``)."""
    return isinstance(environment, str) and environment.startswith(ENV_PREFIX)


def entry_id(environment: str) -> str:
    return environment[len(ENV_PREFIX):]


def offered(public: bool, max_turns: int | None) -> list[str]:
    """The environments of the entries offered: in public mode at most ``PUBLIC_ENTRIES``,
    each with at most ``max_turns`` user turns; none where bfcl-eval is not installed."""
    if not data.available():
        return []
    ids = [i for i in EXAMPLE_ENTRIES if max_turns is None or len(data.user_turns(i)) <= max_turns]
    return [ENV_PREFIX + i for i in (ids[:PUBLIC_ENTRIES] if public else ids)]


def choices(public: bool, max_turns: int | None) -> list[tuple[str, str]]:
    """(label, environment) of each entry offered, for a picker."""
    out = []
    for env in offered(public, max_turns):
        e = data.entry(entry_id(env))
        backends = ", ".join(e["involved_classes"])
        out.append((f"BFCL {e['id']}: {len(e['question'])} user turns over {backends}", env))
    return out


@functools.lru_cache(maxsize=None)
def tools_text(environment: str) -> str:
    """The function docs the entry offers from its first turn, as the schema editor shows them."""
    docs, _ = data.function_docs(entry_id(environment))
    return json.dumps(docs, indent=2, ensure_ascii=False)


def entry_task(environment: str) -> Task:
    """The whole entry as a conversation task (every user turn, every added tool)."""
    return task_from_entry(entry_id(environment))


def task_for(environment: str, messages: list[str], tools: list[Tool]) -> Task:
    """The entry's task as far as ``messages`` (the user turns sent so far) go. TaskError
    where a message is not the entry's turn (BFCL's checker scores the entry against the
    ground truth of its own words), the entry has no turn left, or the tools are not the
    entry's."""
    whole = entry_task(environment)
    turns, name = whole.user_turns, whole.name
    if len(messages) > len(turns):
        raise TaskError(f"BFCL {name}: its {len(turns)} user turns are all answered; press Run for a new conversation")
    for k, (sent, own) in enumerate(zip(messages, turns)):
        if sent.strip() != own.strip():
            raise TaskError(
                f"BFCL {name}: user turn {k + 1} must be the entry's own ({own!r}): BFCL's checker scores the "
                "entry against its ground truth for those words"
            )
    if sorted(t.name for t in tools) != sorted(t.name for t in whole.tools):
        raise TaskError(f"BFCL {name}: the tools must be the entry's own function docs; pick the entry again to restore them")
    sent = len(messages)
    return replace(
        whole,
        follow_ups=whole.follow_ups[: sent - 1],
        added_tools={k: v for k, v in whole.added_tools.items() if k < sent},
    )


def next_turn(traj: Trajectory | None) -> str | None:
    """The entry's next user turn after those the conversation of ``traj`` answered; None
    when it is not on an entry, or has no turn left."""
    if traj is None or not is_entry(traj.environment):
        return None
    turns = data.user_turns(entry_id(traj.environment))
    k = 1 + len(traj.follow_ups)
    return turns[k] if k < len(turns) and len(traj.answers) >= k else None


def shown(traj: Trajectory) -> Trajectory:
    """``traj`` as the outcome card shows it: a conversation on an entry that has not reached
    its last user turn is not judged yet (BFCL's checker judges the whole conversation), not
    failed. The record itself keeps the checker's verdict."""
    if not is_entry(traj.environment) or traj.mode == "imagine":
        return traj
    total = len(data.user_turns(entry_id(traj.environment)))
    sent = 1 + len(traj.follow_ups)
    if sent >= total or len(traj.answers) < sent:
        return traj
    why = (
        f"BFCL's checker judges the entry once its {total} user turns are answered: {sent} so far; "
        "send the next one below"
    )
    return replace(traj, success=None, check_reasons=[why])


def eval_tasks(environments: list[str], limit: int) -> list[EvalTask]:
    """The Suite's tasks, as ``eval --suite bfcl-multi-turn`` reads them (id
    ``bfcl_multi_turn:<entry id>``, category BFCL's test category), at most ``limit``."""
    if not environments:
        raise TaskError(f"BFCL multi-turn: no entry offered here (it needs bfcl-eval: {data.INSTALL_HINT})")
    return [
        EvalTask(entry_task(env), f"{SOURCE}:{entry_id(env)}", "multi_turn_" + data.category_of(entry_id(env)))
        for env in environments[:limit]
    ]
