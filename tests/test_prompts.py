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

TOOLS = load_tools([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather now.",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
])


def _conversation():
    action = parse_action('<think>need weather</think>\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>')
    conv = Conversation("Weather in Oslo and Paris?")
    conv.turns.append(Turn(0, action, [CallStep(action.calls[0], rehearsed={"temp_c": 3})]))
    return conv


def test_rehearser_user_message_has_the_five_labelled_sections_in_order():
    conv = _conversation()
    latest = '<think>now Paris</think>\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    call = ToolCall("get_weather", {"city": "Paris"})
    system, user = rehearser_messages(TOOLS, [(ToolCall("get_weather", {"city": "Oslo"}), {"temp_c": 3})],
                                      conv, latest, call, TOOLS[0])
    assert system == {"role": "system", "content": REHEARSER_SYSTEM}
    assert user["role"] == "user"
    sections = user["content"].split("\n\n")
    assert sections[0].startswith("Candidate tools (whitelist for this sample):\n")
    assert json.loads(sections[0].split("\n", 1)[1])[0]["function"]["name"] == "get_weather"
    assert sections[1] == ('Previous tool calls and results (few-shot):\nTool name: get_weather\n'
                           'Tool arguments: {"city": "Oslo"}\nTool execution result: {"temp_c": 3}')
    history = sections[2].split("\n")
    assert history[0] == "Current conversation history:"
    assert history[1] == "User: Weather in Oslo and Paris?"
    assert history[2].startswith("Assistant: <tool_call>")
    assert 'Tool[get_weather]: {"temp_c": 3}' in sections[2]
    assert "need weather" not in sections[2]  # reasoning stays out of the history lines
    assert sections[3].startswith("RL model's latest response:\n<think>now Paris</think>")
    tool_section = user["content"][user["content"].index("Current tool to simulate:"):]
    assert "- name: get_weather\n" in tool_section
    assert '- input schema (JSON Schema): {"type": "object"' in tool_section
    assert '- arguments (JSON, parsed from caller\'s tool_call): {"city": "Paris"}' in tool_section
    assert user["content"].endswith("\n\n/think")


def test_rehearser_system_names_the_contract_error_codes_and_tags():
    for token in ("INVALID_TOOL_CALL_FORMAT", "TOOL_NOT_AVAILABLE", "INVALID_PARAMETERS", "error_tool_call",
                  "<execution_result>", "</execution_result>", "details"):
        assert token in REHEARSER_SYSTEM


def test_rehearser_system_holds_no_placeholder_a_model_could_copy():
    from envace_demo.prompts import find_placeholders

    assert find_placeholders(REHEARSER_SYSTEM) == set()
    assert "{...}" not in REHEARSER_SYSTEM and "..." not in REHEARSER_SYSTEM and "…" not in REHEARSER_SYSTEM
    # Each check is named, so a rehearsed error can say which one failed.
    for check in ("Format:", "Availability:", "Parameters:"):
        assert check in REHEARSER_SYSTEM


def test_find_placeholders_and_copies():
    from envace_demo.prompts import copies_placeholder, find_placeholders

    text = 'write <tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call> or "<what is wrong>"'
    found = find_placeholders(text)
    assert found == {"<function-name>", "<args-json-object>", "<what is wrong>"}  # tags are not placeholders
    value = {"error": {"message": "<what is wrong>"}, "items": ["ok", "..."], "<function-name>": 1}
    assert sorted(copies_placeholder(value, found)) == ["...", "<function-name>", "<what is wrong>"]
    assert copies_placeholder({"balance": 310.25, "note": "a < b"}, found) == []


def test_the_current_tool_section_shows_a_declared_response_schema():
    (tool,) = load_tools([{"name": "get_weather", "parameters": {"type": "object", "properties": {}},
                           "x-response-schema": {"type": "object", "properties": {"temp_c": {"type": "number"}}}}])
    assert tool.response is not None  # the OpenAI-format key is accepted
    _, user = rehearser_messages([tool], [], Conversation("hi"), "x", ToolCall("get_weather", {}), tool)
    assert user["content"].split("\n\n")[-2].endswith(
        '- response schema (JSON Schema): {"type": "object", "properties": {"temp_c": {"type": "number"}}}'
    )


def test_no_known_results_says_none():
    conv = Conversation("hi")
    _, user = rehearser_messages(TOOLS, [], conv, "x", ToolCall("get_weather", {"city": "A"}), TOOLS[0])
    assert "Previous tool calls and results (few-shot):\n(none)" in user["content"]


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
    assert rprompt.startswith("<|im_start|>system\nYou are a tool executor")
    assert "<tools>" not in rprompt  # rendered without tools
    assert rprompt.endswith("/think<|im_end|>\n<|im_start|>assistant\n")
