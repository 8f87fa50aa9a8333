"""Shared machinery of the bundled environments: schema-checked dispatch.

Each bundled environment declares its tools in ``examples/<name>/tools.json`` and
maps every tool name to a handler through an explicit dict. ``execute`` checks the
call against the declared parameter schema (jsonschema) before the handler runs,
and rolls the state back when a handler reports a domain failure, so a failed call
never leaves a half-applied change behind.
"""

from __future__ import annotations

import copy
import functools
import json
from abc import abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from envace_demo.envs.base import Environment
from envace_demo.schemas import Tool, load_tools

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"

# Error codes shared by all bundled environments; the two call-level ones match
# the rehearsal contract's codes so a real and a rehearsed failure compare equal.
TOOL_NOT_AVAILABLE = "TOOL_NOT_AVAILABLE"
INVALID_PARAMETERS = "INVALID_PARAMETERS"

_MAX_MESSAGE = 300  # garbage arguments must not produce a huge error message

Handler = Callable[[dict[str, Any]], dict[str, Any]]


class Failure(Exception):
    """A domain failure raised inside a handler; ``execute`` returns it as JSON."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def error(code: str, message: str) -> dict[str, Any]:
    """The JSON error response every environment returns for a failed call."""
    if len(message) > _MAX_MESSAGE:
        message = message[: _MAX_MESSAGE - 3] + "..."
    return {"error": {"code": code, "message": message}}


@functools.cache
def _tool_specs_text(env_name: str) -> str:
    return (EXAMPLES_DIR / env_name / "tools.json").read_text(encoding="utf-8")


def tool_specs(env_name: str) -> list[dict[str, Any]]:
    """The raw OpenAI-format tool list of ``examples/<env_name>/tools.json``."""
    return json.loads(_tool_specs_text(env_name))


@functools.cache
def _validators(env_name: str) -> dict[str, Draft202012Validator]:
    return {
        spec["function"]["name"]: Draft202012Validator(spec["function"]["parameters"])
        for spec in tool_specs(env_name)
    }


@functools.cache
def _loaded_tools(env_name: str) -> list[Tool]:
    return load_tools(tool_specs(env_name))


@functools.cache
def _writers(env_name: str) -> frozenset[str]:
    return frozenset(spec["function"]["name"] for spec in tool_specs(env_name) if spec["function"].get("x-writes"))


@functools.cache
def _additive(env_name: str) -> frozenset[str]:
    return frozenset(spec["function"]["name"] for spec in tool_specs(env_name)
                     if spec["function"].get("x-destructive") is False)


@functools.cache
def _quoting(env_name: str) -> dict[str, tuple[str, ...]]:
    return {spec["function"]["name"]: tuple(spec["function"]["x-quotes-user"]) for spec in tool_specs(env_name)
            if isinstance(spec["function"].get("x-quotes-user"), list)}


def _describe(err: Any) -> str:
    where = "/".join(str(p) for p in err.absolute_path) or "arguments"
    return f"{where}: {err.message}"


class ToolEnvironment(Environment):
    """An environment whose tools come from its tools.json and whose state is JSON.

    Subclasses define ``initial_state()`` and ``handlers()``. Tool names in the
    bundled tools.json files are already API-safe (snake_case, no dots), so the
    API-safe and original names are the same string and one lookup serves both.
    """

    def __init__(self) -> None:
        self._state: dict[str, Any] = self.initial_state()

    def vary_state(self, change: Callable[[dict[str, Any]], None]) -> None:
        """Let ``change`` edit the state in place before any call (training's varied worlds:
        the same entities with other values)."""
        change(self._state)

    @abstractmethod
    def initial_state(self) -> dict[str, Any]:
        """A fresh copy of the seeded state."""

    @abstractmethod
    def handlers(self) -> dict[str, Handler]:
        """Tool name -> bound method taking the validated arguments dict."""

    @property
    def state_changing(self) -> frozenset[str]:
        """The tools whose calls change the state (the rest only read it), as tools.json
        declares them (``"x-writes": true``)."""
        return _writers(self.name)

    def writes(self, name: str) -> bool | None:
        return name in self.state_changing

    def additive(self, name: str) -> bool:
        """As tools.json declares it (``"x-destructive": false``)."""
        return name in _additive(self.name)

    def quoting(self, name: str) -> tuple[str, ...]:
        """As tools.json declares it (``"x-quotes-user": ["query"]``)."""
        return _quoting(self.name).get(name, ())

    def stated_facts(self, call: Any, shown: list[tuple[Any, Any]]) -> str | None:
        from envace_demo.facts import stated_facts

        return stated_facts(self.name, call, shown)

    def tools(self) -> list[Tool]:
        # Normalizing costs ~20 ms; a deep copy of the cached result keeps callers apart.
        return copy.deepcopy(_loaded_tools(self.name))

    def execute(self, name: str, arguments: dict[str, Any]) -> Any:
        handlers = self.handlers()
        if not isinstance(name, str) or name not in handlers:
            known = ", ".join(sorted(handlers))
            return error(TOOL_NOT_AVAILABLE, f"no tool named {name!r}; available: {known}")
        if not isinstance(arguments, dict):
            return error(INVALID_PARAMETERS, f"{name}: arguments must be a JSON object")
        problems = sorted(_validators(self.name)[name].iter_errors(arguments), key=_describe)
        if problems:
            return error(INVALID_PARAMETERS, f"{name}: " + "; ".join(map(_describe, problems)))
        before = copy.deepcopy(self._state)
        try:
            return handlers[name](arguments)
        except Failure as failure:
            self._state = before
            return error(failure.code, failure.message)

    def reset(self) -> None:
        self._state = self.initial_state()

    def state(self) -> dict[str, Any]:
        return copy.deepcopy(self._state)
