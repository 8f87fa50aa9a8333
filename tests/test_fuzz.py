"""Hostile input for everything that reads text from outside: the schema loader, the
actor-output parser, the rehearsal-output parser and the trajectory loader.

Each target must return a value or raise the project's typed error for it, never
anything else, and never take long (a hypothesis deadline per case, plus explicit
megabyte-sized inputs below).

Default run: ``FUZZ_EXAMPLES`` cases per target (300). The full run, 10,000 cases
per target, is marked ``fuzz`` and runs only when selected: ``pytest -m fuzz``.
"""

from __future__ import annotations

import copy
import json
import os
import time
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from envace_demo.calls import parse_action, parse_execution_result
from envace_demo.errors import SchemaError, ToolCallError
from envace_demo.record import (
    Action,
    CallStep,
    Rehearsal,
    ToolCall,
    Trajectory,
    TrajectoryError,
    Turn,
    load_trajectory,
)
from envace_demo.schemas import Tool, load_tools

FUZZ_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "300"))
FULL_EXAMPLES = 10_000
# Generous for a busy 2-core machine; a real hang (backtracking, runaway recursion) is
# orders of magnitude slower than this.
DEADLINE = timedelta(seconds=3)
NAMES = ["get_weather", "transfer", "math_factorial", "math.factorial"]

# ---- strategies ------------------------------------------------------------------------

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=40,
)

SCHEMA_KEYS = st.sampled_from(
    [
        "type",
        "properties",
        "required",
        "items",
        "enum",
        "const",
        "$ref",
        "$defs",
        "definitions",
        "anyOf",
        "oneOf",
        "allOf",
        "not",
        "if",
        "then",
        "else",
        "optional",
        "default",
        "name",
        "description",
        "parameters",
        "function",
        "tools",
        "input_schema",
        "inputSchema",
        "response",
        "returns",
        "outputSchema",
        "additionalProperties",
        "patternProperties",
        "prefixItems",
        "minimum",
        "maxLength",
        "pattern",
        "format",
        "title",
        "$schema",
        "$id",
    ]
)
SCHEMA_VALUES = st.sampled_from(
    [
        "object",
        "dict",
        "array",
        "tuple",
        "string",
        "integer",
        "float",
        "number",
        "any",
        "boolean",
        "null",
        "strng",
        "function",
        "f",
        "a.b",
        "x" * 80,
        "#/$defs/a",
        "#/$defs/b",
        "#",
        "#/",
        "#/$defs/a/properties/x",
        "http://127.0.0.1:9/schema.json",
        "file:///etc/passwd",
        "(",
        "^(a+)+$",
        "",
        0,
        -1,
        1e308,
        2**70,
        True,
        None,
        [],
        {},
    ]
)
SCHEMA_LIKE = st.recursive(
    SCHEMA_VALUES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(SCHEMA_KEYS, inner, max_size=6),
    max_leaves=50,
)
TOOL_LIKE = st.one_of(
    SCHEMA_LIKE.map(lambda p: {"name": "f", "parameters": p}),
    SCHEMA_LIKE.map(lambda p: {"type": "function", "function": {"name": "g", "parameters": p}}),
    st.builds(
        lambda p, defs: {
            "name": "h",
            "parameters": {"type": "object", "properties": {"x": p}},
            "$defs": defs,
        },
        SCHEMA_LIKE,
        st.dictionaries(st.sampled_from(["a", "b"]), SCHEMA_LIKE, max_size=2),
    ),
)
HOSTILE_TEXT = st.sampled_from(
    [
        "",
        " ",
        "\ufeff[]",
        "[" * 200 + "]" * 200,
        "{" * 200,
        '{"a":' * 50 + "1" + "}" * 50,
        "NaN",
        "[Infinity]",
        "1" * 5000,
        '"' + "\\u0000" * 50 + '"',
        '{"tools": {}}',
        '{"tools": []}',
        '{"a": 1, "a": 2}',
        "\x00\x01",
        "[1,]",
        "\ud800",
    ]
)


def _schema_sources():
    as_text = st.one_of(JSON_VALUES, SCHEMA_LIKE, TOOL_LIKE, st.lists(TOOL_LIKE, max_size=3)).map(json.dumps)
    return st.one_of(
        JSON_VALUES,
        SCHEMA_LIKE,
        TOOL_LIKE,
        st.lists(TOOL_LIKE, max_size=3),
        as_text,
        as_text.map(lambda t: t.encode("utf-8")),
        st.text(max_size=200),
        st.binary(max_size=200),
        HOSTILE_TEXT,
    )


FRAGMENTS = st.sampled_from(
    [
        "<think>",
        "</think>",
        "<think",
        "</th",
        "<tool_call>",
        "</tool_call>",
        "<tool_call",
        "tool_call>",
        "<execution_result>",
        "</execution_result>",
        "<execution_",
        "```json",
        "```",
        "\n",
        " ",
        "{",
        "}",
        "[",
        "]",
        '"',
        ":",
        ",",
        "\\",
        '"name"',
        '"arguments"',
        '"parameters"',
        '"get_weather"',
        '"math.factorial"',
        '"city"',
        '"Oslo"',
        "NaN",
        "1e999",
        "-0",
        "null",
        "true",
        '"\\u00e9"',
        '{"name": "get_weather", "arguments": {"city": "Oslo"}}',
        '"{\\"city\\": \\"Oslo\\"}"',
        "é",
        "🎭",
    ]
)
MODEL_TEXT = st.one_of(
    st.lists(FRAGMENTS, max_size=60).map("".join),
    st.text(max_size=300),
    st.builds(lambda a, b: a + b, st.lists(FRAGMENTS, max_size=20).map("".join), st.text(max_size=50)),
)


def _valid_record() -> dict:
    call = ToolCall("get_account", {"account_id": "ACC-1003"})
    action = Action(text="<think>x</think><tool_call>...</tool_call>", thinking="x", calls=[call])
    step = CallStep(
        call=call,
        valid=True,
        rehearsed={"balance": 300.0},
        real={"balance": 310.25},
        fidelity=0.8,
        rehearse_tokens=9,
        rehearser_prompt="r",
    )
    turn = Turn(index=0, action=action, calls=[step], act_tokens=12, actor_prompt="a")
    answer = Turn(index=1, action=Action(text="done", content="done"))
    rehearsal = Rehearsal(index=0, turns=[copy.deepcopy(turn)], final_answer="ok", ended="answer")
    traj = Trajectory(
        mode="parallel",
        model={"model_id": "scripted"},
        tools=[{"type": "function"}],
        prompt="balance?",
        environment="bank",
        task="check-balance",
        n=1,
        seed=0,
        sampling={"temperature": 0.6},
        rehearsals=[rehearsal],
        memory={"text": "m"},
        turns=[turn, answer],
        final_answer="done",
        success=True,
        ended="answer",
        fidelity=0.8,
        seconds=1.5,
        final_state={"accounts": {}},
    )
    return traj.to_dict()


VALID_RECORD = _valid_record()


def _slots(value, out):
    """Every (container, key) in a JSON value: the places a mutation can hit."""
    if isinstance(value, dict):
        for key in list(value):
            out.append((value, key))
            _slots(value[key], out)
    elif isinstance(value, list):
        for i in range(len(value)):
            out.append((value, i))
            _slots(value[i], out)
    return out


@st.composite
def mutated_records(draw):
    record = copy.deepcopy(VALID_RECORD)
    for _ in range(draw(st.integers(1, 4))):
        slots = _slots(record, [])
        if not slots:
            break
        container, key = draw(st.sampled_from(slots))
        if isinstance(container, dict) and draw(st.booleans()):
            del container[key]
        else:
            container[key] = draw(JSON_VALUES)
    return record


RECORDS = st.one_of(
    mutated_records(),
    mutated_records().map(json.dumps),
    JSON_VALUES,
    JSON_VALUES.map(json.dumps),
    st.text(max_size=200),
    st.binary(max_size=100),
    HOSTILE_TEXT,
)

# ---- the properties -----------------------------------------------------------------------


def check_load_tools(source) -> None:
    try:
        tools = load_tools(source)
    except SchemaError as err:
        assert str(err)
        return
    assert tools and all(isinstance(t, Tool) for t in tools)
    for tool in tools:
        Draft202012Validator.check_schema(tool.parameters)
        assert tool.parameters["type"] == "object"
        json.dumps(tool.to_dict(), allow_nan=False)
    assert load_tools([t.to_dict() for t in tools]) == tools  # normalizing again changes nothing


def check_parse_action(args) -> None:
    text, names, require, thinking_open = args
    action = parse_action(text, names, require_call=require, thinking_open=thinking_open)  # never raises
    assert isinstance(action, Action) and action.text == text
    if action.error is not None:
        assert action.error in ToolCallError.CODES and action.calls == [] and action.error_message
    if require:
        assert action.calls or action.error
    for call in action.calls:
        assert names is None or call.name in names
        assert isinstance(call.arguments, dict)
        json.dumps(call.arguments, allow_nan=False)


def check_parse_execution_result(args) -> None:
    text, thinking_open = args
    value, problem = parse_execution_result(text, thinking_open)  # never raises
    if problem is None:
        assert isinstance(value, (dict, list)) and value
        json.dumps(value, allow_nan=False)
    else:
        assert value is None and isinstance(problem, str) and problem


def check_load_trajectory(source) -> None:
    try:
        traj = load_trajectory(source)
    except TrajectoryError as err:
        assert str(err).startswith("record")
        return
    assert isinstance(traj, Trajectory)
    exported = traj.to_dict()  # what the app does with a loaded record: show it, export it
    json.dumps(exported, allow_nan=False)
    again = load_trajectory(json.dumps(exported))
    assert again.to_dict() == exported


TARGETS = {
    "load_tools": (_schema_sources(), check_load_tools),
    "parse_action": (
        st.tuples(MODEL_TEXT, st.none() | st.just(NAMES), st.booleans(), st.booleans()),
        check_parse_action,
    ),
    "parse_execution_result": (st.tuples(MODEL_TEXT, st.booleans()), check_parse_execution_result),
    "load_trajectory": (RECORDS, check_load_trajectory),
}


def _run(target: str, examples: int) -> None:
    strategy, check = TARGETS[target]
    fuzz = settings(
        max_examples=examples,
        deadline=DEADLINE,
        database=None,  # a run is judged on its own cases, not on a local example cache
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )(given(strategy)(check))
    fuzz()


@pytest.mark.parametrize("target", list(TARGETS))
def test_fuzz(target):
    _run(target, FUZZ_EXAMPLES)


@pytest.fixture
def selected_full_run(request):
    if "fuzz" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("the 10,000-case run: select it with `pytest -m fuzz`")


@pytest.mark.fuzz
@pytest.mark.parametrize("target", list(TARGETS))
def test_fuzz_full(target, selected_full_run):
    started = time.monotonic()
    _run(target, FULL_EXAMPLES)
    print(f"\n{target}: {FULL_EXAMPLES} cases in {time.monotonic() - started:.1f} s")


# ---- sizes a generator rarely reaches: each must be refused or parsed quickly ---------------

MEGABYTE = 1_000_000


def _quick(fn, *args, seconds: float = 5.0):
    started = time.monotonic()
    result = fn(*args)
    assert time.monotonic() - started < seconds, f"{fn.__name__} took too long"
    return result


@pytest.mark.parametrize(
    "text, error",
    [
        ("<tool_call>" * (MEGABYTE // 11), "JSON_DECODE_ERROR"),
        ("<tool_call>\n" + "[" * MEGABYTE, "JSON_DECODE_ERROR"),
        (
            '<tool_call>{"name": "get_weather", "arguments": ' + '{"a":' * 100_000 + "1" + "}" * 100_000,
            "JSON_DECODE_ERROR",
        ),
        ("<tool_call>" + '"' * MEGABYTE, "JSON_DECODE_ERROR"),
        (
            ("<tool_call>\n" + json.dumps({"name": "get_weather", "arguments": {}}) + "\n</tool_call>")
            * 5000,
            "JSON_DECODE_ERROR",
        ),
        ("<think>" * (MEGABYTE // 7), None),  # unfinished reasoning: no call, no answer, no error
    ],
    ids=["many-opens", "deep-brackets", "deep-objects", "quotes", "many-calls", "many-thinks"],
)
@pytest.mark.timing
def test_megabyte_actor_outputs_parse_quickly(text, error):
    action = _quick(parse_action, text, NAMES)
    assert action.calls == [] and action.error == error


@pytest.mark.parametrize(
    "text",
    [
        "<execution_result>" + "[" * MEGABYTE + "]" * MEGABYTE,
        "<execution_result>" + '{"a":' * 200_000 + "1" + "}" * 200_000,
        "<execution_result>" * (MEGABYTE // 18),
        "<execution_result>" + "1" * 100_000,
    ],
    ids=["deep-list", "deep-object", "many-opens", "huge-number"],
)
@pytest.mark.timing
def test_megabyte_rehearser_outputs_parse_quickly_into_a_problem(text):
    value, problem = _quick(parse_execution_result, text)
    assert value is None and problem


@pytest.mark.parametrize(
    "source",
    [
        "[" * MEGABYTE + "]" * MEGABYTE,
        " " * (2 * MEGABYTE),
        json.dumps([{"name": f"f{i}", "parameters": {"type": "object"}} for i in range(10_000)]),
        json.dumps({"name": "f", "parameters": {"$ref": "#/$defs/a"}, "$defs": {"a": {"$ref": "#/$defs/a"}}}),
        json.dumps(
            {
                "name": "f",
                "parameters": {"type": "object", "properties": {"x": {"$ref": "#/$defs/l0"}}},
                "$defs": {
                    f"l{i}": {"type": "array", "items": [{"$ref": f"#/$defs/l{i + 1}"}] * 2}
                    for i in range(40)
                },
            }
        ),
    ],
    ids=["deep", "blank", "too-many-tools", "ref-cycle", "ref-blowup"],
)
@pytest.mark.timing
def test_hostile_schemas_are_refused_quickly_with_a_located_error(source):
    with pytest.raises(SchemaError) as err:
        _quick(load_tools, source)
    assert err.value.location


@pytest.mark.timing
def test_outside_records_go_through_load_trajectory_for_located_errors():
    hostile = {"version": 2, "mode": "none", "model": {}, "tools": [], "prompt": "p", "turns": [{"index": 0}]}
    with pytest.raises(ValidationError):
        Trajectory.from_dict(hostile)  # for records this program made: pydantic's own error
    with pytest.raises(TrajectoryError, match=r"^record\.turns\[0\]\.action: Field required"):
        load_trajectory(hostile)
    with pytest.raises(TrajectoryError, match=r"^record\.turns\[0\]\.calls\[0\]\.call\.name: Input should be a valid string"):
        load_trajectory({**VALID_RECORD, "turns": [{"index": 0, "action": {"text": ""}, "calls": [{"call": {"name": 3}}]}]})
    with pytest.raises(TrajectoryError, match=r"^record\.version: 4 is not a version this program reads"):
        load_trajectory({**VALID_RECORD, "version": 4})
    with pytest.raises(TrajectoryError, match="not JSON"):
        load_trajectory('{"mode": NaN}')
    with pytest.raises(TrajectoryError, match="nested too deeply|not JSON"):
        _quick(load_trajectory, "[" * MEGABYTE)
    with pytest.raises(TrajectoryError, match="at most 10"):
        load_trajectory(json.dumps(VALID_RECORD), max_bytes=10)
    assert load_trajectory(json.dumps(VALID_RECORD)).to_dict() == VALID_RECORD


# ---- the loader's own metaschema check agrees with jsonschema's ------------------------------

_KEYWORD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.0, 1.0, 2.5, -1.5]),
    st.sampled_from(["", "string", "integer", "x", "(", "^a+$", "1bad", "ok_anchor", "#frag", "a#b"]),
    st.lists(st.sampled_from(["a", "b", "string", "null"]), max_size=3),
    st.dictionaries(st.sampled_from(["a", "b"]), st.lists(st.sampled_from(["a", "b"]), max_size=2), max_size=2),
)
_KEYWORDS = st.sampled_from(
    [
        "type", "enum", "const", "default", "examples", "multipleOf", "maximum", "exclusiveMinimum",
        "minLength", "maxItems", "minContains", "pattern", "required", "dependentRequired",
        "uniqueItems", "deprecated", "title", "description", "format", "$comment", "$anchor",
        "$dynamicAnchor", "$id", "x-other",
    ]
)
_NODES = st.recursive(
    st.dictionaries(_KEYWORDS, _KEYWORD_VALUES, max_size=4),
    lambda inner: st.one_of(
        st.builds(lambda d, p: {**d, "properties": p}, inner, st.dictionaries(st.sampled_from(["p", "q"]), inner | st.booleans(), max_size=2)),
        st.builds(lambda d, xs: {**d, "anyOf": xs}, inner, st.lists(inner, min_size=1, max_size=2)),
        st.builds(lambda d, x: {**d, "items": x}, inner, inner | st.booleans()),
        st.builds(lambda d, x: {**d, "patternProperties": {"(": x} if d.get("x-other") else {"^p": x}}, inner, inner),
    ),
    max_leaves=6,
)


@settings(max_examples=FUZZ_EXAMPLES, deadline=DEADLINE, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(_NODES)
def test_the_loaders_metaschema_check_agrees_with_jsonschema(node):
    from jsonschema.exceptions import SchemaError as JsonSchemaError

    from envace_demo.schemas.metaschema import check_schema

    try:
        Draft202012Validator.check_schema(node)
        expected = None
    except JsonSchemaError:
        expected = "refused"
    try:
        check_schema(node, "s")
        got = None
    except SchemaError:
        got = "refused"
    assert got == expected, node
