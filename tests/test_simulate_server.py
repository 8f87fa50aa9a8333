"""``python -m envace_demo simulate`` for real: a subprocess on stdio or on 127.0.0.1 over
streamable HTTP, the embedded model rehearsing, the ``mcp`` SDK's client calling; and the
project's own agent running an episode against it (``run --mcp``).

The embedded model's answers are not checked for truth (there is none behind them), only
for what the server promises: the declared shape, the same answer to the same call, the
contract's errors as MCP errors.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from helpers import free_port

ROOT = Path(__file__).resolve().parents[1]
BANK = "examples/bank/tools.json"
GET = ("get_account", {"account_id": "ACC-1003"})
ENV = {
    **os.environ,
    "ENVACE_MODEL": "embedded",
    "ENVACE_DEVICE": "cpu",
    "ENVACE_CACHE_DIR": str(ROOT / ".cache"),
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "OMP_NUM_THREADS": "1",
}

pytestmark = pytest.mark.slow


def _check_bank_session(listed, get, again, bad) -> None:
    tools = {t.name: t for t in listed}
    assert set(tools) == {"get_account", "list_transactions", "deposit", "withdraw", "transfer", "freeze_account"}
    assert all(t.outputSchema is not None for t in listed)
    assert not get.isError, get.content[0].text
    value = json.loads(get.content[0].text)
    Draft202012Validator(tools["get_account"].outputSchema).validate(value)  # the declared shape
    assert get.structuredContent == value and value["account_id"] == "ACC-1003"  # the call's id, pinned
    assert again.structuredContent == value  # the same call, the same answer
    assert bad.isError and json.loads(bad.content[0].text)["error"]["code"] == "INVALID_PARAMETERS"


async def _bank_session(read, write):
    from mcp import ClientSession

    async with ClientSession(read, write) as session:
        await session.initialize()
        listed = (await session.list_tools()).tools
        get = await session.call_tool(*GET)
        again = await session.call_tool(*GET)
        bad = await session.call_tool("get_account", {"account_id": "1003"})
        return listed, get, again, bad


def test_stdio_lists_the_bank_tools_and_answers_in_the_declared_shape():
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "envace_demo", "simulate", "--tools", BANK], env=ENV, cwd=str(ROOT)
    )

    async def main():
        async with stdio_client(params) as (read, write):
            return await _bank_session(read, write)

    started = time.monotonic()
    _check_bank_session(*asyncio.run(main()))
    print(f"\nstdio session (model load and two rehearsals at most): {time.monotonic() - started:.1f} s")


def _wait_port(port: int, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else "exited"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"nothing listens on {port}")


def test_http_serves_the_same_on_127_0_0_1(tmp_path):
    from mcp.client.streamable_http import streamablehttp_client

    port = free_port()
    log = open(tmp_path / "server.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "envace_demo", "simulate", "--tools", BANK, "--http", f"127.0.0.1:{port}"],
        cwd=ROOT, env=ENV, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        _wait_port(port, proc)

        async def main():
            async with streamablehttp_client(f"http://127.0.0.1:{port}/mcp", timeout=300) as (read, write, _):
                return await _bank_session(read, write)

        _check_bank_session(*asyncio.run(main()))
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
        log.close()
    assert f"http://127.0.0.1:{port}/mcp" in (tmp_path / "server.log").read_text()


@pytest.mark.heavy
def test_the_projects_own_agent_runs_an_episode_against_the_simulated_server():
    # A stdio server gets a clean environment (the SDK passes only PATH, HOME and the like):
    # one CPU thread is asked for on its command line, as a user sharing the CPU would.
    simulator = f"python -m envace_demo simulate --tools {BANK} --threads 1"
    out = subprocess.run(
        [sys.executable, "-m", "envace_demo", "run", "--mcp", simulator, "--mode", "none",
         "--prompt", "What is the current balance of account ACC-1003?", "--max-new-tokens", "96",
         "--max-steps", "1", "--json"],
        cwd=ROOT, env={**ENV, "ENVACE_MCP_TIMEOUT": "300"}, capture_output=True, text=True, timeout=1200,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    record = json.loads(out.stdout)
    # The one step's call, then the answer the actor gives from its result (a turn of no calls).
    turn, *after = record["turns"]
    assert turn["error"] is None and turn["calls"], turn["error"]
    assert all(not t["calls"] for t in after) and record["ended"] == "answer" and record["final_answer"]
    step = turn["calls"][0]
    assert step["error"] is None, step["error"]  # the server answered; no environment failure
    assert isinstance(step["real"], dict) and step["real"]  # the simulated tool's response
    if step["valid"] and "error" not in step["real"]:
        assert step["call"]["name"] in {"get_account", "list_transactions", "deposit", "withdraw", "transfer",
                                        "freeze_account"}
