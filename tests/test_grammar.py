"""Constrained decoding: the schemas it builds, the grammar it compiles (checked
with xgrammar's matcher against the real tokenizer), and the embedded model
decoding under it."""

from __future__ import annotations

import json

import jsonschema
import pytest

from envace_demo.calls import parse_action, parse_execution_result
from envace_demo.errors import ModelError
from envace_demo.models.base import Constraint, Sampling
from envace_demo.models.embedded import ensure_embedded_model
from envace_demo.models.grammar import (
    ENFORCED_FORMATS,
    GRAMMAR_STRING,
    MAX_STRING,
    MAX_PATTERN_LENGTH,
    MAX_RESULT_ITEMS,
    MAX_RESULT_STRING,
    TRAINED_RESULT_STRING,
    GrammarCache,
    bound_schema,
    call_schema,
    result_schema,
    result_string,
)
from envace_demo.schemas import find_tool, load_tools, validate_arguments

TOOLS = load_tools(
    [
        {
            "name": "get_weather",
            "description": "Current weather of a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city", "unit"],
            },
            "response": {
                "type": "object",
                "properties": {"temperature": {"type": "number"}, "condition": {"type": "string"}},
                "required": ["temperature", "condition"],
            },
        },
        {
            "name": "set_alarm",
            "description": "Set an alarm at a given hour of the day (0-23).",
            "parameters": {
                "type": "object",
                "properties": {"hour": {"type": "integer", "minimum": 0, "maximum": 23}},
                "required": ["hour"],
            },
        },
        {
            "name": "send_message",
            "description": "Send a text message to a contact.",
            "parameters": {
                "type": "object",
                "properties": {"contact": {"type": "string"}, "text": {"type": "string"}},
                "required": ["contact", "text"],
            },
        },
    ]
)
WEATHER = TOOLS[0]
ACTOR = Constraint(role="actor", tools=tuple(TOOLS), require_call=True)
ACTOR_FREE = Constraint(role="actor", tools=tuple(TOOLS))
REHEARSER = Constraint(role="rehearser")
REHEARSER_WEATHER = Constraint(role="rehearser", response_schema=WEATHER.response)


def call(name: str, arguments: dict) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def result(value) -> str:
    return "<execution_result>\n" + json.dumps(value) + "\n</execution_result>"


# ------------------------------------------------------------------ schemas


def test_bound_schema_caps_what_is_free_and_keeps_the_rest():
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
            "unit": {"type": "string", "enum": ["a", "b"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "extra": {"type": "object"},
            "anything": {},
        },
    }
    before = json.dumps(schema)
    bounded = bound_schema(schema)
    props = bounded["properties"]
    assert json.dumps(schema) == before  # the input is not modified
    # Free strings: a markup-free pattern carrying the length bound.
    assert props["name"]["pattern"] == "^[^<]{0,200}$" and props["tags"]["items"]["pattern"] == "^[^<]{0,200}$"
    assert props["code"] == schema["properties"]["code"] and props["unit"] == schema["properties"]["unit"]
    assert props["tags"]["maxItems"] == 16
    assert props["extra"]["maxProperties"] == 6 and "anyOf" in props["extra"]["additionalProperties"]
    assert "anyOf" in props["anything"]  # unconstrained value -> bounded flat shapes
    jsonschema.Draft202012Validator.check_schema(bounded)


def test_call_schema_is_one_any_of_with_the_name_first():
    schema = call_schema(TOOLS)
    assert [s["properties"]["name"] for s in schema["anyOf"]] == [{"const": t.name} for t in TOOLS]
    assert all(list(s["properties"]) == ["name", "arguments"] for s in schema["anyOf"])


def test_bound_schema_keeps_declared_lengths_and_drops_formats_it_cannot_enforce():
    schema = {
        "type": "object",
        "properties": {
            "short": {"type": "string", "minLength": 2, "maxLength": 5},
            "long": {"type": "string", "maxLength": 5000},
            "day": {"type": "string", "format": "date"},
            "odd": {"type": "string", "format": "x-custom"},
        },
    }
    props = bound_schema(schema)["properties"]
    assert props["short"] == {"type": "string", "pattern": "^[^<]{2,5}$"}
    assert props["long"]["pattern"] == f"^[^<]{{0,{MAX_PATTERN_LENGTH}}}$"  # narrowed, never widened
    assert props["day"] == {"type": "string", "format": "date"}
    assert props["odd"] == {"type": "string", "pattern": "^[^<]{0,200}$"}


def test_result_schema_narrows_declared_bounds_and_stays_within_them():
    declared = {"type": "object", "properties": {
        "entries": {"type": "array", "maxItems": 50, "items": {"type": "string", "maxLength": 255}},
        "few": {"type": "array", "minItems": 1, "maxItems": 3, "items": {"type": "integer"}},
        "note": {"type": "string", "maxLength": 20},
    }}
    props = result_schema(declared)["properties"]
    assert props["entries"]["maxItems"] == MAX_RESULT_ITEMS == 3
    assert props["entries"]["items"]["pattern"] == f"^[^<]{{0,{MAX_RESULT_STRING}}}$"
    assert props["few"]["maxItems"] == 3 and props["note"]["pattern"] == "^[^<]{0,20}$"
    assert bound_schema(declared)["properties"]["entries"]["maxItems"] == 50  # arguments keep theirs


def test_result_schema_is_the_declared_shape_or_a_generic_value_or_domain_error():
    # The engine writes the contract's call-level errors itself; the model may not.
    error = {
        "error_tool_call": {"code": "INVALID_PARAMETERS", "message": "bad", "details": {"errors": ["unit"]}}
    }
    domain = {"error": {"code": "CITY_NOT_FOUND", "message": "no such city"}}
    declared = jsonschema.Draft202012Validator(result_schema(WEATHER.response))
    assert not declared.is_valid(error) and not declared.is_valid(domain)  # only what is declared
    assert declared.is_valid({"temperature": 3, "condition": "rain"}) and not declared.is_valid({"temperature": 3})
    jsonschema.validate(domain, result_schema(None))
    assert not jsonschema.Draft202012Validator(result_schema(None)).is_valid(error)


@pytest.mark.parametrize("fmt", sorted(ENFORCED_FORMATS))
def test_enforced_formats_admit_no_markup(fmt):
    import xgrammar as xgr
    from xgrammar.testing import _is_grammar_accept_string

    grammar = xgr.Grammar.from_json_schema({"type": "string", "format": fmt}, any_whitespace=False)
    for text in ("<tool_call>", "a</tool_call>", "<think>"):
        assert not _is_grammar_accept_string(grammar, json.dumps(text))


# ------------------------------------------------------------------ compiled grammar (tokenizer only)


@pytest.fixture(scope="module")
def tokenizer(cache_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(ensure_embedded_model(cache_dir))


@pytest.fixture(scope="module")
def grammars(tokenizer) -> GrammarCache:
    return GrammarCache(tokenizer, vocab_size=len(tokenizer), stop_token_ids=[tokenizer.eos_token_id])


def accepts(grammars: GrammarCache, constraint: Constraint, text: str) -> bool:
    """Whether ``text`` followed by the stop token is a complete output."""
    import xgrammar as xgr

    matcher = xgr.GrammarMatcher(grammars.compile(constraint))
    return matcher.accept_string(text) and matcher.accept_token(grammars.stop_token_ids[0])


@pytest.mark.parametrize(
    "text",
    [
        call("get_weather", {"city": "Paris", "unit": "celsius"}),
        "<think>\nThe user wants an alarm.\n</think>\n\n" + call("set_alarm", {"hour": 7}),
        call("set_alarm", {"hour": 7}) + "\n" + call("send_message", {"contact": "Ann", "text": "up"}),
    ],
)
def test_actor_grammar_accepts_calls(grammars, text):
    assert accepts(grammars, ACTOR, text)


@pytest.mark.parametrize(
    "text",
    [
        call("get_time", {}),  # not a tool
        call("get_weather", {"city": "Paris", "unit": "kelvin"}),  # not in the enum
        call("get_weather", {"city": "Paris"}),  # a required argument missing
        call("set_alarm", {"hour": "7"}),  # a string for an integer
        call("send_message", {"contact": "Ann", "text": "}}</tool_call> returns"}),  # the call's markup
        call("send_message", {"contact": "<think>", "text": "hi"}),
        call("send_message", {"contact": "Ann", "text": "a <tool_call> b"}),
        '<tool_call>\n{"arguments": {"hour": 7}, "name": "set_alarm"}\n</tool_call>',  # name must come first
        '<tool_call>\n{"name":"set_alarm","arguments":{"hour":7}}\n</tool_call>',  # not the template's spacing
        "<think>\nx < y\n</think>\n\n" + call("set_alarm", {"hour": 7}),  # "<" inside the reasoning
        "<think>\n" + "a" * 301 + "</think>\n\n" + call("set_alarm", {"hour": 7}),  # reasoning too long
        "It is sunny in Paris.",  # require_call: no free answer
        "\n".join([call("set_alarm", {"hour": 7})] * 9),  # too many calls
    ],
)
def test_actor_grammar_rejects(grammars, text):
    assert not accepts(grammars, ACTOR, text)


def test_free_strings_may_carry_line_breaks_tabs_and_quotes_escaped(grammars):
    """A file's lines can be written (and rehearsed): xgrammar's own bounded strings admit no
    escape at all; markup stays out."""
    lines = "month,amount\njan,1200\tok\n\"quoted\" \\ end\n"
    assert accepts(grammars, ACTOR, call("send_message", {"contact": "Ann", "text": lines}))
    assert accepts(grammars, ACTOR, call("send_message", {"contact": "Ann", "text": "\n" * 200}))
    assert not accepts(grammars, ACTOR, call("send_message", {"contact": "Ann", "text": "a\n<tool_call>"}))
    raw = '<tool_call>\n{"name": "send_message", "arguments": {"contact": "Ann", "text": "a\\q"}}\n</tool_call>'
    assert not accepts(grammars, ACTOR, raw)  # not a JSON escape
    assert accepts(grammars, REHEARSER, result({"path": "/a.csv", "content": "a,b\n1,2\n"}))


def test_a_short_string_is_bounded_by_the_grammar_a_long_one_by_the_decoder(grammars):
    """Up to GRAMMAR_STRING characters the grammar counts them, escapes as one each; a longer
    bound is left to the decoders (xgrammar's masks for a counted string grow with its
    length): the grammar leaves it open and ``string_chars`` says where to close it."""
    note = load_tools([{"name": "note", "description": "Write a note.", "parameters": {
        "type": "object", "properties": {"tag": {"type": "string", "maxLength": 5}, "text": {"type": "string"}},
        "required": ["tag", "text"]}}])
    short = Constraint(role="actor", tools=tuple(note), require_call=True)
    assert accepts(grammars, short, call("note", {"tag": "a\nbcd", "text": "x"}))  # the escape counts one
    assert not accepts(grammars, short, call("note", {"tag": "abcdef", "text": "x"}))
    assert accepts(grammars, short, call("note", {"tag": "ab", "text": "x" * 201}))  # open: the decoder closes it
    assert grammars.string_chars(short) == MAX_STRING and grammars.string_chars(ACTOR) == MAX_STRING
    untrained = Constraint(role="rehearser", response_schema=WEATHER.response, result_string=GRAMMAR_STRING)
    assert grammars.string_chars(untrained) is None  # every string counted by the grammar
    assert grammars.string_chars(Constraint(role="actor", tools=(TOOLS[1],))) is None  # no free string


def test_a_trained_rehearser_may_write_longer_strings(grammars):
    content = {"path": "/system/config.ini", "content": "[network]\nproxy = none\ntimeout = 30\n" * 2, "size": 72}
    shape = {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"},
                                              "size": {"type": "integer"}}, "required": ["path", "content", "size"]}
    untrained = Constraint(role="rehearser", response_schema=shape)
    trained = Constraint(role="rehearser", response_schema=shape, result_string=TRAINED_RESULT_STRING)
    assert not accepts(grammars, untrained, result(content)) and accepts(grammars, trained, result(content))
    assert grammars.string_chars(trained) == TRAINED_RESULT_STRING  # where the decoder closes a string
    assert result_string(True) == TRAINED_RESULT_STRING and result_string(False) == MAX_RESULT_STRING


def test_actor_without_tools_may_only_answer(grammars):
    assert accepts(grammars, Constraint(role="actor"), "Hello!")
    assert not accepts(grammars, Constraint(role="actor"), call("set_alarm", {"hour": 7}))
    with pytest.raises(ModelError, match="tools is empty"):
        grammars.compile(Constraint(role="actor", require_call=True))


def test_max_calls_bounds_the_calls_of_a_turn(grammars, tokenizer):
    one_call = GrammarCache(tokenizer, len(tokenizer), grammars.stop_token_ids, max_calls=1)
    two = call("set_alarm", {"hour": 7}) + "\n" + call("set_alarm", {"hour": 8})
    assert accepts(one_call, ACTOR, call("set_alarm", {"hour": 7})) and not accepts(one_call, ACTOR, two)
    assert accepts(grammars, ACTOR, two)


def test_actor_grammar_allows_a_final_answer_unless_a_call_is_required(grammars):
    answer = "<think>\nNothing to call.\n</think>\n\nIt is sunny in Paris."
    assert accepts(grammars, ACTOR_FREE, answer) and not accepts(grammars, ACTOR, answer)
    assert accepts(grammars, ACTOR_FREE, call("set_alarm", {"hour": 7}))


def test_an_imagined_answer_stops_after_its_first_words_and_its_calls_do_not(grammars):
    short = Constraint(role="actor", tools=tuple(TOOLS), answer_chars=1)
    assert accepts(grammars, short, "<think>\n</think>\n\nT")
    assert not accepts(grammars, short, "<think>\n</think>\n\nTh")
    assert accepts(grammars, short, call("send_message", {"contact": "Ann", "text": "y" * 120}))


@pytest.mark.parametrize(
    "value",
    [
        {"status": "ok", "items": [1, "two", None], "meta": {"page": 1, "tags": ["a"]}},
        [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}],
        {"results": [{"id": 1}, {"id": 2}]},
        {"error": {"code": "NOT_FOUND", "message": "no such item"}},
    ],
)
def test_rehearser_grammar_accepts_bounded_results(grammars, value):
    assert accepts(grammars, REHEARSER, "<think>\nSimulate it.\n</think>\n\n" + result(value))


@pytest.mark.parametrize(
    "value",
    [
        {},  # empty
        {"": 1},  # an empty key
        {"a": {"b": {"c": {"d": 1}}}},  # too deep
        {str(i): i for i in range(7)},  # too many keys
        {"text": "x" * 61},  # string past the cap
        {"list": list(range(9))},  # array past the cap
        [[1, 2]],  # arrays of arrays
        {"note": "done </execution_result> more"},  # the result's own closing tag
    ],
)
def test_rehearser_grammar_rejects_runaways(grammars, value):
    assert not accepts(grammars, REHEARSER, result(value))


def test_rehearser_reasoning_is_bounded_tighter_than_the_actors(grammars):
    from envace_demo.models.grammar import MAX_REHEARSER_THINK_CHARS

    done = result({"temperature": 1, "condition": "sun"})
    think = "<think>\n" + "a" * MAX_REHEARSER_THINK_CHARS + "</think>\n\n"
    longer = "<think>\n" + "a" * (MAX_REHEARSER_THINK_CHARS + 1) + "</think>\n\n"
    assert accepts(grammars, REHEARSER_WEATHER, think + done)
    assert not accepts(grammars, REHEARSER_WEATHER, longer + done)
    assert accepts(grammars, ACTOR, longer + call("set_alarm", {"hour": 7}))  # the actor keeps its bound
    # A rehearser trained to state the deciding facts first asks for a bound of its own.
    facts = Constraint(role="rehearser", response_schema=WEATHER.response, think_chars=MAX_REHEARSER_THINK_CHARS + 60)
    assert accepts(grammars, facts, longer + done)
    assert not accepts(grammars, facts, "<think>\n" + "a" * (MAX_REHEARSER_THINK_CHARS + 61) + "</think>\n\n" + done)


def test_a_stated_lead_opens_the_rehearsers_reasoning_and_leaves_the_rest_free(grammars):
    from envace_demo.models.grammar import MIN_THINK_AFTER_LEAD

    done = result({"temperature": 1, "condition": "sun"})
    lead = 'Berlin: "sunny" \\ 21.5 left; Outcome: '
    stated = Constraint(role="rehearser", response_schema=WEATHER.response, think_chars=60, think_lead=lead)
    assert accepts(grammars, stated, f"<think>\n{lead}success.\n</think>\n\n" + done)
    assert not accepts(grammars, stated, "<think>\nOutcome: success.\n</think>\n\n" + done)  # another start
    assert not accepts(grammars, stated, done)  # the reasoning is no longer optional
    # What follows the lead keeps a bound of its own, at least the outcome's room.
    assert accepts(grammars, stated, f"<think>\n{lead}" + "a" * MIN_THINK_AFTER_LEAD + "</think>\n\n" + done)
    assert not accepts(grammars, stated, f"<think>\n{lead}" + "a" * (MIN_THINK_AFTER_LEAD + 1) + "</think>\n\n" + done)


def test_rehearser_grammar_follows_a_declared_response(grammars):
    assert accepts(grammars, REHEARSER_WEATHER, result({"temperature": 21.5, "condition": "sunny"}))
    assert not accepts(grammars, REHEARSER_WEATHER, result({"temperature": 21.5}))
    assert not accepts(grammars, REHEARSER_WEATHER, result({"temp": 21.5, "condition": "sunny"}))
    assert not accepts(grammars, REHEARSER_WEATHER, result({"error": {"code": "CITY_NOT_FOUND", "message": "m"}}))
    assert not accepts(
        grammars,
        REHEARSER_WEATHER,
        result({"error_tool_call": {"code": "INVALID_PARAMETERS", "message": "m"}}),
    )


def test_actor_grammar_follows_the_bank_ids_declared_shape(grammars):
    from envace_demo.envs.registry import create

    bank = Constraint(role="actor", tools=tuple(create("bank").tools()), require_call=True)
    assert accepts(grammars, bank, call("get_account", {"account_id": "ACC-1003"}))
    for bad in ("1003", "acc-1003", "ACC-10033", "}}</tool_call> returns"):
        assert not accepts(grammars, bank, call("get_account", {"account_id": bad})), bad


def test_grammar_cache_hit(grammars):
    constraint = Constraint(role="actor", tools=(TOOLS[1],), require_call=True)
    hits, misses = grammars.hits, grammars.misses
    first = grammars.compile(constraint)
    assert grammars.compile(Constraint(role="actor", tools=(TOOLS[1],), require_call=True)) is first
    assert (grammars.hits, grammars.misses) == (hits + 1, misses + 1)
    assert grammars.compile(Constraint(role="actor", tools=(TOOLS[1],))) is not first  # another key


# ------------------------------------------------------------------ the embedded model under constraint

GREEDY = Sampling(temperature=0, max_new_tokens=160)


@pytest.mark.slow  # the real model: a few seconds each on an idle 2-core machine
@pytest.mark.parametrize(
    "question, tool",
    [
        ("What's the weather in Paris, in celsius?", "get_weather"),
        ("Set an alarm for 7.", "set_alarm"),
        ("Send a message to Ann saying I'm running late.", "send_message"),
    ],
)
def test_embedded_actor_makes_valid_calls(embedded_backend, embedded_base_backend, question, tool):
    """Tools none of the example environments has: every call is valid with the shipped
    adapter too; the right tool is asserted for the base weights (the adapter, trained on
    the three example environments, picked send_message for the alarm)."""
    adapted = embedded_backend.prompt(
        [{"role": "user", "content": question}], tools=[t.to_openai() for t in TOOLS], thinking=True
    )
    gen = embedded_backend.generate(adapted, GREEDY, constraint=ACTOR)
    action = parse_action(gen.text, [t.name for t in TOOLS], require_call=True)
    assert action.error is None and action.calls, gen.text
    assert all(validate_arguments(find_tool(TOOLS, c.name), c.arguments) == [] for c in action.calls), gen.text
    prompt = embedded_base_backend.prompt(
        [{"role": "user", "content": question}], tools=[t.to_openai() for t in TOOLS], thinking=True
    )
    gen = embedded_base_backend.generate(prompt, GREEDY, constraint=ACTOR)
    action = parse_action(gen.text, [t.name for t in TOOLS], require_call=True)
    assert action.error is None and action.calls, gen.text
    by_name = {t.name: t for t in TOOLS}
    for c in action.calls:
        assert validate_arguments(by_name[c.name], c.arguments) == [], gen.text
    assert action.calls[0].name == tool, gen.text
    assert gen.finish_reason == "stop"


@pytest.mark.slow  # four sampled results of up to 200 tokens: ~10 s on an idle 2-core machine
def test_embedded_rehearser_results_parse(embedded_backend):
    prompt = embedded_backend.prompt(
        [
            {"role": "system", "content": "You simulate tools. Answer with the tool's JSON result."},
            {
                "role": "user",
                "content": 'Current tool to simulate:\n- name: get_weather\n- arguments: {"city": "Paris"}\n\n/think',
            },
        ]
    )
    free, declared = (
        embedded_backend.generate_many([prompt] * 2, Sampling(max_new_tokens=200, seed=0), [c] * 2)
        for c in (REHEARSER, REHEARSER_WEATHER)
    )
    for gen in free + declared:
        value, error = parse_execution_result(gen.text)
        assert error is None and gen.finish_reason == "stop", gen.text
    for gen in declared:
        value, _ = parse_execution_result(gen.text)
        if "error_tool_call" not in value:
            jsonschema.validate(value, WEATHER.response)


def test_a_reasoning_bound_from_the_budget_narrows_or_removes_the_reasoning(grammars):
    result = '<execution_result>\n{"ok": true}\n</execution_result>'
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    reasoned = "<think>\nA short thought.\n</think>\n\n" + result
    for bound, with_reasoning in ((None, True), (40, True), (5, False), (0, False)):
        rehearser = Constraint(role="rehearser", response_schema=schema, think_chars=bound)
        assert accepts(grammars, rehearser, reasoned) is with_reasoning, bound
        assert accepts(grammars, rehearser, "<think>\n</think>\n\n" + result)  # an empty one always fits
    actor = Constraint(role="actor", tools=ACTOR.tools, require_call=True, think_chars=0)
    assert not accepts(grammars, actor, "<think>\nThe user wants an alarm.\n</think>\n\n" + call("set_alarm", {"hour": 7}))
    assert accepts(grammars, actor, call("set_alarm", {"hour": 7}))


def test_what_the_call_fixes_is_pinned_in_the_rehearsed_shape(grammars):
    from envace_demo.models.grammar import echo_arguments

    response = {
        "type": "object",
        "properties": {
            "account_id": {"type": "string", "pattern": "^ACC-[0-9]{4}$"},
            "limit": {"type": "integer", "maximum": 10},
            "balance": {"type": "number"},
        },
        "required": ["account_id", "balance"],
    }
    pinned = echo_arguments(response, {"account_id": "ACC-1003", "limit": 50, "unrelated": 1})
    assert pinned["properties"]["account_id"] == {"const": "ACC-1003"}
    assert pinned["properties"]["limit"] == response["properties"]["limit"]  # 50 does not fit: left to the model
    assert response["properties"]["account_id"] == {"type": "string", "pattern": "^ACC-[0-9]{4}$"}  # a copy
    assert echo_arguments(None, {"a": 1}) is None and echo_arguments({"type": "array"}, {"a": 1}) == {"type": "array"}
    rehearser = Constraint(role="rehearser", response_schema=pinned)
    assert accepts(grammars, rehearser, '<execution_result>\n{"account_id": "ACC-1003", "balance": 5}\n</execution_result>')
    assert not accepts(grammars, rehearser, '<execution_result>\n{"account_id": "ACC-1004", "balance": 5}\n</execution_result>')


def test_a_failure_seen_for_real_may_be_rehearsed_again(grammars):
    from envace_demo.models.grammar import rehearsal_shape
    from envace_demo.record import ToolCall

    response = {"type": "object", "properties": {"path": {"type": "string"}, "size": {"type": "integer"}},
                "required": ["path", "size"], "additionalProperties": False}
    failure = {"error": {"code": "NOT_A_DIRECTORY", "message": "/notes/todo.txt is a file"}}
    listing = ToolCall("list_directory", {"path": "/notes/todo.txt"})
    error_text = '<execution_result>\n' + json.dumps(failure) + '\n</execution_result>'
    fresh = rehearsal_shape(response, "list_directory", {"path": "/notes"}, [])
    assert fresh["properties"]["path"] == {"const": "/notes"}
    assert not accepts(grammars, Constraint(role="rehearser", response_schema=fresh), error_text)
    other = rehearsal_shape(response, "list_directory", {"path": "/notes"}, [(ToolCall("read_file", {}), failure)])
    assert other == fresh  # another tool's failure says nothing about this one
    seen = rehearsal_shape(response, "list_directory", {"path": "/notes/todo.txt"}, [(listing, failure)])
    assert accepts(grammars, Constraint(role="rehearser", response_schema=seen), error_text)
    ok_text = '<execution_result>\n{"path": "/notes/todo.txt", "size": 3}\n</execution_result>'
    assert accepts(grammars, Constraint(role="rehearser", response_schema=seen), ok_text)


def test_a_model_trained_to_rehearse_may_predict_a_failure_first(grammars, scripted):
    """Served with an adapter (or an EnvACE model), the first rehearsal may already be the
    refusal; the untrained model keeps to the declared shape."""
    from envace_demo.models.grammar import rehearsal_shape, rehearses_failures

    response = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"],
                "additionalProperties": False}
    error_text = ('<execution_result>\n{"error": {"code": "READ_ONLY", "message": "/system is read-only"}}\n'
                  '</execution_result>')
    trained = rehearsal_shape(response, "write_file", {"path": "/system/a"}, [], failures=True)
    assert accepts(grammars, Constraint(role="rehearser", response_schema=trained), error_text)
    assert accepts(grammars, Constraint(role="rehearser", response_schema=trained),
                   '<execution_result>\n{"path": "/system/a"}\n</execution_result>')
    backend = scripted()
    assert not rehearses_failures(backend)
    backend.adapter = "adapters/demo-cpu"
    assert rehearses_failures(backend)
