"""The manual environment in the app: responses typed for each committed call.

Through the API (``/run_manual``, a list of responses) on the real app served on
127.0.0.1 with a rule-following model; the Playground's box is driven by a real
browser in tests/test_browser.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import RuleBackend, record_calls, serve

ROOT = Path(__file__).resolve().parents[1]
TOOLS = (ROOT / "examples" / "bank" / "tools.json").read_text(encoding="utf-8")
ASK = "What is the current balance of account ACC-1003?"


@pytest.fixture(scope="module")
def client():
    from gradio_client import Client

    from envace_demo.settings import Settings

    with serve(Settings(model="rules", episode_seconds=20.0, max_steps=3), RuleBackend()) as url:
        c = Client(url, verbose=False)
        yield c
        c.close()


def _refused(client, *args, api_name: str) -> str:
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError) as err:
        client.predict(*args, api_name=api_name)
    return str(err.value)


def test_the_typed_response_is_the_real_one_beside_the_rehearsal(client):
    typed = {"account_id": "ACC-1003", "balance": 42.5, "currency": "USD"}
    record = client.predict(TOOLS, ASK, json.dumps([typed]), "parallel", 1, api_name="/run_manual")
    step = record_calls(record)[0]
    assert step["call"]["name"] == "get_account"
    assert step["real"] == typed  # what was typed, not the bank's 310.25
    assert step["rehearsed"] is not None and step["fidelity"] is not None
    assert record["ended"] == "answer"


def test_a_bare_value_becomes_a_result_object(client):
    record = client.predict(TOOLS, ASK, json.dumps(["closed"]), "none", 1, api_name="/run_manual")
    step = record_calls(record)[0]
    assert step["real"] == {"result": "closed"}


def test_a_call_beyond_the_typed_responses_is_an_error_step_that_says_so(client):
    record = client.predict(TOOLS, ASK, "[]", "none", 1, api_name="/run_manual")
    assert record["ended"] == "environment_error"
    step = record_calls(record)[0]
    assert "no response given for call 1" in step["error"]


def test_bad_responses_are_located_errors(client):
    assert "responses: not valid JSON" in _refused(client, TOOLS, ASK, "{oops", api_name="/run_manual")
    assert "expected a JSON array" in _refused(client, TOOLS, ASK, '{"a": 1}', api_name="/run_manual")


def test_run_cannot_use_the_manual_environment_without_responses(client):
    message = _refused(client, TOOLS, "manual", ASK, "none", 1, api_name="/run")
    assert "typed in the Playground" in message


def test_public_mode_offers_no_manual_environment():
    from envace_demo.errors import ConfigError
    from envace_demo.settings import Settings
    from envace_demo.ui.inputs import MANUAL, RunRequest, environment_choices
    from envace_demo.ui.options import UIOptions

    public = UIOptions.from_settings(Settings(public=True))
    assert MANUAL not in [v for _, v in environment_choices(public)]
    assert MANUAL in [v for _, v in environment_choices(UIOptions.from_settings(Settings(public=False)))]
    with pytest.raises(ConfigError, match="environment: expected one of"):
        RunRequest(TOOLS, MANUAL, ASK).check(public)
