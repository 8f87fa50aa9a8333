"""MCP environments against real server processes on 127.0.0.1.

The example server (``examples/mcp_server.py``) runs as a subprocess over stdio
or streamable HTTP. Control-flow tests drive the engine with the ``scripted``
backend; the slow test at the bottom runs the CLI with the embedded model.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import call_text
from envace_demo.engine import EpisodeConfig, run_episode
from envace_demo.envs.mcp import (
    MCPEnvironment,
    MCPServerError,
    configured_servers,
    mcp_response,
    open_configured,
    parse_server,
)
from envace_demo.envs.registry import create
from envace_demo.errors import ConfigError
from envace_demo.record import call_steps
from envace_demo.tasks import Task

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "examples" / "mcp_server.py"
STDIO = f"python {SERVER}"
BALANCE = call_text("get_account", {"account_id": "ACC-1003"})
HISTORY = call_text("list_transactions", {"account_id": "ACC-1003"})
DEPOSIT = call_text("deposit", {"account_id": "ACC-1003", "amount": 500})
ANSWER = "<think>done</think>\nDone."


def _children() -> set[int]:
    """Live child processes of this test process (Linux /proc)."""
    me, found = os.getpid(), set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == me and fields[0] != "Z":
            found.add(int(entry.name))
    return found


def _server_pid(before: set[int]) -> int:
    (pid,) = _children() - before
    return pid


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture
def stdio_env():
    before = _children()
    env = MCPEnvironment(STDIO, call_timeout=5, connect_timeout=60)
    env.server_pid = _server_pid(before)
    yield env
    env.close()


def _task(env: MCPEnvironment, check: dict | None = None) -> Task:
    return Task(name="mcp", prompt="What is the balance of ACC-1003?", tools=env.tools(), check=check)


# ---- the example server over stdio ------------------------------------------------------


def test_tools_import_as_the_builtin_environment_declares_them(stdio_env):
    assert stdio_env.name == "mcp:envace-bank"
    builtin = create("bank")
    assert [t.to_dict() for t in stdio_env.tools()] == [t.to_dict() for t in builtin.tools()]
    assert stdio_env.tools()[0].response is not None  # outputSchema arrives as the response schema
    # The server's readOnlyHint/destructiveHint say what reads and what only adds, as tools.json does.
    for tool in builtin.tools():
        name = tool.original_name
        assert stdio_env.writes(name) is builtin.writes(name) and stdio_env.additive(name) is builtin.additive(name)
    assert stdio_env.writes("get_account") is False and stdio_env.writes("withdraw") is True
    assert stdio_env.writes("no_such_tool") is None  # undeclared: unknown, not assumed a write


def test_calls_execute_on_the_server_and_match_the_builtin_environment(stdio_env):
    builtin = create("bank")
    for name, args in [
        ("get_account", {"account_id": "ACC-1003"}),
        ("get_account", {"account_id": "ACC-0000"}),  # domain failure: an MCP tool error
        ("deposit", {"account_id": "ACC-1003", "amount": 5}),
        ("get_account", {"acct": 1}),  # invalid arguments
    ]:
        assert stdio_env.execute(name, args) == builtin.execute(name, args)
    assert stdio_env.state() == builtin.state()  # read from the server's envace://state resource
    assert stdio_env.execute("nope", {})["error"]["code"] == "TOOL_NOT_AVAILABLE"


def test_reset_restarts_a_stdio_server_with_a_fresh_state(stdio_env):
    stdio_env.execute("deposit", {"account_id": "ACC-1003", "amount": 5})
    assert stdio_env.state()["accounts"]["ACC-1003"]["balance"] == 315.25
    stdio_env.reset()
    assert stdio_env.state()["accounts"]["ACC-1003"]["balance"] == 310.25
    assert stdio_env.execute("get_account", {"account_id": "ACC-1003"})["balance"] == 310.25


def test_close_stops_the_server_process():
    before = _children()
    env = MCPEnvironment(STDIO, connect_timeout=60)
    pid = _server_pid(before)
    env.close()
    env.close()  # twice is fine
    assert not _alive(pid)
    with pytest.raises(MCPServerError, match="closed|not connected"):
        env.execute("get_account", {"account_id": "ACC-1003"})


def test_an_episode_commits_real_calls_through_mcp_and_checks_the_server_state(scripted, stdio_env):
    check = {"state": [{"path": "accounts.ACC-1003.balance", "equals": 810.25}]}
    # The question asks for the balance: an answer that tells it stands (``engine/asked.py``).
    backend = scripted(actor=[DEPOSIT, BALANCE, "<think>done</think>\nThe balance is 810.25 USD."])
    traj = run_episode(backend, _task(stdio_env, check), EpisodeConfig(mode="none"), stdio_env)
    assert traj.ended == "answer"
    deposit, balance = call_steps(traj.turns)
    assert deposit.real["new_balance"] == 810.25 and balance.real["balance"] == 810.25
    assert traj.final_state["accounts"]["ACC-1003"]["balance"] == 810.25
    assert traj.success is True


@pytest.mark.timing
def test_server_killed_mid_episode_gives_an_error_step_not_a_hang(scripted, stdio_env):
    def kill_then_call(prompt: str) -> str:
        os.kill(stdio_env.server_pid, signal.SIGKILL)
        return HISTORY  # another read: the same one again would only answer the same, and is not made

    backend = scripted(actor=[BALANCE, kill_then_call])
    started = time.monotonic()
    traj = run_episode(backend, _task(stdio_env), EpisodeConfig(mode="none"), stdio_env)
    assert time.monotonic() - started < 20
    assert traj.ended == "environment_error"
    first, second = call_steps(traj.turns)
    assert first.real["balance"] == 310.25 and first.error is None
    assert second.real["error"]["code"] == "ENVIRONMENT_FAILURE"
    assert "MCP server" in second.error and str(SERVER.name) in second.error
    assert "STATE_UNAVAILABLE" in json.dumps(traj.final_state)  # state() after the death does not raise


@pytest.mark.timing
def test_server_hung_mid_episode_times_out_and_close_kills_it(scripted):
    before = _children()
    env = MCPEnvironment(STDIO, call_timeout=2, connect_timeout=60)
    pid = _server_pid(before)

    def freeze_then_call(prompt: str) -> str:
        os.kill(pid, signal.SIGSTOP)  # alive but never answers
        return HISTORY

    try:
        backend = scripted(actor=[BALANCE, freeze_then_call])
        started = time.monotonic()
        traj = run_episode(backend, _task(env), EpisodeConfig(mode="none"), env)
        assert time.monotonic() - started < 30
        assert traj.ended == "environment_error"
        assert "no answer to list_transactions within 2 s" in call_steps(traj.turns)[1].error
    finally:
        started = time.monotonic()
        env.close()
        assert time.monotonic() - started < 15
    assert not _alive(pid)


# ---- servers that do not work ------------------------------------------------------------


def test_a_command_that_does_not_exist_is_a_clear_error():
    with pytest.raises(MCPServerError, match="no-such-mcp-server-xyz"):
        MCPEnvironment("no-such-mcp-server-xyz --flag", connect_timeout=20)


@pytest.mark.timing
def test_a_server_that_exits_at_once_fails_fast():
    started = time.monotonic()
    with pytest.raises(MCPServerError, match="cannot connect|no answer"):
        MCPEnvironment('python -c "import sys; sys.exit(3)"', connect_timeout=20)
    assert time.monotonic() - started < 20


@pytest.mark.timing
def test_a_server_that_never_answers_the_handshake_times_out_and_is_stopped():
    before = _children()
    started = time.monotonic()
    with pytest.raises(MCPServerError, match="no answer within 2 s of starting"):
        MCPEnvironment('python -c "import time; time.sleep(120)"', connect_timeout=2)
    assert time.monotonic() - started < 15
    assert not (_children() - before)  # the silent process was stopped, not leaked


def test_nothing_listening_at_a_url_is_a_clear_error():
    port = _free_port()
    with pytest.raises(MCPServerError, match=f"127.0.0.1:{port}"):
        MCPEnvironment(f"http://127.0.0.1:{port}/mcp", connect_timeout=20)


def test_two_servers_combine_into_one_environment_and_duplicates_are_refused():
    with MCPEnvironment([STDIO, STDIO + " --env files"], connect_timeout=60) as env:
        assert env.name == "mcp:envace-bank+envace-files"
        names = {t.name for t in env.tools()}
        assert {"get_account", "read_file"} <= names
        assert env.execute("get_account", {"account_id": "ACC-1003"})["balance"] == 310.25
        assert env.execute("read_file", {"path": "/nope"}) == create("files").execute("read_file", {"path": "/nope"})
        assert set(env.state()) == {parse_server(STDIO).label, parse_server(STDIO + " --env files").label}
        # The same server twice offers every tool twice.
        with pytest.raises(ConfigError, match="both offer a tool named 'get_account'"):
            env._import_tools(env._connections[:1] * 2)


# ---- streamable HTTP ----------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def http_server():
    port = _free_port()
    proc = subprocess.Popen([sys.executable, str(SERVER), "--env", "library", "--http", str(port)], cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, "the HTTP server exited"
                assert time.monotonic() < deadline, "the HTTP server did not start"
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_streamable_http_server_serves_tools_calls_and_state(http_server):
    builtin = create("library")
    with MCPEnvironment(http_server, connect_timeout=60) as env:
        assert env.name == "mcp:envace-library"
        assert [t.name for t in env.tools()] == [t.name for t in builtin.tools()]
        args = {"query": "dune"}
        name = builtin.tools()[0].original_name
        assert env.execute(name, args) == builtin.execute(name, args)
        assert env.state() == builtin.state()


# ---- configuration and conversions ----------------------------------------------------------


def test_parse_server_splits_commands_and_keeps_urls():
    spec = parse_server("python examples/mcp_server.py --env 'files'")
    assert spec.command == (sys.executable, "examples/mcp_server.py", "--env", "files") and spec.url is None
    url = parse_server("http://127.0.0.1:8765/mcp")
    assert url.url == "http://127.0.0.1:8765/mcp" and url.label == "127.0.0.1:8765/mcp"
    for bad in ("", "   ", "run 'unclosed"):
        with pytest.raises(ConfigError):
            parse_server(bad)


def test_only_configured_servers_can_be_opened():
    servers = [STDIO, "http://127.0.0.1:9/mcp"]
    assert list(configured_servers(servers)) == [parse_server(STDIO).label, "127.0.0.1:9/mcp"]
    with pytest.raises(ConfigError, match="no configured MCP server named 'http://evil.example/mcp'"):
        open_configured(servers, "http://evil.example/mcp")


def _result(text=None, structured=None, is_error=False, blocks=()):
    from mcp import types

    content = [types.TextContent(type="text", text=text)] if text is not None else []
    return types.CallToolResult(content=content + list(blocks), structuredContent=structured, isError=is_error)


def test_tool_results_become_json_responses():
    from mcp import types

    assert mcp_response(_result('{"a": 1}', structured={"a": 2})) == {"a": 2}
    assert mcp_response(_result("[1, 2]")) == [1, 2]
    assert mcp_response(_result("plain words")) == {"result": "plain words"}
    assert mcp_response(_result("42")) == {"result": 42}
    assert mcp_response(_result("boom", is_error=True)) == {"error": {"code": "TOOL_ERROR", "message": "boom"}}
    own = {"error": {"code": "NOT_FOUND", "message": "x"}}
    assert mcp_response(_result(json.dumps(own), is_error=True)) == own
    image = types.ImageContent(type="image", data="QUJD" * 100, mimeType="image/png")
    value = mcp_response(_result("a chart", blocks=[image]))
    assert value["result"] == "a chart" and value["content"][0]["data"] == "<400 base64 characters>"
    big = mcp_response(_result(json.dumps({"x": "y" * 50_000})), max_chars=1000)
    assert big["truncated"] is True and len(big["result"]) == 1000


def test_settings_read_servers_separated_by_semicolons():
    from envace_demo.settings import Settings

    s = Settings.from_env({"ENVACE_MCP": f"{STDIO} ; http://127.0.0.1:8765/mcp;"})
    assert s.mcp_servers == (STDIO, "http://127.0.0.1:8765/mcp")


# ---- the command line, with the embedded model ------------------------------------------------


@pytest.mark.slow
@pytest.mark.heavy
def test_cli_run_commits_real_calls_through_mcp():
    out = subprocess.run(
        [sys.executable, "-m", "envace_demo", "run", "--mcp", "python examples/mcp_server.py",
         "--mode", "parallel", "--n", "1", "--prompt", "What is the balance of ACC-1003?",
         "--max-new-tokens", "96", "--max-steps", "1", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=1200,
    )
    assert out.returncode == 0, out.stderr
    record = json.loads(out.stdout)
    committed = [c for t in record["turns"] for c in t["calls"]]
    assert committed, record["ended"]
    builtin = create("bank")
    for step in committed:
        # The real response is what the server's bank answers to that exact call.
        assert step["real"] == builtin.execute(step["call"]["name"], step["call"]["arguments"])
        # The server declares its reads (readOnlyHint): a question is offered no write.
        assert builtin.writes(step["call"]["name"]) is False
    assert record["final_state"] == builtin.state()  # the server's state, read over MCP
    assert "310.25" in record["final_answer"]
