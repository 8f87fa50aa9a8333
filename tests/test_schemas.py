"""Tests for envace_demo.schemas: dialects, every error path, BFCL data, hostile input."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from bench import hostile
from envace_demo.errors import ConfigError, SchemaError
from envace_demo.schemas import InputPolicy as Limits, Tool, find_tool, load_tools, validate_arguments

SLICE = Path(__file__).parent / "data" / "bfcl"
FULL = Path("/work/shared/data/bfcl")

WEATHER = {
    "name": "get_weather",
    "description": "Current weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
    },
}

# Person.model_json_schema() from pydantic 2.14 (Address nested, Optional, Literal, Field(ge=0)).
PYDANTIC_PERSON = {
    "$defs": {
        "Address": {
            "properties": {
                "city": {"description": "City name", "title": "City", "type": "string"},
                "zip": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "title": "Zip"},
            },
            "required": ["city"],
            "title": "Address",
            "type": "object",
        }
    },
    "properties": {
        "name": {"title": "Name", "type": "string"},
        "age": {"minimum": 0, "title": "Age", "type": "integer"},
        "home": {"$ref": "#/$defs/Address", "description": "Where they live"},
        "unit": {"default": "c", "enum": ["c", "f"], "title": "Unit", "type": "string"},
        "tags": {"default": [], "items": {"type": "string"}, "title": "Tags", "type": "array"},
    },
    "required": ["name", "age", "home"],
    "title": "Person",
    "type": "object",
}


def tool_with(params: dict, name: str = "t") -> dict:
    return {"name": name, "description": "", "parameters": params}


def obj(**props) -> dict:
    return {"type": "object", "properties": props}


DEFAULT_LIMITS = Limits()


def error_of(source, limits: Limits = DEFAULT_LIMITS) -> str:
    with pytest.raises(SchemaError) as info:
        load_tools(source, limits)
    return str(info.value)


def quick_error(source, limits: Limits = DEFAULT_LIMITS) -> str:
    start = time.perf_counter()
    message = error_of(source, limits)
    assert time.perf_counter() - start < 2.0, "hostile input must be refused quickly"
    return message


# --------------------------------------------------------------------------- dialects


def test_bare_function_object():
    [tool] = load_tools(WEATHER)
    assert tool.name == tool.original_name == "get_weather"
    assert tool.description == "Current weather in a city."
    assert tool.parameters == WEATHER["parameters"]
    assert tool.response is None


@pytest.mark.parametrize(
    "source",
    [
        [{"type": "function", "function": WEATHER}],
        {"tools": [{"type": "function", "function": WEATHER}]},
        json.dumps({"type": "function", "function": WEATHER}),
        json.dumps([WEATHER]).encode(),
        b"\xef\xbb\xbf" + json.dumps(WEATHER).encode(),  # UTF-8 BOM, as some editors save
        {"type": "function", **WEATHER},  # OpenAI Responses API: flat
    ],
    ids=["openai-list", "tools-key", "openai-text", "bytes", "bom", "responses-flat"],
)
def test_every_wrapping_gives_the_same_tool(source):
    assert load_tools(source) == load_tools(WEATHER)


def test_bfcl_dialect():
    bfcl = {
        "name": "spotify.play",
        "description": "Play songs.",
        "parameters": {
            "type": "dict",
            "properties": {
                "artist": {"type": "string"},
                "duration": {"type": "float", "optional": True},
                "coords": {"type": "tuple", "items": {"type": "float"}},
                "data": {"type": "any", "description": "anything"},
                "region": {"type": "string", "optional": "True"},
                "filters": {
                    "type": "array",
                    "items": {
                        "type": "dict",
                        "properties": {"k": {"type": "string"}},
                        "required": ["k", "ghost"],
                    },
                },
            },
            "required": ["artist", "duration", "region", "unlisted"],
            "optional": ["coords"],
        },
    }
    [tool] = load_tools(bfcl)
    assert tool.name == "spotify_play" and tool.original_name == "spotify.play"
    p = tool.parameters
    assert p["type"] == "object" and "optional" not in p
    assert p["required"] == ["artist"]  # optional ones and unlisted "unlisted" dropped
    props = p["properties"]
    assert props["duration"] == {"type": "number"}
    assert props["coords"] == {"type": "array", "items": {"type": "number"}}
    assert props["data"] == {"description": "anything"}
    assert props["filters"]["items"] == {
        "type": "object",
        "properties": {"k": {"type": "string"}},
        "required": ["k"],
    }
    assert validate_arguments(tool, {"artist": "x", "duration": 3, "data": [1, {"a": None}]}) == []


def test_bfcl_null_default_and_array_enum():
    [tool] = load_tools(
        tool_with(
            obj(
                country={"type": "string", "default": None},
                interval={"type": "string", "enum": ["day", "week"], "default": None},
                metrics={"type": "array", "items": {"type": "string"}, "enum": ["trust", "view"]},
            )
        )
    )
    props = tool.parameters["properties"]
    assert props["country"]["type"] == ["string", "null"]
    assert props["interval"]["enum"] == ["day", "week", None]
    assert props["metrics"]["items"] == {"type": "string", "enum": ["trust", "view"]}
    assert validate_arguments(tool, {"country": None, "interval": None, "metrics": ["view"]}) == []
    assert validate_arguments(tool, {"metrics": ["views"]}) == [
        "metrics[0]: 'views' is not one of ['trust', 'view']"
    ]


def test_pydantic_schema_is_inlined():
    [tool] = load_tools(tool_with(PYDANTIC_PERSON, "person"))
    p = tool.parameters
    assert "$defs" not in p and "$ref" not in json.dumps(p)
    assert p["properties"]["home"]["description"] == "Where they live"  # the site's description wins
    assert p["properties"]["home"]["properties"]["zip"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    assert p["title"] == "Person" and p["properties"]["unit"]["default"] == "c"
    good = {"name": "Ann", "age": 3, "home": {"city": "Oslo", "zip": None}}
    assert validate_arguments(tool, good) == []
    assert validate_arguments(tool, {**good, "home": {"zip": "1"}}) == [
        "home.city: required property missing"
    ]
    assert validate_arguments(tool, {**good, "age": -1}) == ["age: -1 is less than the minimum of 0"]


def test_real_pydantic_model():
    pydantic = pytest.importorskip("pydantic")

    class Leaf(pydantic.BaseModel):
        v: float | None = None

    class Root(pydantic.BaseModel):
        leaves: list[Leaf]
        mode: str = pydantic.Field("a", description="m")

    [tool] = load_tools({"name": "r", "input_schema": Root.model_json_schema()})
    assert tool.parameters["properties"]["leaves"]["items"]["properties"]["v"]["anyOf"][1] == {"type": "null"}
    assert validate_arguments(tool, {"leaves": [{"v": 1}, {}]}) == []


def test_ref_with_validation_siblings_becomes_allof():
    params = {
        "type": "object",
        "properties": {"n": {"$ref": "#/$defs/Num", "maximum": 3, "description": "small"}},
        "$defs": {"Num": {"type": "integer"}},
    }
    [tool] = load_tools(tool_with(params))
    assert tool.parameters["properties"]["n"] == {
        "description": "small",
        "allOf": [{"type": "integer"}, {"maximum": 3}],
    }
    assert validate_arguments(tool, {"n": 4}) == ["n: 4 is greater than the maximum of 3"]


def test_ref_pointer_escapes_and_definitions():
    params = {
        "type": "object",
        "properties": {"a": {"$ref": "#/definitions/a~1b"}, "b": {"$ref": "#/definitions/sp%20ace"}},
        "definitions": {"a/b": {"type": "string"}, "sp ace": {"type": "boolean"}},
    }
    [tool] = load_tools(tool_with(params))
    assert tool.parameters["properties"] == {"a": {"type": "string"}, "b": {"type": "boolean"}}


def test_draft07_tuple_items_become_prefix_items():
    [tool] = load_tools(
        tool_with(obj(p={"type": "array", "items": [{"type": "number"}], "additionalItems": False}))
    )
    assert tool.parameters["properties"]["p"] == {
        "type": "array",
        "prefixItems": [{"type": "number"}],
        "items": False,
    }


def test_missing_parameters_and_alternative_keys():
    tools = load_tools(
        [
            {"name": "ping"},
            {"name": "anthropic", "input_schema": obj(q={"type": "string"})},
            {
                "name": "mcp",
                "inputSchema": obj(q={"type": "string"}),
                "outputSchema": obj(ok={"type": "boolean"}),
            },
            {
                "name": "resp",
                "parameters": {},
                "returns": {"type": "dict", "properties": {"x": {"type": "float"}}},
            },
            {"name": "out", "output_schema": {"type": "array", "items": {"type": "integer"}}},
            {"name": "r", "response": {"type": "string"}, "parameters": {"properties": {}}},
        ]
    )
    assert tools[0].parameters == {"type": "object", "properties": {}}
    assert tools[1].parameters["properties"] == {"q": {"type": "string"}}
    assert tools[2].response == obj(ok={"type": "boolean"})
    assert tools[3].response == obj(x={"type": "number"}) and tools[3].parameters == {
        "type": "object",
        "properties": {},
    }
    assert tools[4].response == {"type": "array", "items": {"type": "integer"}}
    assert tools[5].response == {"type": "string"} and tools[5].parameters["type"] == "object"


def test_export_round_trip_and_find_tool():
    source = [
        {
            "name": "a.b",
            "parameters": {"type": "dict", "properties": {"x": {"type": "float"}}},
            "response": obj(),
        },
        WEATHER,
    ]
    tools = load_tools(source)
    exported = [t.to_dict() for t in tools]
    assert exported[0]["function"]["name"] == "a_b" and exported[0]["original_name"] == "a.b"
    assert exported[0]["response"] == {"type": "object", "properties": {}}
    assert "response" not in exported[1]
    assert tools[1].to_openai() == {"type": "function", "function": WEATHER}
    assert [Tool.from_dict(json.loads(json.dumps(d))) for d in exported] == tools
    assert load_tools(exported) == tools
    assert find_tool(tools, "a_b") is tools[0] and find_tool(tools, "a.b") is tools[0]
    assert find_tool(tools, "nope") is None
    exported[0]["function"]["parameters"]["properties"]["x"]["type"] = "string"
    assert tools[0].parameters["properties"]["x"]["type"] == "number"  # exports are copies


@pytest.mark.parametrize(
    "params, expected",
    [
        # Found by test_fuzz: the root gets "properties": {} after "required" was read
        # without it, so loading the export dropped "x" (BFCL: required but never listed).
        ({"required": ["x"]}, {"type": "object", "required": [], "properties": {}}),
        # ... unless something else at the root can define it.
        (
            {"allOf": [obj(x={"type": "string"})], "required": ["x"]},
            {"type": "object", "allOf": [obj(x={"type": "string"})], "required": ["x"], "properties": {}},
        ),
        # A null default beside a $ref reads like one on the definition (BFCL's x: str = None).
        (
            {**obj(x={"$ref": "#/$defs/s", "default": None}), "$defs": {"s": {"type": "string"}}},
            obj(x={"type": ["string", "null"], "default": None}),
        ),
        # A definition used at the root but moved under allOf by its siblings is not the root.
        (
            {"$ref": "#/$defs/a", "minProperties": 1, "$defs": {"a": {"type": "object", "default": None}}},
            {
                "type": "object",
                "allOf": [{"type": ["object", "null"], "default": None}, {"minProperties": 1}],
                "properties": {},
            },
        ),
    ],
    ids=["root-required-unlisted", "root-required-from-allof", "null-default-beside-ref", "root-ref-in-allof"],
)
def test_loading_an_export_again_changes_nothing(params, expected):
    tools = load_tools(tool_with(params))
    assert tools[0].parameters == expected
    assert load_tools([t.to_dict() for t in tools]) == tools


def test_long_or_odd_names_are_made_api_safe():
    tools = load_tools([{"name": "x" * 80}, {"name": "héllo wörld/v2"}])
    assert tools[0].name == "x" * 64
    assert tools[1].name == "h_llo_w_rld_v2" and tools[1].original_name == "héllo wörld/v2"


def test_tool_refuses_unsafe_name():
    with pytest.raises(SchemaError, match="name: 'a.b' is not an API-safe name"):
        Tool("a.b", "a.b", "", {"type": "object", "properties": {}})


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "source, message",
    [
        (
            '{"name": "x",\n "parameters": {,}}',
            "input: invalid JSON at line 2, column 17: Expecting property name",
        ),
        ("", "input: empty"),
        (" \n\t", "input: empty"),
        ("42", 'input: expected a tool object, a list of tools, or {"tools": [...]}, got a number'),
        (
            '"get_weather"',
            'input: expected a tool object, a list of tools, or {"tools": [...]}, got a string',
        ),
        ("[1]", "tools[0]: a tool must be a JSON object, got a number"),
        ("[]", "tools: empty list"),
        ('{"tools": {}}', "tools: must be a list of tools, got an object"),
        ('{"name": "x", "parameters": {"type": "object", "x": NaN}}', "input: NaN is not valid JSON"),
        (b"\xff\xfe", "input: not UTF-8 text (bad byte at offset 0)"),
        (None, "input: expected JSON text, bytes, a dict or a list, got NoneType"),
        ({1: "x"}, "tools[0]: keys must be strings"),
        (
            {"name": "x", "parameters": {"type": "object", "default": float("inf")}},
            "tools[0].parameters.default: inf is not valid JSON",
        ),
        (
            {"name": "x", "parameters": {"type": "object", "default": {1, 2}}},
            "tools[0].parameters.default: not a JSON value: set",
        ),
    ],
)
def test_input_errors(source, message):
    assert error_of(source).startswith(message)


@pytest.mark.parametrize(
    "tools, message",
    [
        ([{"description": "no name"}], "tools[0].name: missing: every tool needs a name"),
        (
            [{"type": "function", "function": {"parameters": {}}}],
            "tools[0].function.name: missing: every tool needs a name",
        ),
        ([WEATHER, {"name": ""}], "tools[1].name: is empty"),
        ([{"name": 7}], "tools[0].name: must be a string, got a number"),
        ([{"name": "x", "description": ["d"]}], "tools[0].description: must be a string, got a list"),
        ([{"type": "function", "function": "x"}], "tools[0].function: must be a JSON object, got a string"),
        (
            [{"type": "retrieval", "function": {}}],
            "tools[0].type: unsupported tool type 'retrieval' (only \"function\")",
        ),
        (
            [WEATHER, {"name": "b"}, WEATHER],
            "tools[2].name: duplicate tool name 'get_weather' (also tools[0])",
        ),
        (
            [{"name": "a_b"}, {"type": "function", "function": {"name": "a.b"}}],
            "tools[1].function.name: 'a.b' and 'a_b' (tools[0]) both become 'a_b'"
            " once made API-safe; rename one",
        ),
        ([{"name": "x", "parameters": []}], "tools[0].parameters: must be a JSON Schema object, got a list"),
        (
            [{"name": "x", "parameters": {"type": "string"}}],
            'tools[0].parameters.type: parameters must be an object schema (type "object"), got "string"',
        ),
        (
            [{"name": "x", "returns": "a number"}],
            "tools[0].returns: must be a JSON Schema object, got a string",
        ),
        (
            [{"name": "x", "parameters": {"type": 3}}],
            "tools[0].parameters.type: must be a type name (string), got a number",
        ),
    ],
)
def test_tool_errors(tools, message):
    assert error_of(tools) == message


@pytest.mark.parametrize(
    "params, location, problem",
    [
        (obj(unit={"type": "strng"}), "properties.unit.type", 'unknown type "strng"'),
        (obj(unit={"type": ["string", "nul"]}), "properties.unit.type[1]", 'unknown type "nul"'),
        (
            {"type": "object", "properties": ["a"]},
            "properties",
            "must be an object mapping names to schemas, got a list",
        ),
        (obj(a=3), "properties.a", "must be a schema object, got a number"),
        (
            {"type": "object", "properties": {}, "required": "a"},
            "required",
            "must be a list of property names (strings)",
        ),
        (
            {"type": "object", "properties": {}, "required": [1]},
            "required",
            "must be a list of property names (strings)",
        ),
        (
            obj(a={"type": "string", "enum": "a,b"}),
            "properties.a.enum",
            "must be a list of allowed values, got a string",
        ),
        (obj(a={"type": "string", "enum": []}), "properties.a.enum", "is empty: no value could ever match"),
        (obj(a={"anyOf": []}), "properties.a.anyOf", "must be a non-empty list of schemas"),
        (obj(a={"type": "array", "items": 5}), "properties.a.items", "must be a schema object, got a number"),
        (
            obj(a={"type": "string", "optional": 1}),
            "properties.a.optional",
            "must be true/false or a list of property names",
        ),
        (
            obj(a={"$ref": "#/$defs/Missing"}),
            "properties.a.$ref",
            "reference '#/$defs/Missing' points to nothing",
        ),
        (obj(a={"$ref": 5}), "properties.a.$ref", "must be a string, got a number"),
        (
            obj(a={"$ref": "http://example.com/s.json"}),
            "properties.a.$ref",
            "remote reference 'http://example.com/s.json' refused",
        ),
        (
            obj(a={"$ref": "file:///etc/passwd"}),
            "properties.a.$ref",
            "remote reference 'file:///etc/passwd' refused",
        ),
        (obj(a={"$ref": "other.json#/x"}), "properties.a.$ref", "remote reference 'other.json#/x' refused"),
        (obj(a={"$ref": "#node"}), "properties.a.$ref", "unsupported reference '#node'"),
        (obj(a={"$dynamicRef": "#meta"}), "properties.a.$dynamicRef", "$dynamicRef is not supported"),
        (
            obj(a={"$ref": "#"}),
            "properties.a.$ref",
            "recursive reference '#' cannot be inlined (cycle: # -> #)",
        ),
        (
            {
                **obj(a={"$ref": "#/$defs/A"}),
                "$defs": {"A": obj(b={"$ref": "#/$defs/B"}), "B": {"items": {"$ref": "#/$defs/A"}}},
            },
            "$defs.B.items.$ref",
            "recursive reference '#/$defs/A' cannot be inlined (cycle: #/$defs/A -> #/$defs/B -> #/$defs/A)",
        ),
        (obj(a={"type": "integer", "minimum": "5"}), "properties.a.minimum", "'5' is not of type 'number'"),
        (obj(a={"type": "string", "pattern": "(["}), "properties.a.pattern", "'([' is not a 'regex'"),
        (
            obj(a={"type": "array", "uniqueItems": "yes"}),
            "properties.a.uniqueItems",
            "'yes' is not of type 'boolean'",
        ),
    ],
)
def test_schema_errors_are_located(params, location, problem):
    message = error_of([WEATHER, {"type": "function", "function": tool_with(params)}])
    assert message.startswith(f"tools[1].function.parameters.{location}: {problem}")


def test_location_of_odd_property_names_is_quoted():
    message = error_of(tool_with(obj(**{"unit.name": {"type": "strng"}})))
    assert message.startswith('tools[0].parameters.properties["unit.name"].type: unknown type')


def test_limits_are_checked():
    with pytest.raises(ConfigError, match="InputPolicy.max_tools must be a positive integer"):
        Limits(max_tools=0)
    assert (
        error_of([{"name": f"t{i}"} for i in range(4)], Limits(max_tools=3))
        == "tools: 4 tools given, at most 3"
    )
    many = obj(**{f"p{i}": {"type": "string"} for i in range(6)})
    assert (
        error_of(tool_with(many), Limits(max_properties=5))
        == "tools[0].parameters.properties: 6 properties, at most 5"
    )
    refs = {**obj(**{f"p{i}": {"$ref": "#/$defs/S"} for i in range(4)}), "$defs": {"S": {"type": "string"}}}
    assert (
        error_of(tool_with(refs), Limits(max_refs=3))
        == "tools[0].parameters.properties.p3.$ref: more than 3 $ref expansions"
    )
    assert load_tools(tool_with(refs), Limits(max_refs=4))[0].parameters["properties"]["p3"] == {
        "type": "string"
    }


# --------------------------------------------------------------------------- hostile input


@pytest.mark.timing
def test_deeply_nested_text_is_refused_quickly():
    assert quick_error("[" * 100_000) == "input: nested more than 32 levels deep (at line 1, column 33)"
    text = '{"a":' * 10_000 + "1" + "}" * 10_000
    assert quick_error(text).startswith("input: nested more than 32 levels deep")


def test_brackets_inside_strings_do_not_count_as_nesting():
    [tool] = load_tools(json.dumps(tool_with(obj(a={"type": "string", "description": "[{" * 1000 + '\\"'}))))
    assert tool.parameters["properties"]["a"]["description"].startswith("[{[{")


@pytest.mark.timing
def test_deeply_nested_dict_is_refused_quickly():
    deep: dict = {}
    cursor = deep
    for _ in range(10_000):
        cursor["a"] = {}
        cursor = cursor["a"]
    message = quick_error({"name": "x", "parameters": deep})
    assert message.startswith("tools[0].parameters.a.a.") and message.endswith(
        ": nested more than 32 levels deep"
    )


def test_what_loads_near_the_depth_limit_loads_again_once_exported():
    deep: dict = {"type": "object"}
    for _ in range(14):
        deep = obj(a=deep)  # 29 levels of JSON under "parameters"
    tools = load_tools(tool_with(deep))
    assert load_tools([t.to_dict() for t in tools]) == tools
    # Two levels more still fit the input, but not the export's deeper wrapping.
    message = error_of(tool_with(obj(a=deep)))
    assert message == "tools[0].parameters: nested more than 32 levels deep once exported as a tool list"
    assert error_of({"name": "r", "response": obj(a=deep)}).startswith("tools[0].response: nested more")


@pytest.mark.timing
def test_self_containing_dict_is_refused():
    loop: dict = {"type": "object"}
    loop["properties"] = {"me": loop}
    assert quick_error(tool_with(loop)).endswith("nested more than 32 levels deep")


@pytest.mark.timing
def test_huge_input_is_refused_before_parsing():
    big = "[" + ",".join(f'{{"name": "t{i}"}}' for i in range(100_000)) + "]"
    assert quick_error(big).startswith("input: too large: 1,")
    assert quick_error(big.encode()).startswith("input: too large: 1,")
    assert quick_error({"name": "x", "description": "d" * 1_000_001}).startswith("input: too large: at least 1,000,0")
    assert quick_error("x" * 50_000_000).startswith("input: too large: 50,000,000 bytes")


@pytest.mark.timing
def test_exponential_ref_expansion_is_bounded():
    # Each level holds ten refs to the one below: 10**6 copies if fully inlined.
    defs = {"L0": {"type": "string"}}
    for i in range(1, 7):
        defs[f"L{i}"] = {"type": "array", "items": {"anyOf": [{"$ref": f"#/$defs/L{i - 1}"}] * 10}}
    message = quick_error(tool_with({**obj(top={"$ref": "#/$defs/L6"}), "$defs": defs}))
    assert "inlining $ref grows the schemas past 1,000,000 bytes" in message


@pytest.mark.timing
def test_long_ref_chain_is_bounded():
    defs = {f"D{i}": {"$ref": f"#/$defs/D{i + 1}"} for i in range(5000)}
    defs["D5000"] = {"type": "string"}
    assert "$ref chain longer than 32" in quick_error(
        tool_with({**obj(a={"$ref": "#/$defs/D0"}), "$defs": defs})
    )


@pytest.mark.timing
def test_wide_ref_fan_out_is_bounded():
    params = {
        **obj(**{f"p{i}": {"$ref": "#/$defs/S"} for i in range(500)}),
        "$defs": {"S": {"type": "string"}},
    }
    message = quick_error([tool_with(params, f"t{i}") for i in range(3)])
    assert message == "tools[2].parameters.properties.p0.$ref: more than 1000 $ref expansions"


@pytest.mark.timing
def test_deep_refs_are_bounded_by_depth():
    defs = {"L0": {"type": "string"}}
    for i in range(1, 40):
        defs[f"L{i}"] = obj(x={"$ref": f"#/$defs/L{i - 1}"})
    message = quick_error(tool_with({**obj(top={"$ref": "#/$defs/L39"}), "$defs": defs}))
    assert "nested more than 32 levels deep after inlining" in message


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)
SCHEMA_WORDS = st.sampled_from(
    [
        "type",
        "properties",
        "required",
        "items",
        "enum",
        "$ref",
        "anyOf",
        "optional",
        "$defs",
        "name",
        "parameters",
        "function",
        "tools",
        "dict",
        "float",
        "any",
        "object",
        "#/$defs/a",
        "a",
        "default",
    ]
)
SCHEMA_LIKE = st.recursive(
    st.none() | st.booleans() | st.integers() | SCHEMA_WORDS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(SCHEMA_WORDS, inner, max_size=5),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(JSON_VALUES, SCHEMA_LIKE, SCHEMA_LIKE.map(lambda p: {"name": "f", "parameters": p})))
def test_any_json_gives_tools_or_schema_error(value):
    for source in (value, json.dumps(value)):
        try:
            tools = load_tools(source)
        except SchemaError as e:
            assert e.location or e.problem
        else:
            for tool in tools:
                Draft202012Validator.check_schema(tool.parameters)
                assert tool.parameters["type"] == "object"
                assert load_tools([t.to_dict() for t in tools]) == tools  # normalization is stable


# --------------------------------------------------------------------------- validation


def test_validate_arguments_messages():
    [tool] = load_tools(WEATHER)
    assert validate_arguments(tool, {"city": "Oslo"}) == []
    assert validate_arguments(tool, {"city": "Oslo", "unit": "kelvin"}) == [
        "unit: 'kelvin' is not one of ['celsius', 'fahrenheit']"
    ]
    assert validate_arguments(tool, {}) == ["city: required property missing"]
    assert validate_arguments(tool, {"city": 3}) == ["city: 3 is not of type 'string'"]
    assert validate_arguments(tool, ["Oslo"]) == ["arguments: must be a JSON object, got a list"]


def test_validate_arguments_numbers_follow_json_schema():
    [tool] = load_tools(
        tool_with({"type": "dict", "properties": {"x": {"type": "float"}, "n": {"type": "integer"}}})
    )
    assert validate_arguments(tool, {"x": 10, "n": 2}) == []  # an int is a fine float (BFCL agrees)
    assert validate_arguments(tool, {"x": "10", "n": True}) == [
        "x: '10' is not of type 'number'",
        "n: True is not of type 'integer'",
    ]


def test_validate_arguments_root_level_errors_say_arguments():
    [tool] = load_tools(tool_with({"type": "object", "properties": {}, "additionalProperties": False}))
    assert validate_arguments(tool, {"x": 1}) == [
        "arguments: Additional properties are not allowed ('x' was unexpected)"
    ]


# --------------------------------------------------------------------------- BFCL data

# Ground truths that cannot validate whatever the normalization: the expected value
# is a Python expression naming an earlier result, where the schema asks for an array.
BFCL_UNFIXABLE = {
    ("parallel_multiple_21", "linear_regression_fit"): "x: \"data['sales']\" is not of type 'array'"
}


def _expected(allowed: list):
    """BFCL answer -> one value: the first allowed one; nested dicts hold allowed lists too."""
    values = [v for v in allowed if v != ""]
    if not values:
        return None, False
    return _expand(values[0]), True


def _expand(value):
    if isinstance(value, dict):
        out = {}
        for key, allowed in value.items():
            v, given = _expected(allowed)
            if given:
                out[key] = v
        return out
    if isinstance(value, list):
        return [_expand(v) if isinstance(v, dict) else v for v in value]
    return value


def _check_bfcl(folder: Path) -> tuple[int, int]:
    records = calls = 0
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            records += 1
            tools = load_tools(record["function"])
            assert len(tools) == len(record["function"]), record["id"]
            for tool in tools:
                assert tool.parameters["type"] == "object"
                json.dumps(tool.to_openai())
            for call in record["ground_truth"]:
                for name, params in call.items():
                    tool = find_tool(tools, name)
                    assert tool is not None, (record["id"], name)
                    args = {}
                    for param, allowed in params.items():
                        value, given = _expected(allowed)
                        if given:
                            args[param] = value
                    errors = validate_arguments(tool, args)
                    calls += 1
                    if (record["id"], name) in BFCL_UNFIXABLE:
                        assert BFCL_UNFIXABLE[record["id"], name] in errors
                    else:
                        assert errors == [], (record["id"], args, errors)
    return records, calls


def test_bfcl_slice_loads_and_ground_truth_validates():
    records, calls = _check_bfcl(SLICE)
    assert records == 130 and calls > 150


@pytest.mark.skipif(not FULL.is_dir(), reason="full BFCL copy not present")
def test_full_bfcl_loads_and_ground_truth_validates():
    records, calls = _check_bfcl(FULL)
    assert records == 600 and calls > 700


def test_bfcl_names_are_rewritten_and_found():
    record = json.loads((SLICE / "bfcl_simple.jsonl").read_text().splitlines()[1])
    [tool] = load_tools(record["function"])
    assert (tool.name, tool.original_name) == ("math_factorial", "math.factorial")
    assert find_tool([tool], "math.factorial") is tool


# --------------------------------------------------------------------------- linear time on hostile text


def _seconds(text: str, limits: Limits, repeats: int = 5) -> float:
    import gc

    best = float("inf")
    gc.collect()
    gc.disable()  # a collection inside one run only would read as growth
    try:
        for _ in range(repeats):
            start = time.perf_counter()
            try:
                load_tools(text, limits)
            except SchemaError:
                pass
            best = min(best, time.perf_counter() - start)
    finally:
        gc.enable()
    return best


@pytest.mark.parametrize("family", sorted(hostile.FAMILIES))
@pytest.mark.timing
def test_every_hostile_family_is_answered_in_time_linear_in_its_size(family):
    # 16x the text must cost about 16x the time, not 256x (quadratic): the ratio of the best
    # of five runs at 62.5 KB and at 1 MB, with room for noise on a busy machine.
    limits = Limits(max_bytes=2_000_000)
    small, large = hostile.families(62_500)[family], hostile.families(1_000_000)[family]
    t_small, t_large = _seconds(small, limits), _seconds(large, limits)
    floor = 0.002  # below this a timer reads mostly noise
    assert max(t_large, floor) / max(t_small, floor) < 64, (family, t_small, t_large)


@pytest.mark.timing
def test_an_open_string_of_escaped_quotes_after_many_brackets_is_read_once():
    # Quadratic before: each escaped quote restarted a scan to the end (47 s at 64 KB).
    for tail in ("", "\\"):
        text = "[]" * 33 + '"' + '\\"' * 400_000 + tail
        assert quick_error(text) == "input: invalid JSON at line 1, column 3: Extra data"
    text = "[" * 40 + '"' + '\\"' * 400_000
    assert quick_error(text) == "input: nested more than 32 levels deep (at line 1, column 33)"


def test_brackets_inside_strings_and_escapes_do_not_count_as_nesting():
    deep_text = json.dumps("[" * 100 + '\\"[{' * 100)
    tools = load_tools('{"name": "t", "description": %s}' % deep_text)
    assert tools[0].description == json.loads(deep_text)
    # A string that closes on an escaped backslash ends there: what follows is counted.
    text = '[{"name": "t", "description": "a\\\\"}' + "," + "[" * 40 + "]" * 40 + "]"
    assert error_of(text).startswith("input: nested more than 32 levels deep (at line 1, column")


def test_the_depth_error_is_located_on_the_line_it_happens():
    text = '{\n  "tools": [\n' + "[" * 40
    assert error_of(text) == "input: nested more than 32 levels deep (at line 3, column 31)"


@pytest.mark.timing
def test_a_huge_parsed_value_is_refused_before_it_is_walked_whole():
    # The walk stops once its lower bound on the JSON size passes the cap: a list of
    # 2 M items is refused on its length, a deep tree of them part-way through.
    items = [{"k": i} for i in range(2_000_000)]
    assert quick_error(items) == "input: too large: at least 4,000,000 bytes as JSON, at most 1,000,000"
    spread = {"tools": [{"name": f"t{i}", "x": [{"k": j} for j in range(200)]} for i in range(10_000)]}
    start = time.perf_counter()
    message = error_of(spread)
    took = time.perf_counter() - start
    assert message.startswith("input: too large: at least 1,000,0")
    # An exact-size check would dump all 2 M items; the bounded walk reads about 1/20 of them.
    start = time.perf_counter()
    json.dumps(spread)
    assert took < time.perf_counter() - start


def test_the_parsed_size_bound_never_refuses_what_fits():
    value = [{"name": f"t{i}", "description": "é" * i, "parameters": {"type": "object"}} for i in range(20)]
    exact = len(json.dumps(value, ensure_ascii=False).encode())
    assert len(load_tools(value, Limits(max_bytes=exact))) == 20
    assert error_of(value, Limits(max_bytes=exact - 1)).startswith("input: too large")


def test_the_fast_metaschema_check_says_what_jsonschema_says():
    bad = [
        ({"type": "string", "minLength": -1}, "tools[0].parameters.properties.s.minLength"),
        ({"type": "number", "multipleOf": 0}, "tools[0].parameters.properties.s.multipleOf"),
        ({"type": "string", "pattern": "("}, "tools[0].parameters.properties.s.pattern"),
        ({"type": "string", "title": 3}, "tools[0].parameters.properties.s.title"),
        ({"type": "array", "uniqueItems": "yes"}, "tools[0].parameters.properties.s.uniqueItems"),
        ({"type": "object", "dependentRequired": {"a": ["b", "b"]}}, "tools[0].parameters.properties.s.dependentRequired.a"),
        ({"type": "string", "$anchor": "1bad"}, "tools[0].parameters.properties.s.$anchor"),
    ]
    for schema, where in bad:
        with pytest.raises(Exception) as expected:
            Draft202012Validator.check_schema(schema)
        message = error_of(tool_with({"type": "object", "properties": {"s": schema}}))
        assert message == f"{where}: {expected.value.message}"
    ok = {"type": "integer", "minimum": -3, "maxLength": 10.0, "examples": [1], "deprecated": False, "x-any": {"$id": 1}}
    assert load_tools(tool_with({"type": "object", "properties": {"s": ok}}))[0].parameters["properties"]["s"] == ok
