"""The two roles' prompts against the EnvACE contract (method doc §2, §3)."""

import json

import pytest

from envace_demo.calls import parse_action
from envace_demo.prompts import (
    REHEARSER_SYSTEM,
    Conversation,
    Turn,
    actor_prompt,
    rehearser_messages,
    rehearser_prompt,
)
from envace_demo.record import CallStep, ToolCall
from envace_demo.schemas import load_tools

import training_format

TOOLS = load_tools([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather now.",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
])


LATEST = '<think>\nnow Paris\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
FIRST = '<think>\nneed weather\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'


def _conversation():
    action = parse_action(FIRST)
    conv = Conversation("Weather in Oslo and Paris?")
    conv.turns.append(Turn(0, action, [CallStep(action.calls[0], rehearsed={"temp_c": 3})]))
    return conv




def _user(tools, known, conv, latest, call, tool, **kw):
    return rehearser_messages(tools, known, conv, latest, call, tool, **kw)[1]["content"]


def _openai(tools):
    return [t.to_openai() for t in tools]


def test_golden_first_call_matches_the_training_builders():
    conv = Conversation("Weather in Oslo?")
    call = ToolCall("get_weather", {"city": "Oslo"})
    got = _user(TOOLS, [], conv, FIRST, call, TOOLS[0])
    want = training_format.user_message(
        _openai(TOOLS), {}, [{"role": "user", "content": "Weather in Oslo?"}], FIRST, TOOLS[0].to_openai(), {"city": "Oslo"}
    )
    assert got == want
    assert "Previous tool calls and results (few-shot): <unavailable>\n\nCurrent conversation history:" in got
    assert '- input schema (JSON Schema):\n{\n"type": "function",\n"function": {' in got


def test_golden_with_few_shot_and_history_keeping_the_callers_reasoning():
    conv = _conversation()
    known = [(ToolCall("get_weather", {"city": "Oslo"}), {"temp_c": 3}),
             (ToolCall("get_time", {"tz": "CET"}), {"time": "10:00"}),
             (ToolCall("get_weather", {"city": "Rome"}), {"temp_c": 14})]
    got = _user(TOOLS, known, conv, LATEST, ToolCall("get_weather", {"city": "Paris"}), TOOLS[0])
    messages = [
        {"role": "user", "content": "Weather in Oslo and Paris?"},
        {"role": "assistant", "content": "<think>\nneed weather\n</think>\n\n",
         "tool_calls": [{"function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
        {"role": "tool", "name": "get_weather", "content": '{"temp_c": 3}'},
    ]
    # Grouped by tool in order of first appearance, results as the tool messages' text.
    by_tool = {"get_weather": [({"city": "Oslo"}, '{"temp_c": 3}'), ({"city": "Rome"}, '{"temp_c": 14}')],
               "get_time": [({"tz": "CET"}, '{"time": "10:00"}')]}
    want = training_format.user_message(_openai(TOOLS), by_tool, messages, LATEST, TOOLS[0].to_openai(), {"city": "Paris"})
    assert got == want
    assert "Assistant: <think>\nneed weather\n</think>\n<tool_call>" in got  # the caller's reasoning stays
    assert "\n\nTool[get_weather]: {\"temp_c\": 3}" in got


def test_golden_non_ascii_arguments_are_escaped_in_blocks_and_kept_in_the_history():
    conv = Conversation("Météo à Zürich ?")
    action = parse_action('<think>\n\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich"}}\n</tool_call>')
    conv.turns.append(Turn(0, action, [CallStep(action.calls[0], rehearsed={"ciel": "dégagé"})]))
    call = ToolCall("get_weather", {"city": "Zürich"})
    got = _user(TOOLS, [(call, {"ciel": "dégagé"})], conv, action.text, call, TOOLS[0])
    messages = [
        {"role": "user", "content": "Météo à Zürich ?"},
        {"role": "assistant", "content": "<think>\n\n</think>\n\n",
         "tool_calls": [{"function": {"name": "get_weather", "arguments": '{"city": "Zürich"}'}}]},
        {"role": "tool", "name": "get_weather", "content": '{"ciel": "dégagé"}'},
    ]
    want = training_format.user_message(_openai(TOOLS), {"get_weather": [({"city": "Zürich"}, '{"ciel": "dégagé"}')]},
                                         messages, action.text, TOOLS[0].to_openai(), {"city": "Zürich"})
    assert got == want
    assert '"city": "Z\\u00fcrich"' in got and 'User: Météo à Zürich ?' in got


def test_golden_two_calls_in_one_turn_share_the_history_and_the_raw_response():
    two = ('<think>\nboth\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
           '\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>')
    conv = Conversation("Oslo and Rome?")
    first = _user(TOOLS, [], conv, two, ToolCall("get_weather", {"city": "Oslo"}), TOOLS[0])
    second = _user(TOOLS, [], conv, two, ToolCall("get_weather", {"city": "Rome"}), TOOLS[0])
    for city, got in (("Oslo", first), ("Rome", second)):
        want = training_format.user_message(_openai(TOOLS), {}, [{"role": "user", "content": "Oslo and Rome?"}], two,
                                             TOOLS[0].to_openai(), {"city": city})
        assert got == want


def test_golden_after_a_failed_call_and_for_a_tool_outside_the_whitelist():
    conv = Conversation("Weather?")
    failed = ToolCall("get_weather", {"city": "Atlantis"})
    known = [(failed, {"error": {"code": "NOT_FOUND", "message": "no such city"}})]
    got = _user(TOOLS, known, conv, "x", failed, TOOLS[0])
    by_tool = {"get_weather": [({"city": "Atlantis"}, '{"error": {"code": "NOT_FOUND", "message": "no such city"}}')]}
    assert got == training_format.user_message(_openai(TOOLS), by_tool, [{"role": "user", "content": "Weather?"}], "x",
                                                TOOLS[0].to_openai(), {"city": "Atlantis"})
    unknown = _user(TOOLS, [], conv, "x", ToolCall("send_fax", {}), None)
    assert "- input schema (JSON Schema):\n<schema unavailable>\n" in unknown


def test_the_response_schema_is_one_extra_line_after_the_arguments():
    (tool,) = load_tools([{"name": "get_weather", "parameters": {"type": "object", "properties": {}},
                           "x-response-schema": {"type": "object", "properties": {"temp_c": {"type": "number"}}}}])
    assert tool.response is not None  # the OpenAI-format key is accepted
    conv = Conversation("hi")
    plain = _user([tool], [], conv, "x", ToolCall("get_weather", {}), tool, response_schema=False)
    extra = _user([tool], [], conv, "x", ToolCall("get_weather", {}), tool)
    line = '- response schema (JSON Schema): {"type":"object","properties":{"temp_c":{"type":"number"}}}'
    assert extra == plain.removesuffix("\n\n/think") + "\n" + line + "\n\n/think"


def test_the_response_schema_line_is_on_by_default_only_for_models_envace_did_not_train():
    from envace_demo.prompts import shows_response_schema

    assert shows_response_schema("embedded")
    assert not shows_response_schema("Team-ACE/EnvACE-Qwen3-8B")
    assert not shows_response_schema("Team-ACE/EnvACE-Qwen3-1.7B")
    assert shows_response_schema("Team-ACE/EnvACE-Qwen3-8B", True)
    assert not shows_response_schema("embedded", False)


def test_rehearser_system_covers_the_training_instructions_points_in_order():
    points = ["candidate tools", "few-shot", "conversation so far", "latest response", "tool call to simulate",
              "INVALID_TOOL_CALL_FORMAT", "TOOL_NOT_AVAILABLE", "INVALID_PARAMETERS", "reuse",
              "<think>", "<execution_result>", "</execution_result>", "For example:"]
    at = [REHEARSER_SYSTEM.find(p) for p in points]
    assert -1 not in at, [p for p, i in zip(points, at) if i == -1]
    assert at == sorted(at)
    assert "tool name '{name}' is not found. Please check your function call and use provided tools." in REHEARSER_SYSTEM
    example = REHEARSER_SYSTEM[REHEARSER_SYSTEM.index("For example:"):]
    assert json.loads(example.split("<execution_result>\n")[1].split("\n</execution_result>")[0])


def test_rehearser_system_holds_no_placeholder_a_model_could_copy():
    from envace_demo.prompts import find_placeholders

    assert find_placeholders(REHEARSER_SYSTEM) == set()
    assert "{...}" not in REHEARSER_SYSTEM and "…" not in REHEARSER_SYSTEM


def test_find_placeholders_and_copies():
    from envace_demo.prompts import copies_placeholder, find_placeholders

    text = 'write <tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call> or "<what is wrong>"'
    found = find_placeholders(text)
    assert found == {"<function-name>", "<args-json-object>", "<what is wrong>"}  # tags are not placeholders
    value = {"error": {"message": "<what is wrong>"}, "items": ["ok", "..."], "<function-name>": 1}
    assert sorted(copies_placeholder(value, found)) == ["...", "<function-name>", "<what is wrong>"]
    assert copies_placeholder({"balance": 310.25, "note": "a < b"}, found) == []


def test_actor_messages_keep_reasoning_and_send_tool_results_as_tool_messages():
    conv = _conversation()
    conv.memory = "Rehearsal memory: ..."
    msgs = conv.actor_messages()
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool"]
    assert msgs[2]["reasoning_content"] == "need weather"
    assert msgs[2]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": {"city": "Oslo"}}
    assert msgs[3] == {"role": "tool", "name": "get_weather", "content": '{"temp_c": 3}'}


@pytest.mark.slow
def test_rendered_prompts_with_the_qwen3_template(embedded_backend):
    conv = _conversation()
    conv.memory = "Rehearsal memory: tried get_weather."
    prompt = actor_prompt(embedded_backend, conv, TOOLS).text
    assert prompt.startswith("<|im_start|>system\nRehearsal memory: tried get_weather.\n\n# Tools")
    assert "<tools>\n" in prompt and '"name": "get_weather"' in prompt
    assert "<think>\nneed weather\n</think>" in prompt  # reasoning of this turn is kept
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>' in prompt
    assert '<|im_start|>user\n<tool_response>\n{"temp_c": 3}\n</tool_response><|im_end|>' in prompt
    assert prompt.endswith("<|im_start|>assistant\n")

    msgs = rehearser_messages(TOOLS, [], conv, "x", ToolCall("get_weather", {"city": "Paris"}), TOOLS[0])
    rprompt = rehearser_prompt(embedded_backend, msgs).text
    assert rprompt.startswith("<|im_start|>system\nYou simulate tools precisely")
    assert "<tools>" not in rprompt  # rendered without tools
    assert rprompt.endswith("/think<|im_end|>\n<|im_start|>assistant\n")
