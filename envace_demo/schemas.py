"""Tool schemas: load what people paste, in any common dialect, into one form.

Accepted dialects (mixed freely in one list):

- OpenAI chat tools ``{"type": "function", "function": {name, description, parameters}}``
  and the flat Responses-API form ``{"type": "function", "name": ..., ...}``;
- bare function objects ``{name, description, parameters}``;
- BFCL: ``"dict"``/``"float"``/``"tuple"``/``"any"`` types, ``"optional"`` flags,
  dotted names, ``required`` naming unlisted properties;
- pydantic JSON Schema: ``$defs``/``$ref``, ``anyOf``, ``title``, ``default``;
- Anthropic/MCP ``input_schema``/``inputSchema`` in place of ``parameters``, and a
  declared output under ``response``/``returns``/``output_schema``/``outputSchema``.

The result is a list of :class:`Tool`: an API-safe name, and a Draft 2020-12 JSON
Schema with local ``$ref`` inlined (constrained decoders and prompts want one
self-contained object), checked with jsonschema's ``check_schema``.

Error locations: every tool is addressed as ``tools[i]`` whatever the input's
shape (a single tool is ``tools[0]``; ``{"tools": [...]}`` and a plain list read
the same). Below that, the path follows what was pasted, so an OpenAI-wrapped tool
reads ``tools[0].function.parameters.properties.unit.type``. Problems with the
text as a whole (JSON syntax, size, empty input) are located at ``input``.
"""

from __future__ import annotations

import copy
import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import unquote

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError as _JsonSchemaError

from envace_demo.errors import SchemaError
from envace_demo.policy import DEFAULT_POLICY, InputPolicy

__all__ = ["InputPolicy", "Tool", "check_plain_json", "find_tool", "load_tools", "validate_arguments"]

_API_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_NOT_API_CHAR = re.compile(r"[^A-Za-z0-9_-]")
_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$-]*")

# BFCL (Python-flavoured) type names -> JSON Schema; None = no type constraint.
_TYPE_ALIASES: dict[str, str | None] = {"dict": "object", "float": "number", "tuple": "array", "any": None}
_JSON_TYPES = {"object", "array", "string", "number", "integer", "boolean", "null"}

# Keywords whose value is a schema, a list of schemas, or a name -> schema map.
_SCHEMA_ONE = {
    "additionalProperties",
    "items",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
}
_SCHEMA_LIST = {"anyOf", "oneOf", "allOf", "prefixItems"}
_SCHEMA_MAP = {"properties", "patternProperties", "dependentSchemas"}
# Dropped from the output: definitions are inlined, and the result is always 2020-12.
_DROPPED = {"$defs", "definitions", "$schema", "$id"}
# Keywords that only annotate; a $ref's siblings made only of these merge into it.
_ANNOTATIONS = {
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$comment",
}

# Where an object can accept names that its "properties" do not list.
_OPENING = {"patternProperties", "allOf", "anyOf", "oneOf", "if", "then", "else", "dependentSchemas"}

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
        value = _parse(source, limits)
        entries = _tool_entries(value, limits)
        budget = _Budget(limits)
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
        return [f"arguments: must be a JSON object, got {_json_type(arguments)}"]
    validator = _validator(json.dumps(tool.parameters))
    messages = []
    for err in validator.iter_errors(arguments):
        path = _join_path("", list(err.absolute_path))
        if err.validator == "required":
            missing = next(
                (p for p in err.validator_value if f"{p!r} is a required property" == err.message), None
            )
            if missing is not None:
                messages.append(f"{_join(path, missing)}: required property missing")
                continue
        messages.append(f"{path or 'arguments'}: {err.message}")
    return messages


@lru_cache(maxsize=1024)
def _validator(schema_json: str) -> Draft202012Validator:
    # Keyed by the schema's JSON text (Tool holds dicts, so it is not hashable); key
    # order is kept so that errors come in the schema's property order.
    return Draft202012Validator(json.loads(schema_json))


# ----------------------------------------------------------------------------
# Parsing and shape of the input


def _parse(source: Any, limits: InputPolicy) -> Any:
    if isinstance(source, (bytes, bytearray)):
        if len(source) > limits.max_bytes:
            raise SchemaError("input", f"too large: {len(source):,} bytes, at most {limits.max_bytes:,}")
        try:
            source = bytes(source).decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise SchemaError("input", f"not UTF-8 text (bad byte at offset {e.start})") from None
    if isinstance(source, str):
        # len() in characters is a lower bound on the UTF-8 size: check it before encoding.
        size = len(source) if len(source) > limits.max_bytes else len(source.encode("utf-8", "surrogatepass"))
        if size > limits.max_bytes:
            raise SchemaError("input", f"too large: {size:,} bytes, at most {limits.max_bytes:,}")
        if not source.strip():
            raise SchemaError("input", 'empty: paste a tool schema, a list of them, or {"tools": [...]}')
        _check_text_depth(source, limits.max_depth)
        try:
            return json.loads(source, parse_constant=_refuse_constant)
        except json.JSONDecodeError as e:
            raise SchemaError(
                "input", f"invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}"
            ) from None
        except ValueError as e:  # NaN / Infinity, refused by _refuse_constant
            raise SchemaError("input", str(e)) from None
    if isinstance(source, (dict, list)):
        # The walk stops once its lower bound on the JSON size passes the cap, so a huge
        # value costs no more than one of max_bytes; the exact size is measured after it.
        _check_value(source, _root_label(source), limits)
        size = len(json.dumps(source, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        if size > limits.max_bytes:
            raise SchemaError("input", f"too large: {size:,} bytes as JSON, at most {limits.max_bytes:,}")
        return source
    raise SchemaError("input", f"expected JSON text, bytes, a dict or a list, got {type(source).__name__}")


def check_plain_json(value: Any, where: str, limits: InputPolicy = DEFAULT_POLICY) -> None:
    """SchemaError unless ``value`` is plain JSON within ``limits`` (depth, and max_bytes as
    JSON); the walk stops as soon as it is over, so a huge value costs no more than the cap."""
    _check_value(value, where, limits, size_loc=where)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


# A JSON string literal (escapes included), or one bracket. The quantifiers are possessive
# and a string left open runs to the end of the text (a lone backslash there included), so
# every match attempt at a quote succeeds and no character is read twice: one linear pass
# whatever the text (json.loads then reports the open string, located).
_TEXT_TOKEN = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+(?:"|\\?\Z)|[\[\]{}]', re.DOTALL)


def _check_text_depth(text: str, max_depth: int) -> None:
    """Refuse deep nesting before json.loads recurses into it (RecursionError or worse),
    in one linear pass over the text."""
    if text.count("[") + text.count("{") <= max_depth:
        return
    depth = 0
    for m in _TEXT_TOKEN.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > max_depth:
                pos = m.start()
                line = text.count("\n", 0, pos) + 1
                col = pos - text.rfind("\n", 0, pos)
                raise SchemaError(
                    "input", f"nested more than {max_depth} levels deep (at line {line}, column {col})"
                )
        elif c in "]}":
            depth -= 1


def _check_value(root: Any, root_loc: str, limits: InputPolicy, size_loc: str = "input") -> None:
    """Check an already-parsed value is plain JSON and not too deep, without recursion.

    Every value counts no more than the bytes json.dumps gives it (a string its characters
    and quotes, a key with its quotes and ": ", a container its brackets and ", "): once that lower bound passes
    ``max_bytes`` the walk stops, so it never does more than a ``max_bytes`` text's work.
    Locations are built only for an error (the path is kept as a parent chain)."""
    budget = limits.max_bytes
    seen = 0
    stack: list[tuple[Any, Any, int]] = [(root, None, 1)]  # (value, (parent link, key), depth)
    while stack:
        value, link, depth = stack.pop()
        if isinstance(value, str):
            seen += len(value) + 2
        elif isinstance(value, (dict, list)):
            seen += 2 * len(value) if value else 2  # brackets, and ", " between items
            if seen > budget:  # before a child is pushed: a list of millions stops here
                raise SchemaError(size_loc, f"too large: at least {seen:,} bytes as JSON, at most {budget:,}")
            if depth > limits.max_depth:
                raise SchemaError(_link_loc(root_loc, link), f"nested more than {limits.max_depth} levels deep")
            if isinstance(value, dict):
                for k, v in value.items():
                    if not isinstance(k, str):
                        loc = _link_loc(root_loc, link)
                        raise SchemaError(loc, f"keys must be strings, got {type(k).__name__} {k!r}")
                    seen += len(k) + 4  # quotes and ": "
                    stack.append((v, (link, k), depth + 1))
            else:
                stack.extend((v, (link, i), depth + 1) for i, v in enumerate(value))
        elif isinstance(value, float) and not math.isfinite(value):
            raise SchemaError(_link_loc(root_loc, link), f"{value} is not valid JSON")
        elif not (value is None or isinstance(value, (str, int, float, bool))):
            raise SchemaError(_link_loc(root_loc, link), f"not a JSON value: {type(value).__name__}")
        else:
            seen += 1
        if seen > budget:
            raise SchemaError(size_loc, f"too large: at least {seen:,} bytes as JSON, at most {budget:,}")


def _link_loc(root_loc: str, link: Any) -> str:
    keys = []
    while link is not None:
        link, key = link
        keys.append(key)
    return _join_path(root_loc, keys[::-1])


def _root_label(value: Any) -> str:
    if isinstance(value, list):
        return "tools"
    if isinstance(value, dict) and "tools" in value:
        return ""
    return "tools[0]"


def _tool_entries(value: Any, limits: InputPolicy) -> list[tuple[str, Any]]:
    if isinstance(value, dict) and "tools" in value:
        value = value["tools"]
        if not isinstance(value, list):
            raise SchemaError("tools", f"must be a list of tools, got {_json_type(value)}")
    elif isinstance(value, dict):
        value = [value]
    elif not isinstance(value, list):
        raise SchemaError(
            "input",
            f'expected a tool object, a list of tools, or {{"tools": [...]}}, got {_json_type(value)}',
        )
    if not value:
        raise SchemaError("tools", "empty list: give at least one tool")
    if len(value) > limits.max_tools:
        raise SchemaError("tools", f"{len(value)} tools given, at most {limits.max_tools}")
    return [(f"tools[{i}]", item) for i, item in enumerate(value)]


def _load_tool(item: Any, loc: str, budget: _Budget) -> tuple[Tool, str]:
    if not isinstance(item, dict):
        raise SchemaError(loc, f"a tool must be a JSON object, got {_json_type(item)}")
    fn, floc = item, loc
    if "function" in item:  # OpenAI chat-completions wrapper
        if item.get("type", "function") != "function":
            raise SchemaError(_join(loc, "type"), f'unsupported tool type {item["type"]!r} (only "function")')
        fn, floc = item["function"], _join(loc, "function")
        if not isinstance(fn, dict):
            raise SchemaError(floc, f"must be a JSON object, got {_json_type(fn)}")

    # Our own export (Tool.to_dict) keeps the name as given beside the API-safe one.
    if isinstance(item.get("original_name"), str) and fn is not item:
        name, name_loc = item["original_name"], _join(loc, "original_name")
    elif "name" in fn:
        name, name_loc = fn["name"], _join(floc, "name")
    else:
        raise SchemaError(_join(floc, "name"), "missing: every tool needs a name")
    if not isinstance(name, str):
        raise SchemaError(name_loc, f"must be a string, got {_json_type(name)}")
    if not name.strip():
        raise SchemaError(name_loc, "is empty")
    api_name = _NOT_API_CHAR.sub("_", name)[:64]

    description = fn.get("description", "")
    if description is None:
        description = ""
    if not isinstance(description, str):
        raise SchemaError(_join(floc, "description"), f"must be a string, got {_json_type(description)}")

    key = next((k for k in _PARAM_KEYS if fn.get(k) is not None), None)
    if key is None:
        parameters = {"type": "object", "properties": {}}
    else:
        ploc = _join(floc, key)
        raw = fn[key]
        if not isinstance(raw, dict):
            raise SchemaError(ploc, f"must be a JSON Schema object, got {_json_type(raw)}")
        parameters = _Normalizer(raw, ploc, budget, arguments=True).root()
        kind = parameters.get("type", "object")
        if kind != "object":
            raise SchemaError(
                _join(ploc, "type"),
                f'parameters must be an object schema (type "object"), got {json.dumps(kind)}',
            )
        parameters = {"type": "object", **parameters}
        parameters.setdefault("properties", {})
        _check_schema(parameters, ploc)
        _check_export_depth(parameters, ploc, 3, budget.limits)  # [{"function": {"parameters": ...}}]

    response = None
    for holder, hloc in ((fn, floc), (item, loc)):
        rkey = next((k for k in _RESPONSE_KEYS if holder.get(k) is not None), None)
        if rkey is not None:
            rloc = _join(hloc, rkey)
            raw = holder[rkey]
            if not isinstance(raw, dict):
                raise SchemaError(rloc, f"must be a JSON Schema object, got {_json_type(raw)}")
            response = _Normalizer(raw, rloc, budget).root()
            _check_schema(response, rloc)
            _check_export_depth(response, rloc, 2, budget.limits)  # [{"response": ...}]
            break

    tool = Tool(api_name, name, description, parameters, response)
    return tool, name_loc


def _check_export_depth(schema: Any, loc: str, levels_above: int, limits: InputPolicy) -> None:
    """Refuse what would not load again once exported (Tool.to_dict in a list): the
    input's depth limit counts the wrappers above the schema, and these may differ."""
    if levels_above + _height(schema) > limits.max_depth:
        raise SchemaError(loc, f"nested more than {limits.max_depth} levels deep once exported as a tool list")


def _check_schema(schema: Any, loc: str) -> None:
    """What ``Draft202012Validator.check_schema`` checks, in one pass over a normalized schema.

    The metaschema judges each keyword of each schema object on its own, so the walk looks
    at one node at a time: the keywords whose values are schemas are walked into (the
    normalizer has already made them objects, lists or maps of schemas), the other known
    keywords are checked by the plain rules below, and only a keyword that fails them (or
    one without such a rule) goes to jsonschema, for its verdict and its message. jsonschema
    alone takes ~0.2 ms a node: 6 s for the 30,000 properties a 1 MB list can hold.
    """
    stack: list[tuple[Any, str]] = [(schema, loc)]
    while stack:
        node, nloc = stack.pop()
        if not isinstance(node, dict):
            continue  # true / false; anything else was refused by the normalizer
        rest = {}
        for key, value in node.items():
            if key in _SCHEMA_ONE and not isinstance(value, list):
                stack.append((value, _join(nloc, key)))
            elif key in _SCHEMA_LIST and isinstance(value, list) and value:
                stack.extend((v, _join(_join(nloc, key), i)) for i, v in enumerate(value))
            elif key in _SCHEMA_MAP and isinstance(value, dict):
                if key == "patternProperties" and not all(_is_regex(k) for k in value):
                    rest[key] = dict.fromkeys(value, True)  # jsonschema names the bad pattern
                stack.extend((v, _join(_join(nloc, key), k)) for k, v in value.items())
            elif key in _META_RULES:
                if not _META_RULES[key](value):
                    rest[key] = value
            elif key in _META_OTHER:
                rest[key] = value
        if rest:
            _check_with_jsonschema(rest, nloc)


def _check_with_jsonschema(node: dict, loc: str) -> None:
    try:
        Draft202012Validator.check_schema(node)
    except _JsonSchemaError as e:
        raise SchemaError(_join_path(loc, list(e.absolute_path)), e.message) from None


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_count(v: Any) -> bool:  # the metaschema's nonNegativeInteger (10.0 counts as an integer)
    return _is_number(v) and v >= 0 and (isinstance(v, int) or v.is_integer())


def _is_string_set(v: Any) -> bool:  # stringArray: strings, each once
    return isinstance(v, list) and all(isinstance(s, str) for s in v) and len(set(v)) == len(v)


@lru_cache(maxsize=4096)
def _is_regex(pattern: str) -> bool:  # jsonschema's "regex" format: what re.compile accepts
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError):
        return False
    return True


def _is_type(v: Any) -> bool:
    if isinstance(v, str):
        return v in _JSON_TYPES
    return isinstance(v, list) and bool(v) and _is_string_set(v) and all(t in _JSON_TYPES for t in v)


_META_RULES: dict[str, Any] = {
    "type": _is_type,
    "enum": lambda v: isinstance(v, list),
    "const": lambda v: True,
    "default": lambda v: True,
    "examples": lambda v: isinstance(v, list),
    "multipleOf": lambda v: _is_number(v) and v > 0,
    **{k: _is_number for k in ("maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum")},
    **{
        k: _is_count
        for k in (
            "maxLength",
            "minLength",
            "maxItems",
            "minItems",
            "maxContains",
            "minContains",
            "maxProperties",
            "minProperties",
        )
    },
    "pattern": lambda v: isinstance(v, str) and _is_regex(v),
    "required": _is_string_set,
    "dependentRequired": lambda v: isinstance(v, dict) and all(_is_string_set(x) for x in v.values()),
    **{k: lambda v: isinstance(v, bool) for k in ("uniqueItems", "deprecated", "readOnly", "writeOnly")},
    **{
        k: lambda v: isinstance(v, str)
        for k in ("title", "description", "$comment", "format", "contentEncoding", "contentMediaType")
    },
}
# Keywords of the 2020-12 metaschema without a rule above: jsonschema judges them (rare).
# Any other key is one the metaschema does not constrain.
_META_OTHER = {"$id", "$schema", "$anchor", "$dynamicAnchor", "$vocabulary", "$ref", "$dynamicRef", "$defs",
               *_SCHEMA_ONE, *_SCHEMA_LIST, *_SCHEMA_MAP, "dependencies"}


# ----------------------------------------------------------------------------
# Normalizing one schema document


class _Budget:
    """Counters shared by every document of one load_tools call."""

    def __init__(self, limits: InputPolicy):
        self.limits = limits
        self.refs = 0  # $ref expansions so far
        self.inlined_bytes = 0  # JSON size of everything copied in by $ref expansion


class _Normalizer:
    """Rewrite one schema document (a tool's parameters or response) to 2020-12.

    ``$ref`` pointers resolve against the document root. Each definition is
    normalized once and copied at each use; cycles, chains and total expansion
    size are bounded so that a small input cannot grow without limit.

    Normalizing the output again must change nothing (an exported tool loads back
    equal), so each node is normalized for where it ends up: ``root`` says it
    becomes the document's top object, which is read differently (no null
    default; for tool arguments, a missing "properties" is the ``{}`` added).
    """

    def __init__(self, doc: dict, loc: str, budget: _Budget, arguments: bool = False):
        self.doc, self.loc, self.budget = doc, loc, budget
        self.arguments = arguments  # the document is a tool's parameters
        self.limits = budget.limits
        # (pointer, root) -> (normalized, size, height)
        self.memo: dict[tuple[str, bool], tuple[Any, int, int]] = {}
        self.active: list[str] = ["#"]  # refs being expanded; "#" = the root itself

    def root(self) -> dict:
        return self.schema(self.doc, self.loc, 1, root=True)

    def schema(self, node: Any, loc: str, depth: int, root: bool = False) -> Any:
        if isinstance(node, bool):  # true / false are schemas in 2020-12
            return node
        if not isinstance(node, dict):
            raise SchemaError(loc, f"must be a schema object, got {_json_type(node)}")
        if depth > self.limits.max_depth:
            raise SchemaError(
                loc, f"nested more than {self.limits.max_depth} levels deep after inlining $ref"
            )
        if "$ref" in node:
            return self._ref(node, loc, depth, root)

        out: dict[str, Any] = {}
        optional_names: set[str] = set()
        for key, value in node.items():
            kloc = _join(loc, key)
            if key == "type":
                mapped = self._type(value, kloc)
                if mapped is not None:
                    out["type"] = mapped
            elif key == "optional":  # BFCL: true on a property, or a list of names on its object
                if isinstance(value, list) and all(isinstance(v, str) for v in value):
                    optional_names.update(value)
                elif _optional_flag(value) is None:
                    raise SchemaError(kloc, "must be true/false or a list of property names")
            elif key in _DROPPED:
                continue
            elif key in ("$dynamicRef", "$recursiveRef"):
                raise SchemaError(kloc, f'{key} is not supported: use $ref to "#/$defs/..."')
            elif key == "required":
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise SchemaError(
                        kloc, f"must be a list of property names (strings), got {json.dumps(value)[:80]}"
                    )
                out["required"] = list(value)
            elif key == "enum":
                if not isinstance(value, list):
                    raise SchemaError(kloc, f"must be a list of allowed values, got {_json_type(value)}")
                if not value:
                    raise SchemaError(kloc, "is empty: no value could ever match")
                out["enum"] = copy.deepcopy(value)
            elif key in ("pattern", "patternProperties") and self._refuses_regex(key, value):
                raise SchemaError(kloc, "regular expressions are not accepted here (public mode); remove it")
            elif key in _SCHEMA_MAP:
                out[key] = self._schema_map(key, value, kloc, depth, optional_names)
            elif key in _SCHEMA_LIST or (key == "items" and isinstance(value, list)):
                if not isinstance(value, list) or not value:
                    raise SchemaError(
                        kloc, f"must be a non-empty list of schemas, got {json.dumps(value)[:80]}"
                    )
                # Draft-07 tuple form "items": [...] is "prefixItems" in 2020-12.
                target = "prefixItems" if key == "items" else key
                out[target] = [self.schema(v, _join(kloc, i), depth + 2) for i, v in enumerate(value)]
            elif key == "additionalItems":  # draft-07: items beyond the tuple; else meaningless
                if isinstance(node.get("items"), list):
                    out["items"] = self.schema(value, kloc, depth + 1)
            elif key in _SCHEMA_ONE:
                out[key] = self.schema(value, kloc, depth + 1)
            else:  # annotations and validation keywords with plain values
                out[key] = copy.deepcopy(value)

        if root and self.arguments:
            out.setdefault("properties", {})  # load_tool adds it anyway; read "required" with it
        if "required" in out:
            out["required"] = self._required(out, optional_names)
        _fix_bfcl_quirks(out, null_default=not root)
        return out

    def _refuses_regex(self, key: str, value: Any) -> bool:
        patterns = list(value) if key == "patternProperties" and isinstance(value, dict) else [value]
        return any(isinstance(p, str) and self.limits.regex_refused(p) for p in patterns)

    def _type(self, value: Any, loc: str) -> str | list[str] | None:
        names = value if isinstance(value, list) else [value]
        mapped: list[str] = []
        for i, name in enumerate(names):
            nloc = _join(loc, i) if isinstance(value, list) else loc
            if not isinstance(name, str):
                raise SchemaError(nloc, f"must be a type name (string), got {_json_type(name)}")
            if name in _TYPE_ALIASES:
                alias = _TYPE_ALIASES[name]
                if alias is None:  # "any" anywhere means no constraint at all
                    return None
                name = alias
            elif name not in _JSON_TYPES:
                raise SchemaError(
                    nloc,
                    f"unknown type {json.dumps(name)} (expected one of {', '.join(sorted(_JSON_TYPES))})",
                )
            if name not in mapped:
                mapped.append(name)
        if isinstance(value, list):
            return mapped
        return mapped[0]

    def _schema_map(self, key: str, value: Any, loc: str, depth: int, optional_names: set[str]) -> dict:
        if not isinstance(value, dict):
            raise SchemaError(loc, f"must be an object mapping names to schemas, got {_json_type(value)}")
        if key == "properties" and len(value) > self.limits.max_properties:
            raise SchemaError(loc, f"{len(value)} properties, at most {self.limits.max_properties}")
        out = {}
        for name, sub in value.items():
            if key == "properties" and isinstance(sub, dict) and _optional_flag(sub.get("optional")):
                optional_names.add(name)
            out[name] = self.schema(sub, _join(loc, name), depth + 2)
        return out

    def _required(self, out: dict, optional_names: set[str]) -> list[str]:
        props = out.get("properties")
        # BFCL lists names it never defines; drop them only where nothing else could match them.
        closed = (
            isinstance(props, dict)
            and not _OPENING & out.keys()
            and out.get("additionalProperties", False) is False
            and out.get("unevaluatedProperties", False) is False
        )
        kept: list[str] = []
        for name in out["required"]:
            if name in optional_names or name in kept or (closed and name not in props):
                continue
            kept.append(name)
        return kept

    def _ref(self, node: dict, loc: str, depth: int, root: bool) -> Any:
        ref, rloc = node["$ref"], _join(loc, "$ref")
        if not isinstance(ref, str):
            raise SchemaError(rloc, f"must be a string, got {_json_type(ref)}")
        if not ref.startswith("#"):
            raise SchemaError(
                rloc, f'remote reference {ref!r} refused: only local ones ("#/$defs/Name") are resolved'
            )
        if ref != "#" and not ref.startswith("#/"):
            raise SchemaError(rloc, f'unsupported reference {ref!r}: use a JSON pointer like "#/$defs/Name"')
        if ref in self.active:
            cycle = " -> ".join(self.active[self.active.index(ref) :] + [ref])
            raise SchemaError(rloc, f"recursive reference {ref!r} cannot be inlined (cycle: {cycle})")
        budget = self.budget
        budget.refs += 1
        if budget.refs > self.limits.max_refs:
            raise SchemaError(rloc, f"more than {self.limits.max_refs} $ref expansions")

        siblings = {k: v for k, v in node.items() if k != "$ref"}
        if not siblings:
            return self._inline(ref, rloc, depth, root)
        # The siblings decide where the definition lands: merged in place, or under allOf.
        # Not read as the root: checks go under allOf, and annotations read the same anywhere.
        rest = self.schema(siblings, loc, depth)
        merge = all(k in _ANNOTATIONS for k in rest)
        inlined = self._inline(ref, rloc, depth if merge else depth + 2, root and merge)
        if merge and isinstance(inlined, dict):
            merged = {**inlined, **rest}  # e.g. pydantic's {"$ref": ..., "description": ...}
            _fix_bfcl_quirks(merged, null_default=not root)  # the site's "default" may be null
            return merged
        notes = {k: v for k, v in rest.items() if k in _ANNOTATIONS}
        checks = {k: v for k, v in rest.items() if k not in _ANNOTATIONS}
        if depth + 1 + _height(checks) > self.limits.max_depth:  # checks land 2 levels down
            raise SchemaError(loc, f"nested more than {self.limits.max_depth} levels deep beside $ref")
        return {**notes, "allOf": [inlined, checks]}

    def _inline(self, ref: str, rloc: str, depth: int, root: bool) -> Any:
        """A copy of the definition ``ref`` points to, normalized for ``depth`` and ``root``."""
        key = (ref, root)
        if key not in self.memo:
            if len(self.active) > self.limits.max_depth:
                raise SchemaError(rloc, f"$ref chain longer than {self.limits.max_depth}")
            target, tloc = self._resolve(ref, rloc)
            self.active.append(ref)
            try:
                normalized = self.schema(target, tloc, depth, root)
            finally:
                self.active.pop()
            self.memo[key] = (normalized, len(json.dumps(normalized)), _height(normalized))
        normalized, size, height = self.memo[key]
        if depth - 1 + height > self.limits.max_depth:
            raise SchemaError(
                rloc, f"nested more than {self.limits.max_depth} levels deep after inlining {ref!r}"
            )
        budget = self.budget
        budget.inlined_bytes += size
        if budget.inlined_bytes > self.limits.max_bytes:
            raise SchemaError(rloc, f"inlining $ref grows the schemas past {self.limits.max_bytes:,} bytes")
        return copy.deepcopy(normalized)

    def _resolve(self, ref: str, loc: str) -> tuple[Any, str]:
        node: Any = self.doc
        tloc = self.loc
        for token in ref[2:].split("/") if ref != "#" else []:
            token = unquote(token).replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                token = int(token)
                node = node[token]
            else:
                raise SchemaError(loc, f"reference {ref!r} points to nothing (no {token!r} in {tloc})")
            tloc = _join(tloc, token)
        return node, tloc


def _optional_flag(value: Any) -> bool | None:
    """BFCL's "optional" flag: a boolean, sometimes written as the string "True"."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return None


def _fix_bfcl_quirks(out: dict, null_default: bool) -> None:
    """Read two BFCL habits the way its ground truth does (both seen in bfcl_live_simple).

    - ``"enum"`` on an array lists the allowed *items* (live_simple_71: metrics
      ``["view"]`` against enum ``["favorability", ..., "view"]``): move it to ``items``.
    - ``"default": null`` on a typed property (Python ``x: str = None``): null is a
      legitimate value, and BFCL's answers pass it (live_simple_30, 58, 70, 81, 90).
      Not at the document root: the arguments themselves are always an object.
    """
    enum = out.get("enum")
    if out.get("type") == "array" and isinstance(enum, list) and not any(isinstance(v, list) for v in enum):
        items = out.get("items")
        if items is None or items is True:
            items = {}
        if isinstance(items, dict) and "enum" not in items:
            out["items"] = {**items, "enum": out.pop("enum")}
    if null_default and "default" in out and out["default"] is None:
        kind = out.get("type")
        if isinstance(kind, str) and kind != "null":
            out["type"] = [kind, "null"]
        elif isinstance(kind, list) and "null" not in kind:
            out["type"] = [*kind, "null"]
        if isinstance(out.get("enum"), list) and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]


def _height(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_height(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_height(v) for v in value), default=0)
    return 0


# ----------------------------------------------------------------------------
# Small helpers


def _join(loc: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{loc}[{key}]"
    if _IDENT.fullmatch(key):
        return f"{loc}.{key}" if loc else key
    return f"{loc}[{json.dumps(key)}]"


def _join_path(loc: str, path: list) -> str:
    for key in path:
        loc = _join(loc, key)
    return loc


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
