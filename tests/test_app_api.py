"""The app launched for real (``python app.py`` on 127.0.0.1, embedded model, CPU)
and driven through ``gradio_client``: every mode, compare, an invalid schema.

Generations are kept short (192 new tokens, 1 actor turn): the point is the API's
contract, not the small model's skill.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest

from helpers import LaunchedApp, RuleBackend

ROOT = Path(__file__).resolve().parents[1]
BANK_TOOLS = (ROOT / "examples" / "bank" / "tools.json").read_text(encoding="utf-8")
PROMPT = "What is the current balance of account ACC-1003?"
SHORT = {"max_new_tokens": 192, "max_steps": 1, "seed": 1}  # room for a facts-first rehearsal of a read
CONTRACT_CODES = {
    "NO_TOOL_CALL_FOUND",
    "JSON_DECODE_ERROR",
    "NO_ARGUMENTS",
    "NON_SERIALIZABLE_ARGUMENTS",
    "INVALID_TOOL_NAME",
}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    launched = LaunchedApp(tmp_path_factory.mktemp("app") / "app.log")
    try:
        yield launched
    finally:
        launched.stop()


@pytest.fixture(scope="module")
def client(app):
    from gradio_client import Client

    return Client(app.url, verbose=False)


def test_the_page_serves_before_the_model_is_needed_and_the_api_is_listed(app, client):
    ready = app.wait_model_ready()
    print(f"\npage served after {app.served_after:.1f} s; model ready after {ready:.1f} s")
    api = client.view_api(return_format="dict", print_info=False)
    names = set(api["named_endpoints"])
    # Every UI event stays private; /run_manual is offered outside public mode only.
    assert names == {"/run", "/compare", "/run_manual", "/rehearse"}
    params = [p["parameter_name"] for p in api["named_endpoints"]["/run"]["parameters"]]
    assert params[:4] == ["tools", "environment", "message", "mode"]


def _check_record(record: dict, mode: str) -> None:
    assert record["mode"] == mode and record["model"]["model_id"].startswith("embedded")
    assert record["prompt"] == PROMPT and record["environment"] == "bank"
    assert record["task"] == "check-balance"  # an example request keeps its success check
    assert record["sampling"]["max_new_tokens"] == SHORT["max_new_tokens"] and record["seed"] == SHORT["seed"]
    assert {t["function"]["name"] for t in record["tools"]} >= {"get_account", "deposit"}
    assert set(record["totals"]) >= {"real_calls", "real_errors", "tokens", "seconds"}


def _acted(turn: dict) -> dict:
    """The turn's first call, which it must hold: constrained decoding must end a required call
    within the token budget, so a contract error here is a failure."""
    assert turn["error"] is None and turn["calls"], turn.get("error")
    assert turn["calls"][0]["error"] is None, turn["calls"][0]["error"]
    return turn["calls"][0]


def test_run_mode_none_acts_for_real(client):
    record = client.predict(BANK_TOOLS, "bank", PROMPT, "none", api_name="/run", **SHORT)
    _check_record(record, "none")
    assert record["rehearsals"] == [] and record["memory"] is None
    # One turn that calls (the embedded model must call first), then the answer past the last
    # step, with no call on offer.
    turn, answer = record["turns"]
    step = _acted(turn)
    assert step["rehearsed"] is None and step["real"] is not None  # executed, never rehearsed
    assert answer["calls"] == [] and record["totals"]["real_calls"] == 1


def test_run_mode_parallel_rehearses_then_commits(client):
    record = client.predict(BANK_TOOLS, "bank", PROMPT, "parallel", 1, api_name="/run", **SHORT)
    _check_record(record, "parallel")
    assert len(record["rehearsals"]) == 1 and record["memory"]["text"].startswith("Rehearsal memory")
    imagined = _acted(record["rehearsals"][0]["turns"][0])
    assert imagined["real"] is None and imagined["rehearsed"] is not None
    assert "Current tool to simulate:" in imagined["rehearser_prompt"]
    turn = record["turns"][0]
    # The rehearsal foresaw no failure: the committed actor reads no memory, takes the
    # imagined action (the same prompt and seed) and the imagined prediction.
    assert record["memory"]["shown"] is False and "Rehearsal memory" not in turn["actor_prompt"]
    assert turn["action_from"] == 0
    step = _acted(turn)
    assert step["rehearsed"] is not None and step["real"] is not None  # both columns
    assert step["rehearsal_from"] == 0


def test_run_mode_sequential_runs_n_attempts(client):
    record = client.predict(BANK_TOOLS, "bank", PROMPT, "sequential", 2, api_name="/run", **SHORT)
    _check_record(record, "sequential")
    assert [r["index"] for r in record["rehearsals"]] == [0, 1]
    assert "Attempt 1:" not in record["rehearsals"][0]["turns"][0]["actor_prompt"]
    assert "Attempt 1:" in record["rehearsals"][1]["turns"][0]["actor_prompt"]  # attempt 2 saw attempt 1
    # Neither foresaw a failure: the commit reads no memory (it would have seen both).
    assert record["memory"]["shown"] is False and "Attempt 2:" not in record["turns"][0]["actor_prompt"]


def test_run_mode_imagine_executes_nothing(client):
    message = "Freeze account ACC-1001, I lost my card."
    record = client.predict(BANK_TOOLS, "none", message, "imagine", 1, api_name="/run", **SHORT)
    assert record["mode"] == "imagine" and record["environment"] is None and record["task"] == "custom"
    assert record["turns"] == [] and record["totals"]["real_calls"] == 0 and record["success"] is None
    (rehearsal,) = record["rehearsals"]
    imagined = _acted(rehearsal["turns"][0])
    assert imagined["rehearsed"] is not None and imagined["real"] is None


def test_compare_runs_both_ways_with_the_same_seed(client):
    result = client.predict(BANK_TOOLS, "bank", PROMPT, "parallel", 1, api_name="/compare", **SHORT)
    assert list(result["metrics"]) == ["none", "parallel"]
    for mode, m in result["metrics"].items():
        assert set(m) == {"success", "real_calls", "real_errors", "tokens", "seconds", "fidelity", "ended"}
        assert result["trajectories"][mode]["mode"] == mode and result["trajectories"][mode]["seed"] == 1
    assert result["metrics"]["none"]["fidelity"] is None  # nothing rehearsed
    assert result["trajectories"]["parallel"]["rehearsals"]


def test_an_invalid_schema_is_a_located_error(client):
    from gradio_client.exceptions import AppError

    bad = BANK_TOOLS.replace(
        '"type": "string", "description": "Account id', '"type": "strng", "description": "Account id', 1
    )
    with pytest.raises(AppError) as err:
        client.predict(bad, "bank", PROMPT, "none", api_name="/run", **SHORT)
    assert re.search(
        r"tools\[0\]\.function\.parameters\.properties\.account_id\.type: unknown type \"strng\"",
        str(err.value),
    )


def test_out_of_range_settings_are_refused(client):
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError, match="n: expected an integer from 1 to 16"):
        client.predict(BANK_TOOLS, "bank", PROMPT, "parallel", 500, api_name="/run", **SHORT)
    with pytest.raises(AppError, match="rehearsal mode"):
        client.predict(BANK_TOOLS, "bank", PROMPT, "imagine", api_name="/compare", **SHORT)


def test_no_poll_fails_while_the_model_loads():
    """Regression: while the model loaded, each open page's budget poll (a timer, every second)
    answered HTTP 500 ("didn't return enough output values (needed: 5, returned: 1)")."""
    import urllib.request

    from helpers import call_handler, free_port
    from envace_demo.settings import Settings
    from envace_demo.ui import build_app
    from envace_demo.ui.holder import ModelHolder

    release = threading.Event()

    def slow_loader(settings):
        release.wait(60)
        return RuleBackend()

    holder = ModelHolder(Settings(model="rules"), loader=slow_loader)
    holder.start()
    demo = build_app(Settings(model="rules"), holder=holder)
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    try:
        url = f"http://127.0.0.1:{port}/"
        with urllib.request.urlopen(url + "config", timeout=30) as resp:
            config = json.load(resp)
        ticks = [i for i, dep in enumerate(config["dependencies"]) if any(t[1] == "tick" for t in dep["targets"])]
        assert ticks and holder.status().state == "loading"
        for index in ticks:
            dep = config["dependencies"][index]
            kinds = {c["id"]: c for c in config["components"]}
            data = [kinds[i].get("props", {}).get("value") for i in dep["inputs"]]
            status, body = call_handler(url, index, data)
            assert status == 200, (index, body)
            assert len(body["data"]) == len(dep["outputs"])
    finally:
        release.set()
        demo.close()


# ---- conversations: a list of user messages ------------------------------------------------------


def _teller_client(settings):
    """A gradio_client on the real app in this process, with the Playground tests' rule model."""
    from contextlib import ExitStack

    from gradio_client import Client

    from helpers import serve
    from test_ui_playground import Teller

    stack = ExitStack()
    url = stack.enter_context(serve(settings, Teller()))
    client = Client(url, verbose=False)
    stack.callback(client.close)
    return stack, client


def test_run_takes_a_conversation_as_a_list_of_messages():
    from envace_demo.settings import Settings
    from test_ui_playground import BALANCE, DEPOSIT

    stack, client = _teller_client(Settings(model="teller", episode_seconds=60.0))
    with stack:
        record = client.predict(BANK_TOOLS, "bank", [DEPOSIT, BALANCE], "none", api_name="/run")
        assert (record["prompt"], record["follow_ups"]) == (DEPOSIT, [BALANCE])
        assert [t["user_turn"] for t in record["turns"]] == [0, 0, 1, 1] and len(record["answers"]) == 2
        read = record["turns"][2]["calls"][0]
        assert read["call"]["name"] == "get_account" and read["real"]["balance"] == 410.25  # after the deposit
        assert "410.25" in record["answers"][1] and record["final_state"]["accounts"]["ACC-1003"]["balance"] == 410.25
        one = client.predict(BANK_TOOLS, "bank", BALANCE, "none", api_name="/run")  # one message, as before
        assert one["follow_ups"] == [] and one["turns"][0]["calls"][0]["real"]["balance"] == 310.25
        compared = client.predict(BANK_TOOLS, "bank", [DEPOSIT, BALANCE], "parallel", 1, api_name="/compare")
        assert [len(t["answers"]) for t in compared["trajectories"].values()] == [2, 2]


def test_a_public_conversation_is_capped_and_its_messages_checked():
    from gradio_client.exceptions import AppError

    from envace_demo.settings import Settings
    from envace_demo.ui.inputs import PUBLIC_USER_TURNS
    from test_ui_playground import BALANCE, DEPOSIT

    stack, client = _teller_client(Settings(public=True, model="teller", episode_seconds=60.0, max_steps=3,
                                            max_new_tokens=64))
    with stack:
        most = [DEPOSIT] + [BALANCE] * (PUBLIC_USER_TURNS - 1)
        record = client.predict(BANK_TOOLS, "bank", most, "none", api_name="/run")
        assert len(record["answers"]) == PUBLIC_USER_TURNS
        with pytest.raises(AppError, match=rf"conversation: {PUBLIC_USER_TURNS + 1} user messages, at most "
                                           rf"{PUBLIC_USER_TURNS} per conversation"):
            client.predict(BANK_TOOLS, "bank", most + [BALANCE], "none", api_name="/run")
        with pytest.raises(AppError, match="follow-up 1: empty"):
            client.predict(BANK_TOOLS, "bank", [DEPOSIT, "  "], "none", api_name="/run")
        with pytest.raises(AppError, match="follow-up 1: 4,097 bytes, at most 4,096"):
            client.predict(BANK_TOOLS, "bank", [DEPOSIT, "x" * 4_097], "none", api_name="/run")
        with pytest.raises(AppError, match="message: expected a text, or a non-empty list"):
            client.predict(BANK_TOOLS, "bank", [], "none", api_name="/run")
