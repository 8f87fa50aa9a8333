"""Tools as pasted, in any common dialect, read into :class:`Tool` (see the package's
docstring for the dialects), and a tool call's arguments checked against its schema."""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator

from envace_demo.errors import SchemaError
from envace_demo.policy import DEFAULT_POLICY, InputPolicy
from envace_demo.schemas.guards import parse_input
from envace_demo.schemas.metaschema import check_schema
from envace_demo.schemas.normalize import Budget, Normalizer, nesting_height
from envace_demo.schemas.paths import join, join_path, json_type

_API_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_NOT_API_CHAR = re.compile(r"[^A-Za-z0-9_-]")
_PARAM_KEYS = ("parameters", "input_schema", "inputSchema")
_RESPONSE_KEYS = ("response", "x-response-schema", "returns", "output_schema", "outputSchema")


@dataclass(frozen=True)
class Tool:
    """One tool, normalized. Build it with :func:`load_tools` or :meth:`from_dict`."""

    name: str  # API-safe ([A-Za-z0-9_-]{1,64}): what prompts show and the model calls
    original_name: str  # as given: for display and for calling the real environment
    description: str
    parameters: dict  # JSON Schema 2020-12, "type": "object", self-contained
    response: dict | None = None  # declared response schema, normalized the same way

    def __post_init__(self) -> None:
        # The name ends up in prompts and grammars; refuse a hand-built bad one early.
        if not isinstance(self.name, str) or not _API_NAME.fullmatch(self.name):
            raise SchemaError(
                "name", f"{self.name!r} is not an API-safe name ([A-Za-z0-9_-], 1 to 64 characters)"
            )

    def to_openai(self) -> dict:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": copy.deepcopy(self.parameters),
            },
        }

    def to_dict(self) -> dict:
        d = self.to_openai()
        d["original_name"] = self.original_name
        if self.response is not None:
            d["response"] = copy.deepcopy(self.response)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Tool:
        tools = load_tools(d)
        if len(tools) != 1:
            raise SchemaError("tools", f"expected one tool, got {len(tools)}")
        return tools[0]


def load_tools(source: str | bytes | dict | list, limits: InputPolicy = DEFAULT_POLICY) -> list[Tool]:
    """Parse and normalize tool schemas; raise SchemaError for the first problem."""
    try:
        value = parse_input(source, limits)
        entries = _tool_entries(value, limits)
        budget = Budget(limits)
        tools: list[Tool] = []
        seen: dict[str, tuple[int, str]] = {}  # API name -> (index, original name)
        for i, (loc, item) in enumerate(entries):
            tool, name_loc = _load_tool(item, loc, budget)
            if tool.name in seen:
                j, other = seen[tool.name]
                if other == tool.original_name:
                    raise SchemaError(name_loc, f"duplicate tool name {other!r} (also tools[{j}])")
                raise SchemaError(
                    name_loc,
                    f"{tool.original_name!r} and {other!r} (tools[{j}]) both become {tool.name!r} "
                    "once made API-safe; rename one",
                )
            seen[tool.name] = (i, tool.original_name)
            tools.append(tool)
        return tools
    except RecursionError:  # backstop: the depth checks should make this unreachable
        raise SchemaError("input", f"nested too deeply (more than {limits.max_depth} levels)") from None


def find_tool(tools: list[Tool], name: str) -> Tool | None:
    """The tool called ``name``, by API-safe name first, then by original name."""
    for tool in tools:
        if tool.name == name:
            return tool
    for tool in tools:
        if tool.original_name == name:
            return tool
    return None


def validate_arguments(tool: Tool, arguments: dict) -> list[str]:
    """Messages like ``unit: 'kelvin' is not one of [...]``; ``[]`` when valid.

    Plain JSON Schema semantics: unknown parameters are allowed unless the schema
    says ``additionalProperties: false``, and ``10.0`` passes as an integer.
    """
    if not isinstance(arguments, dict):
        return [f"arguments: must be a JSON object, got {json_type(arguments)}"]
    validator = _validator(json.dumps(tool.parameters))
    messages = []
    for err in validator.iter_errors(arguments):
        path = join_path("", list(err.absolute_path))
        if err.validator == "required":
            missing = next(
                (p for p in err.validator_value if f"{p!r} is a required property" == err.message), None
            )
            if missing is not None:
                messages.append(f"{join(path, missing)}: required property missing")
                continue
        messages.append(f"{path or 'arguments'}: {err.message}")
    return messages


@lru_cache(maxsize=1024)
def _validator(schema_json: str) -> Draft202012Validator:
    # Keyed by the schema's JSON text (Tool holds dicts, so it is not hashable); key
    # order is kept so that errors come in the schema's property order.
    return Draft202012Validator(json.loads(schema_json))



def _tool_entries(value: Any, limits: InputPolicy) -> list[tuple[str, Any]]:
    if isinstance(value, dict) and "tools" in value:
        value = value["tools"]
        if not isinstance(value, list):
            raise SchemaError("tools", f"must be a list of tools, got {json_type(value)}")
    elif isinstance(value, dict):
        value = [value]
    elif not isinstance(value, list):
        raise SchemaError(
            "input",
            f'expected a tool object, a list of tools, or {{"tools": [...]}}, got {json_type(value)}',
        )
    if not value:
        raise SchemaError("tools", "empty list: give at least one tool")
    if len(value) > limits.max_tools:
        raise SchemaError("tools", f"{len(value)} tools given, at most {limits.max_tools}")
    return [(f"tools[{i}]", item) for i, item in enumerate(value)]


def _load_tool(item: Any, loc: str, budget: Budget) -> tuple[Tool, str]:
    if not isinstance(item, dict):
        raise SchemaError(loc, f"a tool must be a JSON object, got {json_type(item)}")
    fn, floc = item, loc
    if "function" in item:  # OpenAI chat-completions wrapper
        if item.get("type", "function") != "function":
            raise SchemaError(join(loc, "type"), f'unsupported tool type {item["type"]!r} (only "function")')
        fn, floc = item["function"], join(loc, "function")
        if not isinstance(fn, dict):
            raise SchemaError(floc, f"must be a JSON object, got {json_type(fn)}")

    # Our own export (Tool.to_dict) keeps the name as given beside the API-safe one.
    if isinstance(item.get("original_name"), str) and fn is not item:
        name, name_loc = item["original_name"], join(loc, "original_name")
    elif "name" in fn:
        name, name_loc = fn["name"], join(floc, "name")
    else:
        raise SchemaError(join(floc, "name"), "missing: every tool needs a name")
    if not isinstance(name, str):
        raise SchemaError(name_loc, f"must be a string, got {json_type(name)}")
    if not name.strip():
        raise SchemaError(name_loc, "is empty")
    api_name = _NOT_API_CHAR.sub("_", name)[:64]

    description = fn.get("description", "")
    if description is None:
        description = ""
    if not isinstance(description, str):
        raise SchemaError(join(floc, "description"), f"must be a string, got {json_type(description)}")

    key = next((k for k in _PARAM_KEYS if fn.get(k) is not None), None)
    if key is None:
        parameters = {"type": "object", "properties": {}}
    else:
        ploc = join(floc, key)
        raw = fn[key]
        if not isinstance(raw, dict):
            raise SchemaError(ploc, f"must be a JSON Schema object, got {json_type(raw)}")
        parameters = Normalizer(raw, ploc, budget, arguments=True).root()
        kind = parameters.get("type", "object")
        if kind != "object":
            raise SchemaError(
                join(ploc, "type"),
                f'parameters must be an object schema (type "object"), got {json.dumps(kind)}',
            )
        parameters = {"type": "object", **parameters}
        parameters.setdefault("properties", {})
        check_schema(parameters, ploc)
        _check_export_depth(parameters, ploc, 3, budget.limits)  # [{"function": {"parameters": ...}}]

    response = None
    for holder, hloc in ((fn, floc), (item, loc)):
        rkey = next((k for k in _RESPONSE_KEYS if holder.get(k) is not None), None)
        if rkey is not None:
            rloc = join(hloc, rkey)
            raw = holder[rkey]
            if not isinstance(raw, dict):
                raise SchemaError(rloc, f"must be a JSON Schema object, got {json_type(raw)}")
            response = Normalizer(raw, rloc, budget).root()
            check_schema(response, rloc)
            _check_export_depth(response, rloc, 2, budget.limits)  # [{"response": ...}]
            break

    tool = Tool(api_name, name, description, parameters, response)
    return tool, name_loc


def _check_export_depth(schema: Any, loc: str, levels_above: int, limits: InputPolicy) -> None:
    """Refuse what would not load again once exported (Tool.to_dict in a list): the
    input's depth limit counts the wrappers above the schema, and these may differ."""
    if levels_above + nesting_height(schema) > limits.max_depth:
        raise SchemaError(loc, f"nested more than {limits.max_depth} levels deep once exported as a tool list")
