"""The OpenAI-compatible backend against real HTTP servers on 127.0.0.1.

Most tests use a small scripted chat-completions server (below) that streams
exactly the chunks a test needs (reasoning, tool-call deltas, usage, a slow
stream to cancel) and records every request body, and that rejects
non-standard fields with HTTP 422 as ``transformers serve`` does. The slow test
at the bottom runs a real ``transformers serve`` with the embedded model.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from envace_demo.calls import parse_action
from envace_demo.engine import EpisodeConfig, run_episode
from envace_demo.envs.registry import create
from envace_demo.errors import ConfigError, ModelError
from envace_demo.models.base import Sampling
from envace_demo.models.openai_backend import OpenAIBackend, chat_messages
from envace_demo.prompts import Conversation
from envace_demo.record import Action, CallStep, ToolCall, Turn
from envace_demo.tasks import find_task

from bench.eval_speed import stop_server
from helpers import STANDARD, call_deltas, record_calls, text_deltas

ROOT = Path(__file__).resolve().parents[1]

USER = {"role": "user", "content": "What is the balance of ACC-1003?"}


# ---- requests ----------------------------------------------------------------------------


def test_render_makes_a_standard_chat_request_that_keeps_reasoning_and_pairs_tool_results():
    call = ToolCall("get_account", {"account_id": "ACC-1003"})
    conv = Conversation("Balance?", memory="Rehearsal memory ...")
    conv.turns.append(Turn(0, Action(text="", thinking="look it up", content="", calls=[call]), [CallStep(call, rehearsed={"balance": 1})]))
    messages = chat_messages(conv.actor_messages())
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]
    assistant, tool = messages[2], messages[3]
    assert assistant["content"] == "<think>\nlook it up\n</think>\n\n"  # Qwen3 templates split it out again
    assert "reasoning_content" not in assistant
    (tc,) = assistant["tool_calls"]
    assert tc["type"] == "function" and json.loads(tc["function"]["arguments"]) == {"account_id": "ACC-1003"}
    assert tool == {"role": "tool", "tool_call_id": tc["id"], "content": '{"balance": 1}'}


def test_a_streamed_tool_call_becomes_the_text_a_local_model_writes(chat_server):
    server = chat_server(lambda body: call_deltas("get_account", {"account_id": "ACC-1003"}))
    backend = OpenAIBackend(server.url)
    assert backend.model == "served-model"  # the only model the server lists
    tools = [t.to_openai() for t in create("bank").tools()]
    seen = []
    gen = backend.generate(
        backend.prompt([USER], tools=tools), Sampling(seed=7, max_new_tokens=99), on_token=lambda r, t: seen.append(t)
    )
    assert gen.text == (
        "<think>\nI should look it up.\n</think>\n\n"
        '<tool_call>\n{"name": "get_account", "arguments": {"account_id": "ACC-1003"}}\n</tool_call>'
    )
    assert gen.token_ids == [] and gen.prompt_ids == []  # a server without logprobs does not say
    action = parse_action(gen.text, {"get_account"})
    assert action.thinking == "I should look it up." and action.calls[0].arguments == {"account_id": "ACC-1003"}
    assert (gen.new_tokens, gen.prompt_tokens, gen.finish_reason) == (17, 120, "stop")
    assert seen[-1] == gen.text and len(seen) >= 3  # streamed as it grew
    (body,) = server.requests
    assert set(body) <= STANDARD and body["tools"] == tools and body["messages"] == [USER]
    assert (body["seed"], body["max_tokens"], body["temperature"], body["stream"]) == (7, 99, 0.6, True)


def test_the_prompt_is_the_chat_itself_and_is_recorded_as_json():
    backend = OpenAIBackend.__new__(OpenAIBackend)  # no server needed to build a prompt
    call = ToolCall("get_account", {"account_id": "ACC-1003"})
    conv = Conversation("Balance?", executed=True)
    conv.turns.append(Turn(0, Action(text="", content="", calls=[call]), [CallStep(call, real={"balance": 1})]))
    prompt = backend.prompt(conv.actor_messages(), tools=None, thinking=False)
    assert prompt.text is None and prompt.messages == chat_messages(conv.actor_messages())
    assert json.loads(prompt.shown()) == {"messages": prompt.messages, "tools": None, "enable_thinking": False}


def test_text_the_server_did_not_parse_passes_through(chat_server):
    raw = '<think>hm</think>\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'
    server = chat_server(lambda body: text_deltas(raw))
    backend = OpenAIBackend(server.url, "served-model")
    gen = backend.generate(backend.prompt([USER]), Sampling())
    assert gen.text == raw and gen.finish_reason == "stop"
    assert gen.new_tokens > 0 and gen.prompt_tokens > 0  # estimated: this server sends no usage


def test_length_limit_is_reported(chat_server):
    server = chat_server(lambda body: text_deltas("cut off mid", finish="length"))
    backend = OpenAIBackend(server.url, "served-model")
    gen = backend.generate(backend.prompt([USER]), Sampling())
    assert gen.finish_reason == "length"


def test_rows_are_concurrent_requests_with_distinct_seeds(chat_server):
    server = chat_server(lambda body: text_deltas(f"sample {body['seed']}"))
    backend = OpenAIBackend(server.url, "served-model")
    gens = backend.generate_many([backend.prompt([USER])] * 3, Sampling(seed=10))
    seeds = [10, 10 + 1_000_003, 10 + 2_000_006]  # the base class's row seeds
    assert [g.text for g in gens] == [f"sample {seed}" for seed in seeds]
    assert sorted(r["seed"] for r in server.requests) == seeds


def test_rehearser_rows_ask_for_the_rehearsers_own_temperature(chat_server):
    server = chat_server(lambda body: text_deltas(f"at {body['temperature']}"))
    backend = OpenAIBackend(server.url, "served-model")
    actor = backend.prompt([USER])
    rehearser = replace(actor, role="rehearser")
    gens = backend.generate_many([actor, rehearser], Sampling(temperature=0.9, rehearse_temperature=0.0, seed=1))
    assert [g.text for g in gens] == ["at 0.9", "at 0.0"]
    # Without a rehearser temperature both roles sample alike (the paper's evaluation).
    assert backend.generate(rehearser, Sampling(temperature=0.9)).text == "at 0.9"


def test_engine_specific_fields_only_with_extras(chat_server):
    strict = chat_server(lambda body: text_deltas("ok"))
    with pytest.raises(ModelError, match="HTTP 422.*top_k.*extras"):
        OpenAIBackend(strict.url, "served-model", extras=True).generate(
            OpenAIBackend(strict.url, "served-model").prompt([USER]), Sampling()
        )
    lenient = chat_server(lambda body: text_deltas("ok"), strict=False)
    backend = OpenAIBackend(lenient.url, "served-model", extras=True, extra_body={"repetition_penalty": 1.05})
    backend.generate(backend.prompt([USER], thinking=False), Sampling(top_k=20))
    body = lenient.requests[-1]
    assert body["top_k"] == 20 and body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["repetition_penalty"] == 1.05


def test_thinking_off_without_extras_uses_the_soft_switch(chat_server):
    server = chat_server(lambda body: text_deltas("ok"))
    backend = OpenAIBackend(server.url, "served-model")
    backend.generate(backend.prompt([USER], thinking=False), Sampling())
    assert server.requests[-1]["messages"][-1]["content"].endswith(" /no_think")


@pytest.mark.timing
def test_cancel_closes_the_stream_at_once(chat_server):
    # A long silence, as during a prefill: closing the response alone would wait it out.
    slow = [{"content": "x"}, {"sleep": 4}, {"content": "y"}, {"finish": "stop"}]
    server = chat_server(lambda body: slow)
    backend = OpenAIBackend(server.url, "served-model")
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    started = time.monotonic()
    gen = backend.generate(backend.prompt([USER]), Sampling(), cancel=cancel)
    assert time.monotonic() - started < slow[1]["sleep"]  # before the silence ends
    assert gen.finish_reason == "cancelled" and gen.text.startswith("x")
    assert server.disconnected.wait(8)  # the server saw the client go


@pytest.mark.timing
def test_one_failed_sample_stops_the_others(chat_server):
    slow = [{"content": "x"}, {"sleep": 4}, {"content": "y"}, {"finish": "stop"}]
    server = chat_server(lambda body: [{"status": 500}] if body["seed"] > 0 else slow)
    backend = OpenAIBackend(server.url, "served-model", retries=0)
    started = time.monotonic()
    with pytest.raises(ModelError, match="HTTP 500"):
        backend.generate_many([backend.prompt([USER])] * 2, Sampling(seed=0))
    assert time.monotonic() - started < slow[1]["sleep"]  # before the other sample ends


def test_server_failures_are_model_errors(chat_server):
    server = chat_server(lambda body: [{"status": 500}])
    backend = OpenAIBackend(server.url, "served-model", retries=0)
    with pytest.raises(ModelError, match="HTTP 500"):
        backend.generate(backend.prompt([USER]), Sampling())
    cut = chat_server(lambda body: [{"content": "half a rep"}])  # no finish_reason: the server went away
    with pytest.raises(ModelError, match="ended before the reply did"):
        OpenAIBackend(cut.url, "served-model", retries=0).generate(backend.prompt([USER]), Sampling())
    with pytest.raises(ConfigError, match="serves 2 models"):
        OpenAIBackend(chat_server(lambda b: [], models=("a", "b")).url)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ModelError, match="cannot list the served models"):
        OpenAIBackend(f"http://127.0.0.1:{port}/v1")
    with pytest.raises(ConfigError, match="base_url"):
        OpenAIBackend("localhost:8000")


def test_an_episode_rehearses_and_commits_through_the_backend(chat_server):
    predicted = {"account_id": "ACC-1003", "balance": 300.0}

    def reply(body):
        if "tools" not in body:  # the rehearser: a plain [system, user] chat
            result = json.dumps(predicted)
            return text_deltas(f"<think>simulate</think>\n<execution_result>\n{result}\n</execution_result>")
        if body["messages"][-1]["role"] == "tool":
            return [{"reasoning_content": "done"}] + text_deltas("The balance of ACC-1003 is 310.25 USD.")
        return call_deltas("get_account", {"account_id": "ACC-1003"})

    server = chat_server(reply)
    backend = OpenAIBackend(server.url)
    # The read rehearsed, as a call whose environment does not say it reads would be.
    config = EpisodeConfig(mode="parallel", n=1, imagined_reads="rehearse")
    traj = run_episode(backend, find_task("bank", "check-balance"), config, create("bank"))
    assert traj.ended == "answer" and traj.success is True
    turn = traj.turns[0]
    step = turn.calls[0]
    assert step.rehearsed == predicted and step.real["balance"] == 310.25 and 0 < step.fidelity < 1
    assert turn.act_tokens == 17 and turn.prompt_tokens == 120
    rehearser = [r for r in server.requests if "tools" not in r]
    assert rehearser and all([m["role"] for m in r["messages"]] == ["system", "user"] for r in rehearser)
    final = server.requests[-1]["messages"]
    call_id = final[-2]["tool_calls"][0]["id"]
    assert final[-1]["role"] == "tool" and final[-1]["tool_call_id"] == call_id
    assert final[-2]["content"].startswith("<think>\nI should look it up.\n</think>")
    # The rehearsal foresaw no failure: the committed actor read no memory and took its action.
    assert traj.memory["shown"] is False and turn.action_from == 0
    assert json.loads(turn.actor_prompt)["messages"][0]["role"] == "user"


def _bank_agent(body):
    """A scripted bank agent: deposits when asked to, else looks up the balance."""
    if "tools" not in body:
        return text_deltas('<think>simulate</think>\n<execution_result>\n{"ok": true}\n</execution_result>')
    messages = body["messages"]
    if messages[-1]["role"] == "tool":
        return text_deltas(f"Done: {messages[-1]['content']}")
    user = next(m["content"] for m in messages if m["role"] == "user")
    if "deposit" in user.lower():
        return call_deltas("deposit", {"account_id": "ACC-1003", "amount": 500})
    return call_deltas("get_account", {"account_id": "ACC-1003"})


def test_cli_runs_and_evaluates_over_mcp_with_the_openai_backend(chat_server, capsys):
    from envace_demo.cli import main

    server = chat_server(_bank_agent)
    mcp = f"python {ROOT / 'examples' / 'mcp_server.py'}"
    remote = ["--backend", "openai", "--base-url", server.url, "--json"]
    assert main(["run", "--mcp", mcp, "--mode", "parallel", "--n", "1",
                 "--prompt", "What is the balance of ACC-1003?", *remote]) == 0
    record = json.loads(capsys.readouterr().out)
    (step,) = record_calls(record)
    assert step["call"]["name"] == "get_account" and step["real"]["balance"] == 310.25  # executed over MCP
    # The server declares get_account read-only (readOnlyHint): a read is fetched, never rehearsed.
    assert step["rehearsed"] is None and record["final_state"]["accounts"]["ACC-1003"]["balance"] == 310.25

    # The bank's task file, each task against a fresh server; the state check reads the server's state.
    assert main(["eval", "--tasks", str(ROOT / "examples" / "bank" / "tasks.jsonl"), "--limit", "2",
                 "--mcp", mcp, *remote]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [(t["task"], t["success"]) for t in report["tasks"]] == [("check-balance", True), ("deposit-cash", True)]


def test_settings_and_cli_select_the_backend():
    from envace_demo.cli import build_parser, settings_from
    from envace_demo.settings import Settings

    args = build_parser().parse_args(
        ["run", "--env", "bank", "--backend", "openai", "--base-url", "http://127.0.0.1:1/v1", "--model", "m"]
    )
    s = settings_from(args)
    assert (s.backend, s.base_url, s.model, s.openai_extras) == ("openai", "http://127.0.0.1:1/v1", "m", False)
    secret = Settings.from_env({"ENVACE_BACKEND": "openai", "ENVACE_BASE_URL": "http://h/v1", "ENVACE_API_KEY": "sk-1"})
    assert secret.api_key == "sk-1" and "sk-1" not in repr(secret)
    with pytest.raises(ConfigError, match="ENVACE_BASE_URL"):
        Settings.from_env({"ENVACE_BACKEND": "openai"})


# ---- a real server: transformers serve with the embedded model ----------------------------------


@pytest.mark.slow
def test_an_episode_through_transformers_serve(transformers_server):
    url, folder, proc = transformers_server
    backend = OpenAIBackend(url)  # the model name is the folder the server pins
    assert backend.model == folder
    traj = run_episode(
        backend,
        find_task("bank", "check-balance"),
        EpisodeConfig(mode="none", max_steps=2, sampling=Sampling(max_new_tokens=32, seed=0)),
        create("bank"),
    )
    assert traj.ended in ("answer", "max_new_tokens", "parse_error", "max_steps", "environment_error")
    first = traj.turns[0]
    assert first.action.text.strip() and 0 < first.act_tokens <= 32 and first.prompt_tokens > 500
    request = json.loads(first.actor_prompt)
    assert request["messages"][0]["content"] == traj.prompt and len(request["tools"]) == 6
    assert traj.model["engine"] == "openai" and traj.model["model_id"] == folder


@pytest.mark.slow
@pytest.mark.timing
def test_transformers_serve_stops_cleanly(transformers_server):
    _, _, proc = transformers_server
    started = time.monotonic()
    stop_server(proc)
    assert proc.returncode is not None and time.monotonic() - started < 30


# ---- credentials in the server's URL never reach a record, a result or a message ----------------

PASSWORD = "hunter2hunter2"
KEY = "sk-test-0123456789abcdefKEY"


def _with_credentials(url: str, query: str = "") -> str:
    return url.replace("http://", f"http://ops:{PASSWORD}@") + "/" + query


def _leaks(text: str) -> list[str]:
    return [s for s in (PASSWORD, "ops:", KEY, "qwertyuiop") if s in text]


def test_a_run_through_a_url_with_credentials_records_none_of_them(chat_server):
    def reply(body):
        if "tools" not in body:
            return text_deltas('<think>s</think>\n<execution_result>\n{"ok": true}\n</execution_result>')
        if body["messages"][-1]["role"] == "tool":
            return text_deltas("The balance is 310.25 USD.")
        return call_deltas("get_account", {"account_id": "ACC-1003"})

    server = chat_server(reply)
    backend = OpenAIBackend(_with_credentials(server.url), api_key=KEY)
    assert backend.info.extra["base_url"] == server.url  # stored without user info or trailing slash
    traj = run_episode(backend, find_task("bank", "check-balance"), EpisodeConfig(mode="parallel", n=1), create("bank"))
    assert traj.ended == "answer" and server.requests  # the credentials were used, not dropped
    assert _leaks(json.dumps(traj.to_dict())) == []


def test_errors_of_a_url_with_credentials_and_a_query_token_name_neither(chat_server):
    server = chat_server(lambda body: [{"status": 500}])
    backend = OpenAIBackend(_with_credentials(server.url), "served-model", api_key=KEY, retries=0)
    with pytest.raises(ModelError) as err:
        backend.generate(backend.prompt([USER]), Sampling())
    assert "HTTP 500" in str(err.value) and _leaks(str(err.value)) == []
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ModelError) as err:
        OpenAIBackend(_with_credentials(f"http://127.0.0.1:{port}/v1", "?token=qwertyuiop"), api_key=KEY)
    assert "cannot list the served models" in str(err.value) and _leaks(str(err.value)) == []
    assert f"http://127.0.0.1:{port}/v1" in str(err.value)


def test_the_app_over_a_url_with_credentials_returns_and_says_none_of_them(chat_server):
    from gradio_client import Client
    from gradio_client.exceptions import AppError

    from envace_demo.settings import Settings
    from helpers import serve

    fail = threading.Event()

    def reply(body):
        if fail.is_set():
            return [{"status": 500}]
        if body["messages"][-1]["role"] == "tool":
            return text_deltas("The balance is 310.25 USD.")
        return call_deltas("get_account", {"account_id": "ACC-1003"})

    server = chat_server(reply)
    url = _with_credentials(server.url)
    for public in (True, False):
        settings = Settings(public=public, backend="openai", base_url=url, api_key=KEY, max_steps=2, episode_seconds=20)
        backend = OpenAIBackend(url, api_key=KEY, retries=0)
        tools = (ROOT / "examples" / "bank" / "tools.json").read_text()
        with serve(settings, backend) as app:
            client = Client(app, verbose=False)
            fail.clear()
            record = client.predict(tools, "bank", "What is the balance of ACC-1003?", "none", api_name="/run")
            assert record["ended"] == "answer" and _leaks(json.dumps(record)) == []
            fail.set()
            try:
                record = client.predict(tools, "bank", "What is the balance of ACC-1003?", "none", api_name="/run")
                shown = json.dumps(record)
            except AppError as err:
                shown = str(err)
            assert "500" in shown and _leaks(shown) == []
            client.close()


def test_a_conversation_across_user_turns_through_the_backend(chat_server):
    """Two user turns over the bank: each request carries the conversation so far (the
    first turn's call, its real result and its answer) before the next user message."""
    from envace_demo.tasks import Task

    def reply(body):
        users = [m for m in body["messages"] if m["role"] == "user"]
        last = body["messages"][-1]
        if last["role"] == "tool":
            return text_deltas("Deposited." if len(users) == 1 else "It holds 410.25 USD.")
        if len(users) == 1:
            return call_deltas("deposit", {"account_id": "ACC-1003", "amount": 100})
        return call_deltas("get_account", {"account_id": "ACC-1003"})

    server = chat_server(reply)
    env = create("bank")
    task = Task("c", "Deposit $100 into ACC-1003.", env.tools(), follow_ups=["What is its balance now?"])
    traj = run_episode(OpenAIBackend(server.url), task, EpisodeConfig(mode="none"), env)
    assert traj.answers == ["Deposited.", "It holds 410.25 USD."]
    assert [t.user_turn for t in traj.turns] == [0, 0, 1, 1]
    second = server.requests[-2]["messages"]  # the request that made the second turn's call
    assert [m["role"] for m in second] == ["user", "assistant", "tool", "assistant", "user"]
    assert json.loads(second[2]["content"])["new_balance"] == 410.25 and second[3]["content"] == "Deposited."
    assert env.state()["accounts"]["ACC-1003"]["balance"] == 410.25
