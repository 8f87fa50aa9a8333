"""The simulator's logic with a scripted rehearser (the point is exact outputs): certain
answers, the cache, session history, the engine's prompt, the retry, the error mapping;
then the same over a real streamable-HTTP server on 127.0.0.1 with the SDK's client.
The embedded model serves the schema in ``test_simulate_server.py``."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path

import pytest

from conftest import result_text
from helpers import free_port
from envace_demo.calls import format_call
from envace_demo.errors import InputError
from envace_demo.models.base import Sampling
from envace_demo.prompts import HISTORY, PREVIOUS_CALLS, Conversation, rehearser_messages, rehearser_prompt
from envace_demo.record import ToolCall
from envace_demo.schemas import find_tool, load_tools
from envace_demo.simulate.pairs import parse_pairs
from envace_demo.simulate.rehearse import FAILED, UNKNOWN_REQUEST, RehearsalSettings
from envace_demo.simulate.server import error_payload, parse_address, to_result
from envace_demo.simulate.world import SimulatedWorld

ROOT = Path(__file__).resolve().parents[1]
TOOLS = load_tools((ROOT / "examples" / "bank" / "tools.json").read_text(encoding="utf-8"))
ACCOUNT = {
    "account_id": "ACC-1003", "owner": "Dana Reyes", "type": "checking", "currency": "USD",
    "balance": 310.25, "status": "active", "daily_transfer_limit": 1000.0, "transferred_today": 0.0,
}
GET = ("get_account", {"account_id": "ACC-1003"})
DEPOSIT = {"transaction_id": "TX-0042", "account_id": "ACC-1003", "amount": 5, "new_balance": 315.25}


def _world(backend, examples=(), cache=True, **settings) -> SimulatedWorld:
    return SimulatedWorld(TOOLS, lambda: backend, RehearsalSettings(**settings), list(examples), cache=cache)


def _user_message(prompt_text: str) -> str:
    """The rehearser's user message inside the scripted backend's rendered prompt."""
    return json.loads(prompt_text)["messages"][1]["content"]


def _never():
    raise AssertionError("the model was loaded, but the answer was certain")


# ---- certain answers, the cache, the history ---------------------------------------------------


def test_validation_and_unknown_tools_are_answered_without_the_model():
    world = SimulatedWorld(TOOLS, _never)
    bad = world.answer([], "get_account", {"account_id": "nope"})
    assert bad.source == "validation" and bad.is_error
    assert bad.response["error_tool_call"]["code"] == "INVALID_PARAMETERS"
    unknown = world.answer([], "drop_tables", {})
    assert unknown.response["error_tool_call"]["code"] == "TOOL_NOT_AVAILABLE"


def test_an_identical_call_is_answered_from_the_cache_across_sessions(scripted):
    backend = scripted(rehearser=[result_text(ACCOUNT)])
    world = _world(backend)
    first, second = [], []
    a = world.answer(first, *GET)
    b = world.answer(second, "get_account", {"account_id": "ACC-1003"})
    assert (a.source, b.source) == ("model", "cache") and a.response == b.response == ACCOUNT
    assert len(backend.prompts) == 1  # one rehearsal only
    assert first == second == [(ToolCall(*GET), ACCOUNT)]  # each session's history holds the answer


def test_without_the_cache_every_call_is_rehearsed_again(scripted):
    other = {**ACCOUNT, "balance": 12.5}
    backend = scripted(rehearser=[result_text(ACCOUNT), result_text(other)])
    world = _world(backend, cache=False)
    history: list = []
    assert world.answer(history, *GET).response == ACCOUNT
    assert world.answer(history, *GET).response == other
    assert len(backend.prompts) == 2


def test_the_prompt_is_the_engines_rehearser_prompt_with_the_session_as_conversation(scripted):
    backend = scripted(rehearser=[result_text(ACCOUNT), result_text(DEPOSIT)])
    example = (ToolCall("get_account", {"account_id": "ACC-1001"}), {**ACCOUNT, "account_id": "ACC-1001"})
    world = _world(backend, examples=[example])
    history: list = []
    world.answer(history, *GET)
    deposit = ToolCall("deposit", {"account_id": "ACC-1003", "amount": 5})
    answer = world.answer(history, deposit.name, deposit.arguments)
    assert answer.response == DEPOSIT
    # Built here the engine's way: the session's first call is a turn of the conversation.
    from envace_demo.record import Action, CallStep, Turn

    get = ToolCall(*GET)
    turn = Turn(0, Action(text=format_call(get), calls=[get]), calls=[CallStep(get, rehearsed=ACCOUNT)])
    messages = rehearser_messages(
        TOOLS, [example], Conversation(UNKNOWN_REQUEST, [turn]), format_call(deposit), deposit,
        find_tool(TOOLS, "deposit"),
    )
    assert backend.prompts[1] == rehearser_prompt(backend, messages).text
    user = _user_message(backend.prompts[1])
    shots, history_part = user.split(PREVIOUS_CALLS)[1].split(HISTORY)
    assert "ACC-1001" in shots  # the real example is the few-shot block
    assert f"Tool[get_account]: {json.dumps(ACCOUNT)}" in history_part  # the earlier answer stays said


def test_examples_answer_their_own_call_as_given(scripted):
    examples = parse_pairs(json.dumps([{"name": "get_account", "arguments": GET[1], "result": ACCOUNT}]), TOOLS, "ex")
    world = SimulatedWorld(TOOLS, _never, examples=examples)
    answer = world.answer([], *GET)
    assert answer.source == "example" and answer.response == ACCOUNT


# ---- parsing, the declared shape, the retry ------------------------------------------------------


def test_a_bad_rehearsal_is_retried_once_with_another_seed(scripted):
    backend = scripted(rehearser=["<think>x</think>\nno result block", result_text(ACCOUNT)])
    seeds = []
    generate = backend.generate

    def spy(prompt, sampling, **kwargs):
        seeds.append(sampling.seed)
        return generate(prompt, sampling, **kwargs)

    backend.generate = spy
    answer = _world(backend, sampling=Sampling(seed=7)).answer([], *GET)
    assert answer.source == "model" and answer.response == ACCOUNT and answer.attempts == 2
    assert seeds == [7, 8]
    assert answer.problems == ["attempt 1: no <execution_result> block"]


def test_a_result_off_the_declared_shape_twice_is_an_error_that_says_so(scripted):
    off = {"account_id": "ACC-1003", "balance": "a lot"}
    backend = scripted(rehearser=[result_text(off), "<execution_result>\n{not json\n</execution_result>"])
    world = _world(backend)
    history: list = []
    answer = world.answer(history, *GET)
    assert answer.failed and answer.is_error and answer.attempts == 2
    error = answer.response["error"]
    assert error["code"] == FAILED
    assert "attempt 1: breaks the declared response schema" in error["message"]
    assert "attempt 2: not JSON" in error["message"]
    assert history == [] and world.cache == {}  # the simulator's failure is not the world's


def test_an_error_from_the_model_stands_and_is_an_mcp_error(scripted):
    failure = {"error": {"code": "ACCOUNT_NOT_FOUND", "message": "no account ACC-1003"}}
    backend = scripted(rehearser=[result_text(failure)])
    answer = _world(backend).answer([], *GET)
    assert answer.source == "model" and answer.is_error
    result = to_result(answer)
    assert result.isError and json.loads(result.content[0].text) == failure


def test_error_tool_call_becomes_an_mcp_error_with_its_code_and_message():
    answer = SimulatedWorld(TOOLS, _never).answer([], "get_account", {})
    result = to_result(answer)
    assert result.isError and result.structuredContent is None
    error = json.loads(result.content[0].text)["error"]
    assert error["code"] == "INVALID_PARAMETERS" and error["message"].startswith("get_account:")
    assert error["details"]["errors"] == ["account_id: required property missing"]
    assert error_payload({"error": {"code": "X", "message": "m"}}) == {"error": {"code": "X", "message": "m"}}


def test_a_result_is_json_text_and_structured_content(scripted):
    answer = _world(scripted(rehearser=[result_text(ACCOUNT)])).answer([], *GET)
    result = to_result(answer)
    assert not result.isError and result.structuredContent == ACCOUNT
    assert json.loads(result.content[0].text) == ACCOUNT


def test_pairs_are_read_from_json_or_jsonl_and_errors_are_located():
    jsonl = "\n".join(
        [
            json.dumps({"name": "get_account", "arguments": GET[1], "result": ACCOUNT}),
            "",
            json.dumps({"call": {"name": "deposit", "arguments": json.dumps({"account_id": "ACC-1003", "amount": 5})},
                        "response": DEPOSIT}),
        ]
    )
    pairs = parse_pairs(jsonl, TOOLS, "ex.jsonl")
    assert [c.name for c, _ in pairs] == ["get_account", "deposit"] and pairs[1][1] == DEPOSIT
    assert parse_pairs("  ", TOOLS, "ex") == []
    with pytest.raises(InputError, match=r"ex.jsonl line 2: no tool named 'nope'"):
        parse_pairs(jsonl.split("\n")[0] + "\n" + json.dumps({"name": "nope", "result": {}}), TOOLS, "ex.jsonl")
    with pytest.raises(InputError, match=r'ex\[0\]: the pair has no "result"'):
        parse_pairs(json.dumps([{"name": "get_account", "arguments": {}}]), TOOLS, "ex")
    with pytest.raises(InputError, match=r"ex line 1: not valid JSON"):
        parse_pairs("{oops", TOOLS, "ex")
    with pytest.raises(InputError, match="at most 1"):
        parse_pairs(json.dumps([{"name": "get_account", "result": 1}] * 2), TOOLS, "ex", max_pairs=1)


def test_addresses_are_host_and_port():
    assert parse_address("127.0.0.1:8765") == ("127.0.0.1", 8765)
    assert parse_address("[::1]:9000") == ("::1", 9000)
    for bad in ("8765", "host:", "host:99999", ":80"):
        with pytest.raises(Exception, match="HOST:PORT"):
            parse_address(bad)


# ---- over streamable HTTP on 127.0.0.1 -------------------------------------------------------------


@pytest.fixture
def http_world(scripted):
    """The scripted world served at http://127.0.0.1:PORT/mcp in this process."""
    import uvicorn

    from envace_demo.simulate.server import http_app

    first = {**ACCOUNT, "balance": 1.0}
    backend = scripted(rehearser=[result_text(first), result_text(DEPOSIT), result_text(ACCOUNT)])
    world = _world(backend, cache=False)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(http_app(world, "127.0.0.1"), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/mcp", backend
    finally:
        server.should_exit = True
        thread.join(10)


async def _session_calls(url: str, calls: list[tuple[str, dict]]) -> tuple[list, list]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    async with streamablehttp_client(url) as (read, write, _), ClientSession(read, write) as session:
        await session.initialize()
        listed = (await session.list_tools()).tools
        return listed, [await session.call_tool(name, args) for name, args in calls]


def test_http_sessions_keep_their_own_history(http_world):
    url, backend = http_world
    deposit = ("deposit", {"account_id": "ACC-1003", "amount": 5})
    listed, (get, dep, bad) = asyncio.run(_session_calls(url, [GET, deposit, ("get_account", {})]))
    assert {t.name for t in listed} == {t.name for t in TOOLS}
    assert all(t.outputSchema is not None for t in listed)  # every bank tool declares its response
    assert not get.isError and get.structuredContent["balance"] == 1.0
    assert not dep.isError and dep.structuredContent == DEPOSIT
    assert bad.isError and json.loads(bad.content[0].text)["error"]["code"] == "INVALID_PARAMETERS"
    # A second session starts with an empty history.
    _, (again,) = asyncio.run(_session_calls(url, [GET]))
    assert again.structuredContent == ACCOUNT
    in_first = _user_message(backend.prompts[1]).split(HISTORY)[1]
    in_second = _user_message(backend.prompts[2]).split(HISTORY)[1]
    assert "Tool[get_account]" in in_first and "Tool[" not in in_second


# ---- the command's own errors, before anything is served ---------------------------------------


def test_the_command_refuses_bad_input_with_located_messages(tmp_path, capsys):
    from envace_demo.cli import main

    bank = str(ROOT / "examples" / "bank" / "tools.json")
    bad = tmp_path / "ex.jsonl"
    bad.write_text(json.dumps({"name": "get_account", "arguments": {}, "result": {}}) + "\n{oops\n")
    assert main(["simulate", "--tools", str(tmp_path / "missing.json")]) == 2
    assert "missing.json: cannot read" in capsys.readouterr().err
    assert main(["simulate", "--tools", bank, "--examples", str(bad)]) == 2
    assert "ex.jsonl line 2: not valid JSON" in capsys.readouterr().err
    assert main(["simulate", "--tools", bank, "--http", "8765"]) == 2
    assert "expected HOST:PORT" in capsys.readouterr().err
