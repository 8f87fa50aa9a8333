"""The engine's own checks of a call, before any model is asked about it."""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator

from envace_demo.prompts import tool_not_available
from envace_demo.record import CallStep, ToolCall, is_error
from envace_demo.schemas import Tool, validate_arguments


def check_arguments(tool: Tool, arguments: dict) -> list[str]:
    """The call's schema violations: ``validate_arguments`` plus the declared ``format``s
    (jsonschema only annotates formats unless asked to check them). This is what the
    validation badge shows."""
    errors = validate_arguments(tool, arguments)
    if errors or not isinstance(arguments, dict):
        return errors
    checker = Draft202012Validator(tool.parameters, format_checker=Draft202012Validator.FORMAT_CHECKER)
    return [
        f"{'/'.join(str(p) for p in err.absolute_path) or 'arguments'}: {err.message}"
        for err in checker.iter_errors(arguments)
        if err.validator == "format"
    ]


def validation_error(call: ToolCall, tool: Tool | None, errors: list[str]) -> dict | None:
    """The rehearsal contract's error object (method doc §3) when the engine's own checks
    already decide the call: its tool is not in the whitelist (``TOOL_NOT_AVAILABLE``) or
    its arguments break the input schema (``INVALID_PARAMETERS``, one ``details.errors``
    entry per violation). None when the call passes: only then is the model asked.
    (A call whose format is broken never gets here: the parser ends the turn first.)"""
    if tool is None:
        return {
            "error_tool_call": {
                "code": "TOOL_NOT_AVAILABLE",
                "message": tool_not_available(call.name),
            }
        }
    if errors:
        noun = "violation" if len(errors) == 1 else "violations"
        return {
            "error_tool_call": {
                "code": "INVALID_PARAMETERS",
                "message": f"{call.name}: {len(errors)} input schema {noun}",
                "details": {"errors": list(errors)},
            }
        }
    return None


def repeated_failure(call: ToolCall, known: list[tuple[ToolCall, Any]]) -> Any | None:
    """The real failure of an identical earlier call, when that call and every call since
    failed: nothing has changed the world in between, so the same call meets the same
    failure (the contract's "reuse a known result", where it is certain). ``known``: the
    episode's (call, real result) pairs, in order. None otherwise: the model is asked.

    A failure the engine wrote (timeout, environment error) never gets here: it ends the
    episode. Any success since the earlier call may have changed the state, so it stops
    the search; a success of the call itself is not reused either (a write repeated is a
    new write)."""
    for earlier, result in reversed(known):
        if not is_error(result):
            return None
        if earlier.name == call.name and earlier.arguments == call.arguments:
            return result
    return None


def decided_by(step: CallStep) -> str | None:
    """Which of the engine's certain answers above wrote ``step.rehearsed``: "validation"
    (the contract's ``error_tool_call``) or "repeated_failure" (a real failure said again).
    None where the model rehearsed the step, or nothing did."""
    if step.rehearsed is None or step.rehearsal_text is not None:
        return None
    if isinstance(step.rehearsed, dict) and "error_tool_call" in step.rehearsed:
        return "validation"
    return "repeated_failure"
