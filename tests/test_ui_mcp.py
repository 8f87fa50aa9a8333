"""The Playground's MCP environments: only servers the operator configured at launch,
listed in the picker and run for real (the example MCP server as a subprocess)."""

import sys

import pytest

from conftest import ROOT, ScriptedBackend, call_text
from envace_demo.errors import ConfigError
from envace_demo.events import EpisodeFinished
from envace_demo.settings import Settings
from envace_demo.ui import runner
from envace_demo.ui.holder import ModelHolder
from envace_demo.ui.inputs import RunRequest, build_config, build_task, environment_choices
from envace_demo.ui.options import UIOptions

SERVER = f"{sys.executable} {ROOT / 'examples' / 'mcp_server.py'}"


def _request(environment: str) -> RunRequest:
    return RunRequest(tools="", environment=environment, message="What is the balance of ACC-1003?", mode="none",
                      n=1, temperature=0.6, top_p=0.95, top_k=20, max_new_tokens=64, seed=0, constrained=False,
                      max_steps=2)


def test_the_picker_lists_configured_servers_and_refuses_others():
    options = UIOptions.from_settings(Settings.from_env({}, mcp_servers=(SERVER,)))
    values = [value for _, value in environment_choices(options)]
    mcp_values = [v for v in values if v.startswith("mcp:")]
    assert len(mcp_values) == 1 and "bank" in values and "none" in values
    _request(mcp_values[0]).check(options)
    with pytest.raises(ConfigError, match="environment: expected one of"):
        _request("mcp:python evil.py").check(options)  # a visitor cannot name a server
    assert not [v for _, v in environment_choices(UIOptions()) if v.startswith("mcp:")]


def test_an_episode_runs_against_the_configured_server():
    settings = Settings.from_env({}, mcp_servers=(SERVER,))
    options = UIOptions.from_settings(settings)
    label = next(v for _, v in environment_choices(options) if v.startswith("mcp:"))
    backend = ScriptedBackend(actor=[call_text("get_account", {"account_id": "ACC-1003"}), "<think>ok</think>310.25 USD"])
    holder = ModelHolder(settings, loader=lambda s: backend)
    holder.start()
    runner.bind(holder, options)
    req = _request(label).check(options)
    task = build_task(req)
    events = list(runner.episode_events(task, build_config(req, settings, holder.wait(30))))
    traj = events[-1].trajectory
    assert isinstance(events[-1], EpisodeFinished)
    assert traj.environment == label and any(t["function"]["name"] == "get_account" for t in traj.tools)
    assert traj.turns[0].calls[0].real["balance"] == 310.25  # executed for real on the MCP server
    assert traj.final_state is not None


def test_a_server_that_cannot_start_is_shown_with_its_message_in_the_playground():
    """Through the real app: the Playground's Run against a configured server that exits at
    once says why in the status box (it showed only "Error")."""
    import uuid

    from helpers import QueuedCall, RuleBackend, call_handler, event_index, serve

    broken = f"{sys.executable} -c 'import sys; sys.exit(3)'"
    settings = Settings(model="rules", mcp_servers=(broken,), mcp_timeout=10.0)
    with serve(settings, RuleBackend()) as url:
        session = uuid.uuid4().hex[:10]
        assert call_handler(url, event_index(url, "new_session"), [], session_hash=session)[0] == 200
        values = [None, "", "mcp:server-1", "What is the balance of ACC-1003?", "none", 1, 0.6, 0.95, 20, 64, 0,
                  False, 2]
        run = QueuedCall(url, event_index(url, "on_model"), values, session)
        done = run.completed()
        assert done["success"], done
        shown = " ".join(str(m.get("output")) for m in run.messages)
        assert "ev-status-error" in shown and ": cannot connect (" in shown and "sys.exit(3)" in shown
