"""A task's success check, validated when the task is loaded.

A malformed check must fail at load with its location (``upload.jsonl:3:
check.state[0].path: missing``), not as a KeyError inside an episode after every
generation is paid for, nor pass by iterating a string's characters.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, StrictBool, StrictStr, ValidationError, field_validator, model_validator

from envace_demo.errors import TaskError

CHECK_KEYS = ("state", "includes_calls", "calls", "answer_contains")


class StateCondition(BaseModel):
    """``{"path": "a.b" | ["a", 0], "equals": V}`` or ``{"path": ..., "exists": false}``."""

    model_config = ConfigDict(extra="forbid")

    path: Any
    equals: Any = None
    exists: StrictBool | None = None

    @field_validator("path")
    @classmethod
    def _path(cls, value: Any) -> Any:
        if isinstance(value, str) and value:
            return value
        if isinstance(value, list) and value and all(isinstance(k, (str, int)) and not isinstance(k, bool) for k in value):
            return value
        raise ValueError('expected a dotted path ("accounts.ACC-1001.balance") or a non-empty list of keys')

    @model_validator(mode="after")
    def _one_test(self) -> "StateCondition":
        given = {"equals", "exists"} & self.model_fields_set
        if len(given) != 1:
            raise ValueError('give exactly one of "equals" or "exists"')
        return self


def _one_call(value: Any) -> Any:
    """A call in BFCL's ground-truth form: ``{"function": {"param": [accepted values]}}``."""
    if not isinstance(value, dict) or len(value) != 1:
        raise ValueError('expected one function name mapped to its parameters, e.g. {"get_balance": {"account_id": ["ACC-1"]}}')
    ((name, params),) = value.items()
    if not isinstance(params, dict):
        raise ValueError(f"{name}: expected an object of parameter -> list of accepted values")
    for param, accepted in params.items():
        if not isinstance(accepted, list):
            raise ValueError(f"{name}.{param}: expected a list of accepted values")
    return value


class Check(BaseModel):
    """Every key given must hold (see tasks.evaluate)."""

    model_config = ConfigDict(extra="forbid")

    state: list[StateCondition] | None = None
    includes_calls: list[dict] | None = None
    calls: list[dict] | None = None  # [] means: no call at all
    answer_contains: list[StrictStr] | None = None

    @field_validator("includes_calls", "calls", mode="before")
    @classmethod
    def _calls(cls, value: Any) -> Any:
        if isinstance(value, list):
            for i, call in enumerate(value):
                try:
                    _one_call(call)
                except ValueError as err:
                    raise ValueError(f"[{i}]: {err}") from None
        return value

    @field_validator("answer_contains", mode="before")
    @classmethod
    def _needles(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError(f"expected a list of strings, e.g. [{json.dumps(value[:40])}]")
        return value


def validate_check(raw: Any, where: str) -> dict | None:
    """The check as a plain dict (only the keys given), or a TaskError naming where it is wrong."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise TaskError(f"{where}: check: expected an object, got {type(raw).__name__}")
    try:
        check = Check.model_validate(raw)
    except ValidationError as err:
        raise TaskError(f"{where}: {_first_problem(err)}") from None
    return check.model_dump(exclude_unset=True)


def _first_problem(err: ValidationError) -> str:
    problem = err.errors(include_url=False)[0]
    loc = "check"
    for part in problem["loc"]:
        loc += f"[{part}]" if isinstance(part, int) else f".{part}"
    if problem["type"] == "missing":
        message = "missing"
    elif problem["type"] == "extra_forbidden":
        if loc.count(".") == 1:
            message = f"unknown key; allowed: {', '.join(CHECK_KEYS)}"
        else:
            message = "unknown key"
    else:
        message = problem["msg"].removeprefix("Value error, ")
    if message.startswith("["):  # a call's index, from the calls validator
        index, _, message = message.partition(": ")
        loc += index
    return f"{loc}: {message}"
