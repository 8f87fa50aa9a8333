"""A BFCL-compatible call checker (the AST checker of the Berkeley Function Calling
Leaderboard, Python category) and a reader for BFCL records.

Rules, as BFCL applies them (see /work/shared/data/bfcl/README.md):

- every required parameter is present; every given parameter exists in the schema
  and in the answer; a missing parameter is fine only if ``""`` is allowed;
- types are exact, except that an integer is accepted for a float; a boolean is
  never a number; a tuple counts as a list. A value whose type differs from the
  schema's but matches the type of the allowed values is accepted (BFCL's rule for
  answers written as variables, e.g. ``"data['sales']"`` for an array);
- strings compare after lowercasing, removing spaces and ``,./-_*^`` and turning
  ``'`` into ``"``; lists compare element by element in order; dicts key by key,
  where an allowed dict maps each key to a list of allowed values;
- parallel calls may come in any order but their count must match; each expected
  call takes the first unused model call that passes;
- no expected call (irrelevance) passes iff the model made no call.

Where BFCL compares nested values with plain ``==`` this checker applies the same
rules recursively (so ``["a b"]`` matches ``["ab"]`` at any depth, and a float is
never an integer inside an integer array either): slightly stricter on numbers,
slightly more lenient on nested strings.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from envace_demo.errors import TaskError
from envace_demo.record import ToolCall

if TYPE_CHECKING:
    from envace_demo.schemas import Tool

_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_STRING_NOISE = re.compile(r"[ ,./\-_*^]")

# Schema type name (BFCL dialect and JSON Schema) -> the kind of value it accepts.
_KIND_OF_TYPE = {
    "string": "string",
    "integer": "integer",
    "float": "float",
    "number": "float",
    "boolean": "boolean",
    "array": "array",
    "tuple": "array",
    "dict": "object",
    "object": "object",
    "null": "null",
}


@dataclass
class CheckResult:
    ok: bool
    reason: str = ""  # the first mismatch, written for a person; "" when ok


def safe_name(name: str) -> str:
    """The API-safe form of a BFCL function name (``math.factorial`` -> ``math_factorial``),
    as ``schemas.load_tools`` makes it: unsafe characters to ``_``, at most 64."""
    return _UNSAFE_NAME_CHARS.sub("_", name)[:64]


def names_match(name: str, func_name: str) -> bool:
    """Whether a model's call name denotes BFCL function ``func_name``."""
    return name == func_name or name == safe_name(func_name)


def normalize_string(text: str) -> str:
    """BFCL's string normalization: ``April 1, 2024`` equals ``april 1 2024``."""
    return _STRING_NOISE.sub("", text).lower().replace("'", '"')


# ---------------------------------------------------------------------------------
# Types


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):  # before int: bool is a subclass of int
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _accepts(kind: str, value: Any) -> bool:
    """Whether a value of the given expected kind accepts ``value`` (int for float)."""
    got = _kind(value)
    return got == kind or (kind == "float" and got == "integer")


def _schema_kinds(schema: dict | None) -> list[str] | None:
    """The value kinds a property schema allows; None when it says nothing usable
    (no type, or BFCL's ``any``)."""
    if not isinstance(schema, dict):
        return None
    declared = schema.get("type")
    names = declared if isinstance(declared, list) else [declared]
    kinds = [_KIND_OF_TYPE[n] for n in names if isinstance(n, str) and n in _KIND_OF_TYPE]
    return kinds or None


def _first_answer(allowed: list) -> Any:
    """The first allowed value that is not the "may be omitted" marker ``""``."""
    for value in allowed:
        if value != "":
            return value
    return ""


def _items_fit(value: Any, schema: dict) -> bool:
    """Element types of an array against ``items`` (recursively); other values pass."""
    items = schema.get("items") if isinstance(schema, dict) else None
    if not isinstance(value, (list, tuple)) or not isinstance(items, dict):
        return True
    kinds = _schema_kinds(items)
    for element in value:
        if kinds is not None and not any(_accepts(k, element) for k in kinds):
            return False
        if not _items_fit(element, items):
            return False
    return True


def _type_problem(value: Any, allowed: list, schema: dict | None) -> str | None:
    """None when ``value`` has an acceptable type, else what is wrong."""
    kinds = _schema_kinds(schema)
    if kinds is not None and any(_accepts(k, value) for k in kinds) and _items_fit(value, schema):
        return None
    if kinds is None and schema is not None and _kind(value) == "string":
        return None  # BFCL reads an untyped/"any" parameter as a string
    answer = _first_answer(allowed)
    if kinds is None and answer == "":
        return None  # nothing says what type it should be; the value check decides
    if answer != "" and _kind(value) == _kind(answer):
        return None  # the value has the type of the answer (BFCL's "variable" rule)
    if kinds is None and answer != "" and _accepts(_kind(answer), value):
        return None  # no schema: int for float
    expected = " or ".join(kinds) if kinds else (_kind(answer) if answer != "" else "any")
    if kinds and _kind(value) == "array" and any(_accepts(k, value) for k in kinds):
        return f"an element does not have the type of {json.dumps(schema.get('items'))}, got {_show(value)}"
    return f"expected type {expected}, got {_kind(value)} {_show(value)}"


# ---------------------------------------------------------------------------------
# Values


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= 120 else text[:117] + "..."


def _numbers_equal(value: Any, answer: Any, schema_kinds: list[str] | None) -> bool:
    got, want = _kind(value), _kind(answer)
    if got not in ("integer", "float") or want not in ("integer", "float"):
        return False
    # An integer may stand for a float answer; a float for an integer answer only
    # where the schema says the parameter is a float (10.0 for an integer fails).
    if got == "float" and want == "integer" and "float" not in (schema_kinds or ()):
        return False
    return value == answer


def _value_matches(value: Any, answer: Any, schema: dict | None) -> bool:
    """Whether ``value`` equals one allowed ``answer`` under BFCL's rules."""
    if isinstance(answer, str):
        return isinstance(value, str) and normalize_string(value) == normalize_string(answer)
    if isinstance(answer, bool) or answer is None:
        return _kind(value) == _kind(answer) and value == answer
    if isinstance(answer, (int, float)):
        return _numbers_equal(value, answer, _schema_kinds(schema))
    if isinstance(answer, (list, tuple)):
        if not isinstance(value, (list, tuple)) or len(value) != len(answer):
            return False
        items = schema.get("items") if isinstance(schema, dict) else None
        return all(_value_matches(v, a, items) for v, a in zip(value, answer, strict=True))
    if isinstance(answer, dict):
        return isinstance(value, dict) and _dict_problem(value, answer, schema) is None
    return value == answer


def _dict_problem(value: dict, answer: dict, schema: dict | None) -> str | None:
    """Key-by-key comparison; each key of ``answer`` maps to a list of allowed values
    (a bare value is read as a one-element list)."""
    props = schema.get("properties") if isinstance(schema, dict) else None
    props = props if isinstance(props, dict) else {}
    for key, item in value.items():
        if key not in answer:
            return f"unexpected key {key!r}"
        alternatives = answer[key] if isinstance(answer[key], list) else [answer[key]]
        if not any(_value_matches(item, alt, props.get(key)) for alt in alternatives):
            return f"{key}: expected one of {_show(alternatives)}, got {_show(item)}"
    for key, alternatives in answer.items():
        if key not in value and not (isinstance(alternatives, list) and "" in alternatives):
            return f"missing key {key!r}"
    return None


def _value_problem(value: Any, allowed: list, schema: dict | None) -> str | None:
    if any(_value_matches(value, answer, schema) for answer in allowed):
        return None
    if isinstance(value, dict):
        # Explain the dict mismatch against the first allowed dict.
        for answer in allowed:
            if isinstance(answer, dict):
                return _dict_problem(value, answer, schema)
    return f"expected one of {_show(allowed)}, got {_show(value)}"


# ---------------------------------------------------------------------------------
# Calls


def match_call(name: str, arguments: dict, expected: dict, schema_params: dict | None) -> CheckResult:
    """Judge one call against one expected call ``{func_name: {param: [allowed]}}``.

    ``schema_params`` is the function's ``parameters`` object (BFCL dialect or JSON
    Schema); without it, types are inferred from the allowed values and only the
    answer's parameter names are known.
    """
    if len(expected) != 1:
        raise TaskError(f"expected call must have exactly one function name, got {sorted(expected)}")
    ((func_name, answer),) = expected.items()
    if not names_match(name, func_name):
        return CheckResult(False, f"expected function {func_name}, got {name}")
    if not isinstance(arguments, dict):
        return CheckResult(False, f"arguments must be an object, got {_kind(arguments)}")
    props: dict | None = None
    if schema_params is not None:
        props = schema_params.get("properties")
        props = props if isinstance(props, dict) else {}
        for param in schema_params.get("required") or []:
            if param not in arguments:
                return CheckResult(False, f"missing required parameter {param!r}")
    for param, value in arguments.items():
        if (props is not None and param not in props) or param not in answer:
            return CheckResult(False, f"unexpected parameter {param!r}")
        allowed = answer[param] if isinstance(answer[param], list) else [answer[param]]
        schema = props.get(param) if props is not None else None
        problem = _type_problem(value, allowed, schema) or _value_problem(value, allowed, schema)
        if problem:
            return CheckResult(False, f"{param}: {problem}")
    for param, allowed in answer.items():
        if param not in arguments and not (isinstance(allowed, list) and "" in allowed):
            return CheckResult(False, f"missing parameter {param!r} (expected one of {_show(allowed)})")
    return CheckResult(True)


def _find_params(tools: list[Tool] | None, func_name: str) -> dict | None:
    for tool in tools or []:
        if tool.original_name == func_name or names_match(tool.name, func_name):
            return tool.parameters
    return None


def check_calls(
    calls: list[ToolCall], ground_truth: list[dict], tools: list[Tool] | None = None
) -> CheckResult:
    """Judge a turn's calls against a BFCL ground truth (any order, same count)."""
    if not ground_truth:
        if not calls:
            return CheckResult(True)
        return CheckResult(False, f"expected no call, got {len(calls)}: {', '.join(c.name for c in calls)}")
    if len(calls) != len(ground_truth):
        return CheckResult(False, f"expected {len(ground_truth)} call(s), got {len(calls)}")
    used: set[int] = set()
    for number, expected in enumerate(ground_truth, start=1):
        ((func_name, _),) = expected.items()
        params = _find_params(tools, func_name)
        first_failure: tuple[int, CheckResult] | None = None
        for index, call in enumerate(calls):
            if index in used:
                continue
            result = match_call(call.name, call.arguments, expected, params)
            if result.ok:
                used.add(index)
                break
            # Prefer explaining the mismatch of a call to the right function.
            if first_failure is None or (
                not names_match(calls[first_failure[0]].name, func_name) and names_match(call.name, func_name)
            ):
                first_failure = (index, result)
        else:
            index, result = first_failure  # type: ignore[misc]  # calls is non-empty here
            where = f"call {index + 1} ({calls[index].name})"
            if len(ground_truth) == 1:
                return CheckResult(False, f"{where}: {result.reason}")
            return CheckResult(
                False, f"no call matches expected call {number} ({func_name}); {where}: {result.reason}"
            )
    return CheckResult(True)


# ---------------------------------------------------------------------------------
# Records


def _materialize(answer: Any) -> Any:
    """One concrete value from an allowed value: nested dicts map keys to lists of
    alternatives; the first non-"" one is taken, keys with only "" left out."""
    if isinstance(answer, dict):
        out = {}
        for key, alternatives in answer.items():
            choice = _first_answer(alternatives) if isinstance(alternatives, list) else alternatives
            if choice != "" or not isinstance(alternatives, list):
                out[key] = _materialize(choice)
        return out
    if isinstance(answer, list):
        return [_materialize(item) for item in answer]
    return answer


def reference_calls(ground_truth: list[dict], tools: list[Tool] | None = None) -> list[ToolCall]:
    """Calls that satisfy ``ground_truth``: the first allowed value of each parameter
    (optional ones left out when only ``""`` is allowed, or when the schema lacks
    them). Names are the tools' API-safe names. For display and for tests."""
    calls = []
    for expected in ground_truth:
        ((func_name, answer),) = expected.items()
        params = _find_params(tools, func_name)
        props = params.get("properties") if isinstance(params, dict) else None
        arguments = {}
        for param, allowed in answer.items():
            choice = _first_answer(allowed)
            if choice == "" or (isinstance(props, dict) and param not in props and "" in allowed):
                continue
            arguments[param] = _materialize(choice)
        calls.append(ToolCall(name=safe_name(func_name), arguments=arguments))
    return calls


def load_bfcl_record(record: dict) -> dict:
    """The parts of a BFCL record the demo uses:
    ``{"id", "category", "prompt", "messages", "function", "ground_truth"}``.

    ``prompt`` is the user content of the first turn, ``messages`` every message of
    every turn in order.
    """
    rid = record.get("id") if isinstance(record, dict) else None
    where = f"BFCL record {rid!r}" if rid is not None else "BFCL record"
    if not isinstance(record, dict):
        raise TaskError(f"{where}: expected a JSON object, got {type(record).__name__}")
    for key, kind in (("question", list), ("function", list), ("ground_truth", list)):
        if not isinstance(record.get(key), kind):
            raise TaskError(f"{where}.{key}: expected a list, got {type(record.get(key)).__name__}")
    messages: list[dict] = []
    for t, turn in enumerate(record["question"]):
        turn = turn if isinstance(turn, list) else [turn]  # some BFCL files use flat lists
        for m, message in enumerate(turn):
            if not isinstance(message, dict) or not isinstance(message.get("content"), str):
                raise TaskError(f"{where}.question[{t}][{m}]: expected a message with string 'content'")
            messages.append(message)
    first_turn = record["question"][0] if record["question"] else []
    first_turn = first_turn if isinstance(first_turn, list) else [first_turn]
    prompt = next((m["content"] for m in first_turn if m.get("role") == "user"), "")
    if not prompt:
        raise TaskError(f"{where}.question[0]: no user message")
    for g, expected in enumerate(record["ground_truth"]):
        if not isinstance(expected, dict) or len(expected) != 1:
            raise TaskError(
                f"{where}.ground_truth[{g}]: expected one {{function: {{param: [values]}}}} object"
            )
    return {
        "id": str(rid if rid is not None else ""),
        "category": str(record.get("category", "")),
        "prompt": prompt,
        "messages": messages,
        "function": list(record["function"]),
        "ground_truth": list(record["ground_truth"]),
    }
