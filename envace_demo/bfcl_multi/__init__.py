"""BFCL v4 multi-turn, end to end: the entries as conversation tasks, each against a live
environment of its backends, scored by BFCL's own checker.

- :func:`load_multi_turn` -- the entries as :class:`~envace_demo.task.Task` (one user
  turn after another; miss_func's held-back functions join at their turn);
- :class:`~envace_demo.bfcl_multi.environment.BFCLMultiTurnEnvironment` -- the entry's
  backend instances, schema-checked whitelisted dispatch (``open_environment`` opens it for
  a task's ``env`` of ``bfcl-multi-turn:<id>``);
- :func:`judge` -- an episode's verdict from BFCL's ``multi_turn_checker``; :func:`row_fields`
  -- the ``bfcl`` part of an eval row (decoded calls, valid, the checker's reason);
- :class:`~envace_demo.bfcl_multi.oracle.OracleBackend` -- replays the ground truth
  (``--backend oracle``);
- :mod:`~envace_demo.bfcl_multi.paper` -- the paper's figures and "ours vs paper";
- :func:`is_bfcl_multi_turn` -- the guard that keeps these entries out of training.

Needs ``bfcl-eval`` (``make setup``: installed without its dependencies). Nothing here
imports it until an entry is read.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Iterable

from envace_demo.bfcl_multi import data
from envace_demo.bfcl_multi.data import ADDED_FUNCTIONS_MESSAGE, CATEGORIES, LEFT_OUT_CLASSES
from envace_demo.errors import TaskError
from envace_demo.task import EvalTask, Task, Verdict

__all__ = [
    "ADDED_FUNCTIONS_MESSAGE", "CATEGORIES", "ENV_PREFIX", "LEFT_OUT_CLASSES", "SOURCE", "SUITE",
    "bind_oracle", "eval_tasks", "is_bfcl_multi_turn", "judge", "load_multi_turn", "open_entry",
    "parse_suite", "row_fields", "suite_tasks", "task_from_entry",
]

# A task's environment spec: "bfcl-multi-turn:multi_turn_base_0".
ENV_PREFIX = "bfcl-multi-turn:"
# A task's source (Task.source) and the eval suite's name.
SOURCE = "bfcl_multi_turn"
SUITE = "bfcl-multi-turn"
_ID = re.compile(r"multi_turn_(?:base|miss_func|miss_param|long_context|composite)_\d+")


# ---- tasks ---------------------------------------------------------------------------------------


def task_from_entry(entry_or_id: dict | str) -> Task:
    """One entry as a conversation task: its first user message as the prompt, the others
    as ``follow_ups`` (an empty miss_func turn as BFCL's own "I have updated some more
    functions..." message), its held-back functions in ``added_tools`` at their turn. No
    ``check``: the verdict comes from BFCL's checker (:func:`judge`). Held out: never a
    training task."""
    e = data._shared(entry_or_id)
    offered, missed = data.function_docs(e)
    turns = data.user_turns(e)
    return Task(
        name=e["id"],
        prompt=turns[0],
        tools=data.tools(offered),
        env=ENV_PREFIX + e["id"],
        check=None,
        split="heldout",
        source=SOURCE,
        follow_ups=turns[1:],
        added_tools={k: data.tools(docs) for k, docs in sorted(missed.items())},
    )


def load_multi_turn(categories: Iterable[str] = CATEGORIES, limit: int | None = None) -> list[Task]:
    """The entries of ``categories`` as tasks, at most ``limit`` of each, in BFCL's order."""
    cats = data.check_categories(list(categories))
    if limit is not None and limit < 1:
        raise TaskError(f"limit: expected at least 1, got {limit}")
    return [task_from_entry(i) for c in cats for i in data.entry_ids(c)[:limit]]


def parse_suite(spec: str) -> tuple[str, ...]:
    """``bfcl-multi-turn`` (every category) or ``bfcl-multi-turn:base,miss_func`` -> categories."""
    name, _, rest = spec.partition(":")
    if name.strip() != SUITE:
        raise TaskError(f"--suite: expected {SUITE} or {SUITE}:<categories> (some of {','.join(CATEGORIES)}); got {spec!r}")
    return data.check_categories(rest.split(",")) if rest.strip() else CATEGORIES


def eval_tasks(categories: Iterable[str] = CATEGORIES, limit: int | None = None) -> list[EvalTask]:
    """The eval's tasks (``EvalTask``): id ``bfcl_multi_turn:<entry id>``, category BFCL's
    test category (``multi_turn_base``, ...)."""
    return [EvalTask(t, f"{SOURCE}:{t.name}", "multi_turn_" + data.category_of(t.name))
            for t in load_multi_turn(categories, limit)]


def suite_tasks(spec: str, limit: int | None = None) -> list[EvalTask]:
    """``eval --suite``: the tasks (``EvalTask``) of a suite spec."""
    return eval_tasks(parse_suite(spec), limit)


# ---- the environment -----------------------------------------------------------------------------


def open_entry(spec: str):
    """The environment of a task's ``env`` ``bfcl-multi-turn:<id>`` (fresh backends)."""
    from envace_demo.bfcl_multi.environment import BFCLMultiTurnEnvironment

    if not spec.startswith(ENV_PREFIX):
        raise TaskError(f"{spec!r} is not a BFCL multi-turn environment ({ENV_PREFIX}<entry id>)")
    return BFCLMultiTurnEnvironment(spec[len(ENV_PREFIX):])


# ---- the guard -----------------------------------------------------------------------------------


@functools.cache
def _user_messages() -> frozenset[str]:
    """Every user message of every BFCL multi-turn entry (all categories), normalized."""
    if not data.available():
        return frozenset()
    out = set()
    for c in CATEGORIES:
        for i in data.entry_ids(c):
            out.update(_norm(t) for t in data.user_turns(i))
    out.discard(_norm(ADDED_FUNCTIONS_MESSAGE))
    return frozenset(out)


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def is_bfcl_multi_turn(task: Any) -> bool:
    """Whether ``task`` (a Task, or anything with its fields) is, or repeats, a BFCL
    multi-turn entry: its source or environment say so, its name is an entry id, or one of
    its user messages is an entry's (where bfcl-eval is installed). Training must skip it."""
    if getattr(task, "source", None) == SOURCE:
        return True
    env = getattr(task, "env", None) or getattr(task, "environment", None)
    if isinstance(env, str) and env.startswith(ENV_PREFIX):
        return True
    name = getattr(task, "name", None) or getattr(task, "task", None)
    if isinstance(name, str) and _ID.fullmatch(name):
        return True
    prompt = getattr(task, "prompt", None)
    turns = [prompt, *(getattr(task, "follow_ups", None) or [])]
    known = _user_messages()
    return any(isinstance(t, str) and _norm(t) in known for t in turns)


# ---- verdicts ------------------------------------------------------------------------------------


def judge(task: Any, trajectory: Any) -> Verdict | None:
    """The verdict (``task.Verdict``) of an episode on a BFCL multi-turn task, from BFCL's
    ``multi_turn_checker``; None for any other task (the engine then judges it as before)."""
    from envace_demo.bfcl_multi.scoring import entry_id_of, score_trajectory

    if entry_id_of(task) is None:
        return None
    result = score_trajectory(trajectory)
    if result["valid"]:
        return Verdict(True, [])
    return Verdict(False, [f"BFCL {result['error_type']}: {result['error_message']}"])


def row_fields(trajectory: Any) -> dict:
    """``{"bfcl": {id, category, decoded, valid, error_type, error_message}}`` for an eval
    row of an episode on a BFCL multi-turn entry; ``{}`` for any other."""
    from envace_demo.bfcl_multi.scoring import entry_id_of, score_trajectory

    entry_id = None if trajectory is None else entry_id_of(trajectory)
    if entry_id is None:
        return {}
    try:
        return {"bfcl": score_trajectory(trajectory)}
    except Exception as err:  # the row must still be written
        return {"bfcl": {"id": entry_id, "decoded": None, "valid": None, "error_type": "multi_turn:scoring_failed",
                         "error_message": f"{type(err).__name__}: {err}"}}


def bind_oracle(backend: Any, tasks: Iterable[Any]) -> None:
    """Tell an :class:`~envace_demo.bfcl_multi.oracle.OracleBackend` which entries this run
    has (a base entry and its long_context twin share a conversation); others: nothing."""
    from envace_demo.bfcl_multi.oracle import OracleBackend

    if isinstance(backend, OracleBackend):
        backend.bind([getattr(t, "task", t) for t in tasks])
