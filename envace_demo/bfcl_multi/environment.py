"""One BFCL multi-turn entry as an environment: live instances of its backend classes.

Built as BFCL's executor builds them (``multi_turn_utils.execute_multi_turn_func_call``):
each of the entry's ``involved_classes`` instantiated, and every stateful one loaded with
its part of the entry's ``initial_config`` (``_load_scenario(deepcopy(config),
long_context=...)``). Calls are dispatched without ``eval``: the name must be one of the
entry's function docs (the whitelist), the arguments must satisfy that doc's schema, and
then ``getattr(instance, name)(**arguments)`` runs.
"""

from __future__ import annotations

import copy
import datetime
import decimal
import math
from typing import Any

from envace_demo.bfcl_multi import data
from envace_demo.envs._common import INVALID_PARAMETERS, TOOL_NOT_AVAILABLE, error
from envace_demo.envs.base import Environment
from envace_demo.schemas import Tool, find_tool, validate_arguments

# A backend method that raised: BFCL's executor reports "Error during execution: ...".
EXECUTION_ERROR = "EXECUTION_ERROR"
# Codes of a call refused before any backend ran (nothing happened).
REFUSALS = frozenset({TOOL_NOT_AVAILABLE, INVALID_PARAMETERS})

_MAX_DEPTH = 64


def jsonable(value: Any, _path: tuple[int, ...] = (), _depth: int = 0) -> Any:
    """``value`` as plain JSON: objects by their public attributes (a back-reference to an
    object being written, e.g. a directory's parent, by its class and name), tuples and
    sets as lists, dates as ISO text, anything else by ``repr``."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, decimal.Decimal):
        return float(value) if value.is_finite() else str(value)
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if _depth > _MAX_DEPTH:
        return "<too deep>"
    if id(value) in _path:
        name = getattr(value, "name", None)
        return f"<{type(value).__name__}{' ' + str(name) if isinstance(name, str) else ''}>"
    path = (*_path, id(value))
    if isinstance(value, dict):
        return {str(k): jsonable(v, path, _depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v, path, _depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((jsonable(v, path, _depth + 1) for v in value), key=repr)
    if hasattr(value, "__dict__"):
        return {k: jsonable(v, path, _depth + 1) for k, v in vars(value).items() if not k.startswith("_")}
    return repr(value)


def response(result: Any) -> Any:
    """A backend's return value as the JSON response of the call: an object or a list as
    is; anything else (``mkdir`` returns None on success) as ``{"result": value}``, so a
    response is never null (which the record reads as "not executed")."""
    if isinstance(result, dict) or isinstance(result, (list, tuple)):
        return jsonable(result)
    return {"result": jsonable(result)}


def public_state(instance: Any) -> dict[str, Any]:
    """An instance's state as BFCL's state checker compares it (public attributes), as JSON."""
    return {k: jsonable(v) for k, v in vars(instance).items() if not k.startswith("_")}


class BFCLMultiTurnEnvironment(Environment):
    """The backends of one BFCL multi-turn entry, in the entry's initial state."""

    name = "bfcl-multi-turn"
    description = "BFCL v4 multi-turn: the entry's backend classes (file system, trading, travel, ...), live"

    def __init__(self, entry_or_id: dict | str):
        self.entry = data.entry(entry_or_id) if isinstance(entry_or_id, str) else copy.deepcopy(entry_or_id)
        self.entry_id: str = self.entry["id"]
        self.category = data.category_of(self.entry_id)
        self.long_context = "long_context" in self.category
        data.check_classes(self.entry["involved_classes"], self.entry_id)
        offered, _ = data.function_docs(self.entry)
        self._offered = data.tools(offered)
        # The whitelist: every function doc of the involved classes, held-back ones included.
        self._whitelist = data.tools(data.all_docs(self.entry))
        self._owner = data.owners(self.entry)
        self.instances: dict[str, Any] = {}
        self.reset()

    def tools(self) -> list[Tool]:
        """The docs offered from the first user turn (miss_func's held-back ones join later:
        ``Task.added_tools``)."""
        return copy.deepcopy(self._offered)

    def all_tools(self) -> list[Tool]:
        """The whitelist: every function doc of the involved classes."""
        return copy.deepcopy(self._whitelist)

    def reset(self) -> None:
        self.instances = {}
        for class_name in self.entry["involved_classes"]:
            instance = data.backend_class(class_name)()
            if class_name not in data.STATELESS_CLASSES:
                config = self.entry.get("initial_config", {}).get(class_name, {})
                instance._load_scenario(copy.deepcopy(config), long_context=self.long_context)
            self.instances[class_name] = instance

    def execute(self, name: str, arguments: dict[str, Any]) -> Any:
        tool = find_tool(self._whitelist, name) if isinstance(name, str) else None
        if tool is None or tool.original_name not in self._owner:
            known = ", ".join(sorted(t.original_name for t in self._whitelist))
            return error(TOOL_NOT_AVAILABLE, f"no tool named {name!r}; available: {known}")
        if not isinstance(arguments, dict):
            return error(INVALID_PARAMETERS, f"{tool.original_name}: arguments must be a JSON object")
        problems = validate_arguments(tool, arguments)
        known = tool.parameters.get("properties", {})
        problems += [f"{k}: not a parameter of {tool.original_name}" for k in arguments if k not in known]
        if problems:
            return error(INVALID_PARAMETERS, f"{tool.original_name}: " + "; ".join(problems))
        method = getattr(self.instances[self._owner[tool.original_name]], tool.original_name)
        try:
            result = method(**copy.deepcopy(arguments))
        except Exception as err:  # a backend's bug or a refusal it raises: a response, never a crash
            return error(EXECUTION_ERROR, f"{tool.original_name}: {type(err).__name__}: {err}")
        return response(result)

    def state(self) -> dict[str, Any]:
        return {c: public_state(i) for c, i in self.instances.items()}
