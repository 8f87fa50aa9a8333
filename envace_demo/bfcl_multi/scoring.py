"""Scoring by BFCL's own checker (``multi_turn_checker``).

A finished episode becomes BFCL's decoded form: per user turn, per actor step, the list of
call strings (``cd(folder='document')``), as BFCL's harness decodes a function-calling
model's output (``convert_to_function_call``: ``name(k=repr(v),...)``). The checker then
replays those strings against fresh backends (BFCL evaluates them: its code, on strings
built here from schema-validated JSON, never from model text), replays the ground truth,
and compares the instances' state and the responses after every turn.

What counts as the model's calls: those the environment executed. A call refused before
any backend ran (outside the whitelist, arguments outside the schema), a call held because
its rehearsal foresaw a failure, and a call the time limit stopped never reached the
backends, so they are left out: the checker's replay then starts from the same state the
episode's environment had.
"""

from __future__ import annotations

import keyword
import math
import re
import threading
import uuid
from typing import Any, Iterable

from envace_demo.bfcl_multi import data
from envace_demo.record import ToolCall
from envace_demo.schemas import find_tool

# Why an entry fails when the episode did not reach its last user turn (BFCL's own label for
# a model force-terminated before the end: eval_runner's length check).
FORCE_TERMINATED = "multi_turn:force_terminated"
CHECKER_ERROR = "multi_turn:checker_error"
# How an episode ends when it stopped before its last turn was done (BFCL force-quits a model
# past its step limit, and fails an entry whose inference failed); a parse error or a cut
# answer ends a turn as BFCL's failed decode does, and is judged.
_UNFINISHED = {"max_steps", "time_limit", "cancelled", "environment_error", "no_environment", "rehearsal_time"}
_REFUSALS = {"TOOL_NOT_AVAILABLE", "INVALID_PARAMETERS"}

# (user turn index, the calls of one actor step)
Step = tuple[int, list[ToolCall]]


class DecodeError(ValueError):
    """A call that cannot be written as a BFCL call string safely."""


def _literal(value: Any, where: str) -> str:
    """``repr`` of a plain JSON value (a Python literal), after checking that it is one."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if not all(isinstance(k, str) for k in item):
                raise DecodeError(f"{where}: object keys must be strings")
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise DecodeError(f"{where}: {item!r} is not a JSON number")
        elif not (item is None or isinstance(item, (str, int, bool))):
            raise DecodeError(f"{where}: {type(item).__name__} is not a JSON value")
    return repr(value)


def _identifier(name: Any) -> bool:
    return isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name) and name.isascii()


def call_string(name: str, arguments: dict[str, Any], allowed: Iterable[str] | None = None) -> str:
    """BFCL's decoded form of one call: ``name(k=repr(v),...)``. ``name`` must be one of
    ``allowed`` (the entry's function names) and a plain identifier, every key an
    identifier, every value plain JSON; else DecodeError (nothing from a model reaches the
    string unchecked)."""
    if allowed is not None and name not in set(allowed):
        raise DecodeError(f"{name!r} is not one of the entry's functions")
    if not _identifier(name) or name.startswith("_"):
        raise DecodeError(f"{name!r} is not a plain public function name")
    if not isinstance(arguments, dict):
        raise DecodeError(f"{name}: arguments must be an object")
    parts = []
    for key, value in arguments.items():
        if not _identifier(key):
            raise DecodeError(f"{name}: {key!r} is not a plain parameter name")
        parts.append(f"{key}={_literal(value, f'{name}.{key}')}")
    return f"{name}({','.join(parts)})"


def decoded_from_steps(steps: Iterable[Step], entry_or_id: dict | str) -> list[list[list[str]]]:
    """``multi_turn_model_result_list_decoded`` from (user turn, calls) per actor step: one
    list per user turn of the entry, holding one list of call strings per step that made
    calls (BFCL drops a step that decodes to nothing). Call names may be API-safe or
    original; they must be the entry's functions."""
    e = data._shared(entry_or_id)
    tools = data.tools(data.all_docs(e))
    names = {t.original_name for t in tools}
    decoded: list[list[list[str]]] = [[] for _ in e["question"]]
    for user_turn, calls in steps:
        if not 0 <= user_turn < len(decoded):
            raise DecodeError(f"user turn {user_turn} is outside the entry's {len(decoded)} turns")
        strings = []
        for call in calls:
            tool = find_tool(tools, call.name)
            if tool is None:
                raise DecodeError(f"{call.name!r} is not one of {e['id']}'s functions")
            strings.append(call_string(tool.original_name, call.arguments, names))
        if strings:
            decoded[user_turn].append(strings)
    return decoded


def decoded_ground_truth(entry_or_id: dict | str) -> list[list[list[str]]]:
    """The ground truth in decoded form: each turn's calls as one step (none for an empty
    turn), written by :func:`call_string` from the calls :func:`data.ground_truth_calls` reads."""
    turns = data.ground_truth_calls(entry_or_id)
    return decoded_from_steps([(k, calls) for k, calls in enumerate(turns)], entry_or_id)


# ---- from a trajectory ---------------------------------------------------------------------------


def executed(step: Any) -> bool:
    """Whether a committed call step reached the backends (see the module's note)."""
    real = getattr(step, "real", None)
    if real is None or getattr(step, "held", False) or getattr(step, "valid", None) is False:
        return False
    if isinstance(real, dict):
        err = real.get("error", real.get("error_tool_call"))
        if isinstance(err, dict) and err.get("code") in _REFUSALS:
            return False
    return True


def steps_from_trajectory(traj: Any) -> list[Step]:
    """(user turn, executed calls) per committed actor turn; a turn record without
    ``user_turn`` answers the first user turn."""
    return [(int(getattr(turn, "user_turn", 0) or 0), [s.call for s in turn.calls if executed(s)])
            for turn in traj.turns]


def turns_reached(traj: Any) -> int:
    """How many user turns the committed run reached (its last turn's user turn, plus one)."""
    return max((int(getattr(t, "user_turn", 0) or 0) + 1 for t in traj.turns), default=0)


def entry_id_of(traj_or_task: Any) -> str | None:
    """The BFCL entry id of a trajectory or task (its environment ``bfcl-multi-turn:<id>``)."""
    from envace_demo.bfcl_multi import ENV_PREFIX

    env = getattr(traj_or_task, "environment", None) or getattr(traj_or_task, "env", None)
    if isinstance(env, str) and env.startswith(ENV_PREFIX):
        return env[len(ENV_PREFIX):]
    return None


def decoded_from_trajectory(traj: Any) -> list[list[list[str]]]:
    """The decoded form of a finished episode on a BFCL multi-turn entry."""
    entry_id = entry_id_of(traj)
    if entry_id is None:
        raise DecodeError("not an episode on a BFCL multi-turn entry (environment bfcl-multi-turn:<id>)")
    return decoded_from_steps(steps_from_trajectory(traj), entry_id)


# ---- the checker ---------------------------------------------------------------------------------

_CHECKER_LOCK = threading.Lock()


def _summary(result: dict) -> dict:
    """The checker's verdict as JSON: valid, error_type, error_message (details dropped: they
    hold live backend objects)."""
    out = {"valid": bool(result.get("valid"))}
    if not out["valid"]:
        out["error_type"] = str(result.get("error_type", ""))
        message = result.get("error_message", "")
        out["error_message"] = " ".join(message) if isinstance(message, list) else str(message)
    return out


def check_decoded(entry_or_id: dict | str, decoded: list[list[list[str]]], turns_reached: int | None = None) -> dict:
    """BFCL's verdict on ``decoded``: ``{"valid": True}`` or ``{"valid": False, "error_type",
    "error_message"}``. ``turns_reached``: user turns the episode reached; fewer than the
    entry has fails it as BFCL fails a force-terminated model (its length check), before
    the checker runs."""
    e = data._shared(entry_or_id)
    total = len(e["ground_truth"])
    if len(decoded) != total:
        raise DecodeError(f"decoded has {len(decoded)} turns; {e['id']} has {total}")
    if turns_reached is not None and turns_reached < total:
        return {"valid": False, "error_type": FORCE_TERMINATED,
                "error_message": f"the episode reached {turns_reached} of the {total} user turns"}
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    # BFCL's executor keeps each run's instances in its module globals under
    # "<model>_<entry>_<class>_instance": a fresh model name per check keeps runs apart,
    # and they are removed after.
    model_name = f"envace_{uuid.uuid4().hex}"
    prefix = re.sub(r"[-./:]", "_", model_name)
    category = "multi_turn_" + data.category_of(e["id"])
    test_entry = {k: e[k] for k in ("id", "question", "initial_config", "involved_classes")}
    try:
        result = multi_turn_checker(decoded, e["ground_truth"], test_entry, category, model_name)
    except Exception as err:  # the checker's own assertions
        result = {"valid": False, "error_type": CHECKER_ERROR, "error_message": f"{type(err).__name__}: {err}"}
    finally:
        with _CHECKER_LOCK:
            space = vars(multi_turn_utils)
            for key in [k for k in space if k.startswith(prefix)]:
                del space[key]
    return _summary(result)


def score_trajectory(traj: Any) -> dict:
    """``{"id", "category", "decoded", "valid", ...}`` for a finished episode on an entry."""
    entry_id = entry_id_of(traj)
    if entry_id is None:
        raise DecodeError("not an episode on a BFCL multi-turn entry")
    out: dict[str, Any] = {"id": entry_id, "category": data.category_of(entry_id)}
    try:
        out["decoded"] = decoded_from_trajectory(traj)
    except DecodeError as err:
        return {**out, "decoded": None, "valid": False, "error_type": "multi_turn:decode_error", "error_message": str(err)}
    ended = str(getattr(traj, "ended", "") or "")
    if ended in _UNFINISHED or ended.startswith("model_error"):
        total = len(out["decoded"])
        return {**out, "valid": False, "error_type": FORCE_TERMINATED,
                "error_message": f"the episode ended ({ended}) in user turn {turns_reached(traj)} of {total}"}
    return {**out, **check_decoded(entry_id, out["decoded"], turns_reached(traj))}
