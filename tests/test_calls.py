"""The actor-output parser and the rehearser-output parser (envace_demo.calls)."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envace_demo.calls import (
    MAX_CALLS,
    format_call,
    parse_action,
    parse_execution_result,
    split_thinking,
)
from envace_demo.record import ToolCall

NAMES = {"get_weather", "math_factorial", "math.factorial"}


def call_block(obj, newlines: bool = True) -> str:
    body = obj if isinstance(obj, str) else json.dumps(obj)
    nl = "\n" if newlines else ""
    return f"<tool_call>{nl}{body}{nl}</tool_call>"


WEATHER = {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}


# ----------------------------------------------------------------------------- thinking


@pytest.mark.parametrize(
    "text, thinking, rest",
    [
        ("<think>\nplan it\n</think>\n\nThe answer.", "plan it", "The answer."),
        ("plan it</think>The answer.", "plan it", "The answer."),  # opening tag was in the prompt
        ("<think>still going", "still going", ""),  # unclosed: cut off while reasoning
        ("Just an answer.", "", "Just an answer."),
        ("<think>a</think>middle<think>b</think>end", "a\n\nb", "middleend"),
        ("<think></think>answer", "", "answer"),
    ],
)
def test_split_thinking(text, thinking, rest):
    assert split_thinking(text) == (thinking, rest)


def test_split_thinking_open_prompt_without_close_is_all_reasoning():
    assert split_thinking("still reasoning", thinking_open=True) == ("still reasoning", "")
    assert split_thinking("reason</think>answer", thinking_open=True) == ("reason", "answer")


# ----------------------------------------------------------------------------- well formed


def test_single_call_with_thinking_and_content():
    text = f"<think>\nI need the weather.\n</think>\n\nLet me check.\n{call_block(WEATHER)}"
    action = parse_action(text, NAMES)
    assert action.error is None
    assert action.calls == [ToolCall("get_weather", {"city": "Paris", "unit": "celsius"})]
    assert action.thinking == "I need the weather."
    assert action.content == "Let me check."
    assert action.text == text


def test_multiple_blocks_in_order():
    second = {"name": "math_factorial", "arguments": {"number": 5}}
    action = parse_action(f"<think>x</think>{call_block(WEATHER)}\n{call_block(second)}", NAMES)
    assert [c.name for c in action.calls] == ["get_weather", "math_factorial"]
    assert action.calls[1].arguments == {"number": 5}


def test_list_of_calls_in_one_block():
    block = call_block([WEATHER, {"name": "math.factorial", "arguments": {"number": 3}}])
    action = parse_action(f"<think>x</think>{block}", NAMES)
    assert [c.name for c in action.calls] == ["get_weather", "math.factorial"]


def test_parameters_key_instead_of_arguments():
    action = parse_action(call_block({"name": "get_weather", "parameters": {"city": "Oslo"}}), NAMES)
    assert action.calls == [ToolCall("get_weather", {"city": "Oslo"})]


def test_arguments_given_as_json_string():
    obj = {"name": "get_weather", "arguments": json.dumps({"city": "Rome"})}
    action = parse_action(call_block(obj), NAMES)
    assert action.calls == [ToolCall("get_weather", {"city": "Rome"})]


def test_missing_newlines_whitespace_and_fences():
    compact = parse_action("<think>t</think>" + call_block(WEATHER, newlines=False), NAMES)
    spaced = parse_action(
        "<think>t</think>\n\n<tool_call>   \n" + json.dumps(WEATHER) + "\n\n  </tool_call>  ", NAMES
    )
    fenced = parse_action("<tool_call>\n```json\n" + json.dumps(WEATHER) + "\n```\n</tool_call>", NAMES)
    for action in (compact, spaced, fenced):
        assert action.error is None
        assert action.calls == [ToolCall("get_weather", WEATHER["arguments"])]
        assert action.content == ""


def test_unclosed_final_block_is_a_call():
    # The model hit a stop sequence right after the JSON.
    action = parse_action(f"<think>t</think>\n<tool_call>\n{json.dumps(WEATHER)}\n", NAMES)
    assert action.error is None
    assert [c.name for c in action.calls] == ["get_weather"]


def test_forgotten_closing_tag_between_blocks():
    text = f"<tool_call>{json.dumps(WEATHER)}\n<tool_call>{json.dumps(WEATHER)}</tool_call>"
    assert len(parse_action(text, NAMES).calls) == 2


def test_call_inside_thinking_is_not_a_call():
    text = f"<think>Maybe {call_block(WEATHER)}? No.</think>\nParis is sunny."
    action = parse_action(text, NAMES)
    assert action.calls == [] and action.error is None  # a plain final answer
    assert action.content == "Paris is sunny."
    assert "<tool_call>" in action.thinking


def test_call_inside_unclosed_thinking_is_not_a_call():
    action = parse_action(f"<think>I will {call_block(WEATHER)}", NAMES)
    assert action.calls == [] and action.content == "" and action.error is None


def test_output_starting_inside_reasoning():
    action = parse_action(f"hmm {call_block(WEATHER)}</think>\n{call_block(WEATHER)}", NAMES)
    assert len(action.calls) == 1  # only the one after </think>
    assert action.thinking.startswith("hmm")


def test_no_tool_names_accepts_any_name():
    action = parse_action(call_block({"name": "anything", "arguments": {}}))
    assert action.calls == [ToolCall("anything", {})]


def test_content_excludes_call_blocks():
    action = parse_action(f"Before. {call_block(WEATHER)} After.", NAMES)
    assert action.content == "Before.  After."


# ----------------------------------------------------------------------------- errors


def assert_error(action, code: str, *fragments: str):
    assert action.error == code, (action.error, action.error_message)
    assert action.calls == []
    for fragment in fragments:
        assert fragment in action.error_message


def test_no_tool_call_found_only_when_required():
    assert parse_action("<think>t</think>It is 20 C.", NAMES).error is None
    assert_error(parse_action("<think>t</think>It is 20 C.", NAMES, require_call=True), "NO_TOOL_CALL_FOUND")
    only_in_thinking = f"<think>{call_block(WEATHER)}</think>done"
    assert_error(parse_action(only_in_thinking, NAMES, require_call=True), "NO_TOOL_CALL_FOUND")


@pytest.mark.parametrize(
    "body",
    [
        '{"name": "get_weather", "arguments": {"city": "Paris"}',  # missing brace
        "{'name': 'get_weather', 'arguments': {}}",  # Python, not JSON
        "",  # empty block
        '"get_weather"',  # a JSON string, not a call object
        "[]",  # a list holding no call
        '{"name": "get_weather", "arguments": "{city: Paris}"}',  # arguments string not JSON
    ],
)
def test_json_decode_error(body):
    text = call_block(WEATHER) + call_block(body)
    assert_error(parse_action(text, NAMES), "JSON_DECODE_ERROR", "tool_call #2")


def test_no_arguments():
    assert_error(
        parse_action(call_block({"name": "get_weather"}), NAMES),
        "NO_ARGUMENTS",
        "tool_call #1",
        "get_weather",
    )


@pytest.mark.parametrize(
    "body",
    [
        '{"name": "get_weather", "arguments": ["Paris"]}',
        '{"name": "get_weather", "arguments": null}',
        '{"name": "get_weather", "arguments": "[1, 2]"}',  # decodes, but not to an object
        '{"name": "get_weather", "arguments": {"temp": NaN}}',
        '{"name": "get_weather", "arguments": {"temp": -Infinity}}',
        '{"name": "get_weather", "arguments": {"temp": 1e999}}',  # overflows to inf
        '{"name": "get_weather", "arguments": "{\\"temp\\": NaN}"}',
    ],
)
def test_non_serializable_arguments(body):
    assert_error(parse_action(call_block(body), NAMES), "NON_SERIALIZABLE_ARGUMENTS", "tool_call #1")


@pytest.mark.parametrize(
    "obj, fragment",
    [
        ({"name": "send_email", "arguments": {}}, "send_email"),  # not offered
        ({"arguments": {"city": "Paris"}}, '"name"'),  # missing name
        ({"name": 42, "arguments": {}}, '"name"'),
        ({"name": "  ", "arguments": {}}, '"name"'),
    ],
)
def test_invalid_tool_name(obj, fragment):
    assert_error(parse_action(call_block(obj), NAMES), "INVALID_TOOL_NAME", "tool_call #1", fragment)


def test_error_in_list_item_names_the_item():
    block = call_block([WEATHER, {"name": "get_weather"}])
    assert_error(parse_action(block, NAMES), "NO_ARGUMENTS", "tool_call #1 item 2")


def test_error_keeps_thinking_and_content():
    action = parse_action("<think>plan</think>Calling. <tool_call>{oops}</tool_call>", NAMES)
    assert action.error == "JSON_DECODE_ERROR"
    assert action.thinking == "plan" and action.content == "Calling."


def test_too_many_calls():
    text = "".join(call_block(WEATHER) for _ in range(MAX_CALLS + 1))
    assert_error(parse_action(text, NAMES), "JSON_DECODE_ERROR", str(MAX_CALLS))
    assert len(parse_action("".join(call_block(WEATHER) for _ in range(MAX_CALLS)), NAMES).calls) == MAX_CALLS
    in_one_block = call_block([WEATHER] * (MAX_CALLS + 1))
    assert_error(parse_action(in_one_block, NAMES), "JSON_DECODE_ERROR", str(MAX_CALLS))


# ----------------------------------------------------------------------------- adversarial


@pytest.mark.parametrize(
    "text",
    [
        "<tool_call>" * 100_000,  # ~1.1 MB of opening tags
        "</tool_call>" * 100_000,
        "<tool_call></tool_call>" * 50_000,
        "<think>" * 150_000,
        "</think><think>" * 70_000,
        "<tool_call>" + "[" * 500_000 + "]" * 500_000 + "</tool_call>",  # deep nesting
        "<tool_call>" + '{"a":' * 200_000 + "1" + "}" * 200_000,
        "<tool_call>" + json.dumps({"name": "get_weather", "arguments": {"x": "y" * 1_000_000}}),
    ],
    ids=[
        "open-tags",
        "close-tags",
        "empty-blocks",
        "think-tags",
        "think-pairs",
        "deep-list",
        "deep-object",
        "long-string",
    ],
)
@pytest.mark.timing
def test_adversarial_input_is_fast_and_never_raises(text):
    start = time.perf_counter()
    action = parse_action(text, NAMES, require_call=True)
    assert time.perf_counter() - start < 1.0
    assert action.error is not None or action.calls  # a verdict, not an exception
    assert action.calls == [] or action.error is None


def test_deep_but_acceptable_nesting_parses_and_too_deep_fails():
    ok = {"name": "get_weather", "arguments": {"x": json.loads("[" * 30 + "]" * 30)}}
    assert parse_action(call_block(ok), NAMES).error is None
    too_deep = '{"name": "get_weather", "arguments": {"x": ' + "[" * 200 + "]" * 200 + "}}"
    assert_error(parse_action(call_block(too_deep), NAMES), "JSON_DECODE_ERROR", "nested")


def test_huge_integer_is_a_decode_error_not_a_crash():
    body = '{"name": "get_weather", "arguments": {"x": ' + "9" * 10_000 + "}}"
    assert_error(parse_action(call_block(body), NAMES), "JSON_DECODE_ERROR")


_FRAGMENTS = st.sampled_from(
    [
        "<think>",
        "</think>",
        "<tool_call>",
        "</tool_call>",
        "\n",
        "{",
        "}",
        "[",
        "]",
        '"',
        ":",
        ",",
        '"name"',
        '"arguments"',
        '"parameters"',
        '"get_weather"',
        "NaN",
        "1e999",
        "```json",
        "```",
        "x",
        " ",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_FRAGMENTS, max_size=40).map("".join))
def test_fuzz_parse_action_never_raises(text):
    action = parse_action(text, NAMES)
    assert action.text == text
    assert action.error is None or action.calls == []
    for call in action.calls:
        assert call.name in NAMES and isinstance(call.arguments, dict)
        json.dumps(call.arguments, allow_nan=False)  # always serializable


# ----------------------------------------------------------------------------- format_call


def test_format_call_matches_template_and_round_trips():
    call = ToolCall("get_weather", {"city": "São Paulo", "days": [1, 2]})
    text = format_call(call)
    payload = '{"name": "get_weather", "arguments": {"city": "São Paulo", "days": [1, 2]}}'
    assert text == f"<tool_call>\n{payload}\n</tool_call>"
    assert parse_action(text, NAMES).calls == [call]


# ----------------------------------------------------------------------------- rehearser output


@pytest.mark.parametrize(
    "text, expected",
    [
        ('<think>\nok\n</think>\n\n<execution_result>\n{"temp": 21}\n</execution_result>', {"temp": 21}),
        ('<think>ok</think><execution_result>[{"id": 1}]</execution_result>', [{"id": 1}]),  # no newlines
        ('<think>ok</think><execution_result>\n{"temp": 21}\n', {"temp": 21}),  # closing tag missing
        ('<execution_result>\n```json\n{"temp": 21}\n```\n</execution_result>', {"temp": 21}),
        ('ok</think><execution_result>{"a": 1}</execution_result>', {"a": 1}),  # opening think in prompt
        (
            '<think><execution_result>{"draft": 1}</execution_result></think>'
            '<execution_result>{"final": 2}</execution_result>',
            {"final": 2},
        ),
        (
            '<execution_result>{"error_tool_call": {"code": "TOOL_NOT_AVAILABLE", "message": "x"}}'
            "</execution_result>",
            {"error_tool_call": {"code": "TOOL_NOT_AVAILABLE", "message": "x"}},
        ),
    ],
)
def test_parse_execution_result_ok(text, expected):
    assert parse_execution_result(text) == (expected, None)


@pytest.mark.parametrize(
    "text, fragment",
    [
        ('<think>x</think>{"temp": 21}', "no <execution_result> block"),
        ('<think><execution_result>{"a": 1}</execution_result></think>', "no <execution_result> block"),
        ("<execution_result>\n{}\n</execution_result>", "empty result"),
        ("<execution_result>[]</execution_result>", "empty result"),
        ("<execution_result>\n\n</execution_result>", "empty result"),
        ("<execution_result>{temp: 21}</execution_result>", "not JSON"),
        ('<execution_result>{"t": NaN}</execution_result>', "not JSON"),
        ("<execution_result>" + "[" * 1000 + "]" * 1000 + "</execution_result>", "not JSON"),
        ('<execution_result>"sunny"</execution_result>', "object or array"),
        ("<think>never finished", "no <execution_result> block"),
    ],
)
def test_parse_execution_result_errors(text, fragment):
    value, problem = parse_execution_result(text)
    assert value is None
    assert fragment in problem


def test_closing_tag_inside_a_string_argument_does_not_split_the_block():
    text = '<tool_call>\n{"name": "write_file", "arguments": {"content": "a </tool_call> b"}}\n</tool_call> done'
    action = parse_action(text)
    assert action.error is None, action.error_message
    assert action.calls[0].arguments == {"content": "a </tool_call> b"}
    assert action.content == "done"


def test_a_block_cut_by_the_token_limit_is_dropped_after_complete_calls():
    one = '<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n</tool_call>'
    cut = one + '\n<tool_call>\n{"name": "a", "argu'
    action = parse_action(cut, ["a"], require_call=True, cut=True)
    assert action.error is None and [c.arguments for c in action.calls] == [{"x": 1}]
    # The model's own stop keeps the strict reading; and a cut first block stays an error.
    assert parse_action(cut, ["a"], cut=False).error == "JSON_DECODE_ERROR"
    assert parse_action('<tool_call>\n{"name": "a", "argu', ["a"], cut=True).error == "JSON_DECODE_ERROR"
