"""The app as an MCP server (gradio's ``mcp_server``): its tools and their descriptions, the
``rehearse`` endpoint, and public mode's caps on the MCP path, with the SDK's client over
streamable HTTP. In-process apps use a scripted model (the point is the contract); the slow
test launches ``python app.py`` with the embedded model."""

from __future__ import annotations

import ast
import asyncio
import json
import urllib.request
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from helpers import LaunchedApp, RuleBackend, serve
from envace_demo.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
BANK_TOOLS = (ROOT / "examples" / "bank" / "tools.json").read_text(encoding="utf-8")
PROMPT = "What is the current balance of account ACC-1003?"
GET = json.dumps({"name": "get_account", "arguments": {"account_id": "ACC-1003"}})
# The bank's get_account without its declared response: whatever object the model says stands.
UNDECLARED = json.dumps([{k: v for k, v in t["function"].items() if k != "x-response-schema"}
                         for t in json.loads(BANK_TOOLS)[:1]])
PUBLIC = Settings(public=True, max_new_tokens=128, max_steps=3, max_input_bytes=20_000, max_tools=8)


def _schema(url: str) -> dict[str, dict]:
    with urllib.request.urlopen(url + "gradio_api/mcp/schema", timeout=30) as response:
        return {tool["name"]: tool for tool in json.loads(response.read())}


async def _calls(url: str, calls: list[tuple[str, dict]]) -> tuple[list, list]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    async with streamablehttp_client(url + "gradio_api/mcp/", timeout=300) as (read, write, _), ClientSession(
        read, write
    ) as session:
        await session.initialize()
        listed = (await session.list_tools()).tools
        return listed, [await session.call_tool(name, args) for name, args in calls]


def _json(result) -> dict:
    """A tool's dict result: gradio's MCP server writes it as a Python literal (``str(dict)``)."""
    assert not result.isError, result.content[0].text
    return ast.literal_eval(result.content[0].text)


@pytest.fixture(scope="module")
def public_url():
    with serve(PUBLIC, RuleBackend(), mcp_server=True) as url:
        yield url


@pytest.fixture(scope="module")
def private_url():
    with serve(Settings(), RuleBackend(), mcp_server=True) as url:
        yield url


def test_the_schema_lists_the_api_endpoints_as_described_tools(private_url, public_url):
    tools = _schema(private_url)
    assert set(tools) == {"run", "compare", "run_manual", "rehearse"}
    for tool in tools.values():
        assert len(tool["description"]) > 60, tool  # a real description, from the docstring
    rehearse = tools["rehearse"]
    assert rehearse["description"].startswith("Predict what a tool would answer to one call")
    props = rehearse["inputSchema"]["properties"]
    assert rehearse["inputSchema"]["required"] == ["tools", "call"]
    for name in ("tools", "call", "history", "examples", "max_new_tokens", "seed"):
        assert props[name]["description"], name  # each argument described
    assert set(_schema(public_url)) == {"run", "compare", "rehearse"}  # no manual runs in public mode


def test_rehearse_reports_the_response_its_validity_and_the_raw_text(private_url):
    history = json.dumps([{"name": "get_account", "arguments": {"account_id": "ACC-1001"}, "result": {"balance": 5}}])
    _, (declared, undeclared, invalid) = asyncio.run(
        _calls(
            private_url,
            [
                ("rehearse", {"tools": BANK_TOOLS, "call": GET}),
                ("rehearse", {"tools": UNDECLARED, "call": GET, "history": history}),
                ("rehearse", {"tools": BANK_TOOLS, "call": json.dumps({"name": "get_account", "arguments": {}})}),
            ],
        )
    )
    # The scripted model says {"account_id", "balance"}: short of the bank's declared shape, twice.
    declared = _json(declared)
    assert declared["valid"] is False and declared["source"] == "failed" and declared["attempts"] == 2
    assert declared["response"]["error"]["code"] == "REHEARSAL_FAILED"
    assert "breaks the declared response schema" in declared["problems"][0]
    assert "<execution_result>" in declared["raw"]
    # Without a declared shape the same answer stands.
    undeclared = _json(undeclared)
    assert undeclared["valid"] is True and undeclared["source"] == "model" and undeclared["is_error"] is False
    assert undeclared["response"] == {"account_id": "ACC-1003", "balance": 300.0}
    # What validation decides, the model is not asked.
    invalid = _json(invalid)
    assert invalid["source"] == "validation" and invalid["raw"] is None
    assert invalid["response"]["error_tool_call"]["code"] == "INVALID_PARAMETERS"


def test_public_mode_caps_hold_on_the_mcp_path(public_url):
    big = json.dumps([{"name": f"t{i}", "description": "x" * 900, "parameters": {"type": "object"}} for i in range(30)])
    regex = json.dumps([{"name": "f", "description": "d", "parameters": {
        "type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}}}])
    many = json.dumps([{"name": "get_account", "arguments": {"account_id": "ACC-1001"}, "result": {"b": 1}}] * 17)
    run = {"tools": BANK_TOOLS, "environment": "bank", "message": PROMPT}
    _, results = asyncio.run(
        _calls(
            public_url,
            [
                ("run", {**run, "mode": "parallel", "n": 50}),
                ("compare", {**run, "max_new_tokens": 4096}),
                ("rehearse", {"tools": big, "call": GET}),
                ("rehearse", {"tools": BANK_TOOLS, "call": GET, "max_new_tokens": 4096}),
                ("rehearse", {"tools": regex, "call": json.dumps({"name": "f", "arguments": {"s": "a"}})}),
                ("rehearse", {"tools": BANK_TOOLS, "call": GET, "history": many}),
            ],
        )
    )
    expected = [
        "n: expected an integer from 1 to 4, got 50",
        "max_new_tokens: expected an integer from 16 to 128",
        "at most 20,000",
        "max_new_tokens: expected an integer from 16 to 128",
        "pattern",
        "history: 17 call/result pairs, at most 16",
    ]
    for result, message in zip(results, expected):
        assert result.isError, result.content[0].text
        assert message in result.content[0].text, (message, result.content[0].text)


@pytest.mark.slow
@pytest.mark.heavy
def test_the_launched_app_serves_rehearse_as_an_mcp_tool(tmp_path):
    app = LaunchedApp(tmp_path / "app.log", {"ENVACE_MAX_NEW_TOKENS": "192"})
    try:
        tools = _schema(app.url)
        assert "rehearse" in tools and {"run", "compare"} <= set(tools)
        app.wait_model_ready()
        _, (result,) = asyncio.run(_calls(app.url, [("rehearse", {"tools": BANK_TOOLS, "call": GET, "seed": 1})]))
        answer = _json(result)
        assert answer["valid"] is True and answer["source"] == "model", answer
        response_schema = json.loads(BANK_TOOLS)[0]["function"]["x-response-schema"]
        Draft202012Validator(response_schema).validate(answer["response"])
    finally:
        app.stop()
