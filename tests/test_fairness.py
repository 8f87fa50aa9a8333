"""Fair shares of the one model queue, through the real app on 127.0.0.1 (plain HTTP to the
queue, as a page or any client makes it) with a scripted model:

- one model job per browser session at a time, a few per client address;
- a job whose client closed its connection is cancelled (the API's ``/run`` and the
  Playground's Run alike), and the next visitor's job starts;
- a manual-environment run waiting for a person holds no model slot, and times out;
- a record's wait in the queue is recorded apart from its run time.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pytest
from helpers import QueuedCall, RuleBackend, event_index, serve

from envace_demo.settings import Settings
from envace_demo.ui.fairness import ONE_PER_SESSION, too_many_text

ROOT = Path(__file__).resolve().parents[1]
TOOLS = (ROOT / "examples" / "bank" / "tools.json").read_text(encoding="utf-8")
ASK = "What is the current balance of account ACC-1003?"
ENDLESS = "think FOREVER about ACC-1003"
# /run's arguments after the message: mode, n, temperature, top_p, top_k, max_new_tokens, seed,
# constrained, max_steps
KNOBS = ["none", 1, 0.6, 0.95, 20, 96, 0, False, 2]


class Watched(RuleBackend):
    """The scripted model, telling when an endless generation was stopped by its cancel switch."""

    def __init__(self):
        super().__init__()
        self.stopped = threading.Event()

    def generate(self, prompt, sampling, constraint=None, on_token=None, cancel=None):
        out = super().generate(prompt, sampling, constraint, on_token, cancel)
        if out.finish_reason == "cancelled":
            self.stopped.set()
        return out


def _session() -> str:
    return uuid.uuid4().hex[:10]


def _run(url: str, message: str, session: str | None = None, headers: dict | None = None) -> QueuedCall:
    data = [TOOLS, "bank", message, *KNOBS]
    return QueuedCall(url, event_index(url, "run"), data, session or _session(), headers)


def _started(call: QueuedCall) -> None:
    call.wait_for(lambda m: m.get("msg") == "process_starts", "the job started")


@pytest.fixture()
def public_app():
    backend = Watched()
    # A limit no test waits for: a job that ends early was stopped, not timed out.
    settings = Settings(public=True, model="rules", episode_seconds=600.0, max_new_tokens=128, max_steps=3)
    with serve(settings, backend) as url:
        yield url, backend


def test_one_job_per_session_a_few_per_client_and_a_leaving_client_is_cancelled(public_app):
    url, backend = public_app
    first = _run(url, ENDLESS)
    assert first.refused is None
    _started(first)  # it holds the only model slot until stopped
    again = _run(url, ASK, session=first.session_hash)
    assert again.refused == (400, ONE_PER_SESSION)
    waiting = _run(url, ASK)  # another page from the same address: it queues
    assert waiting.refused is None
    third = _run(url, ASK)  # a third from the same address: over the public limit of 2
    assert third.refused == (400, too_many_text(2))
    # Behind a Space's proxy the visitor's address is the first of X-Forwarded-For.
    elsewhere = _run(url, ASK, headers={"X-Forwarded-For": "203.0.113.9, 10.0.0.1"})
    assert elsewhere.refused is None
    assert not backend.stopped.is_set()
    first.close()  # the tab closed: its job is cancelled, not left to its 600 s limit
    assert backend.stopped.wait(60), "the job of a client that left was not cancelled"
    record = waiting.result()["data"][0]
    assert record["ended"] == "answer" and record["success"] is True
    # Its wait in the queue is its own field, beside the episode's seconds.
    assert record["queued_seconds"] > 0 and record["seconds"] >= 0
    assert elsewhere.result()["data"][0]["ended"] == "answer"


def test_the_playgrounds_run_is_cancelled_when_its_page_closes():
    from helpers import call_handler

    backend = Watched()
    with serve(Settings(model="rules", episode_seconds=600.0, max_steps=1), backend) as url:
        session = _session()
        load = event_index(url, "new_session")
        status, _ = call_handler(url, load, [], session_hash=session)  # the page's load makes its Session
        assert status == 200
        values = [None, TOOLS, "bank", ENDLESS, *KNOBS]
        run = QueuedCall(url, event_index(url, "on_model"), values, session)
        run.wait_for(lambda m: "step 1: actor" in str(m.get("output")), "the model generating")
        run.close()
        assert backend.stopped.wait(60), "the Playground's run went on after its page closed"


def test_a_manual_run_waiting_for_a_person_holds_no_model_slot_and_times_out():
    from helpers import call_handler

    settings = Settings(model="rules", episode_seconds=600.0, max_steps=2, manual_seconds=8.0)
    with serve(settings, RuleBackend()) as url:
        session = _session()
        status, _ = call_handler(url, event_index(url, "new_session"), [], session_hash=session)
        assert status == 200
        values = [None, TOOLS, "manual", ASK, *KNOBS[:-1], 2]
        not_its_queue = QueuedCall(url, event_index(url, "on_model"), values, session)
        assert not_its_queue.completed()["success"]
        manual = QueuedCall(url, event_index(url, "on_manual"), values, session)
        manual.wait_for(lambda m: "waiting for your response" in str(m.get("output")), "a response asked for")
        # Meanwhile (concurrency 1) another visitor's run has the model.
        other = _run(url, ASK).result()["data"][0]
        assert other["ended"] == "answer"
        assert not any(m.get("msg") == "process_completed" for m in manual.messages)  # still waiting
        done = manual.completed()
        assert done["success"]
        shown = str(manual.messages)
        assert "get_account: no response within 8 s" in shown


def test_a_clients_next_job_right_after_its_answer_is_not_refused(public_app):
    """One job per session counts jobs not yet answered: gradio tidies an answered one up a
    moment later, and a client that sends its next request at once must not meet it."""
    from gradio_client import Client

    url, _ = public_app
    client = Client(url, verbose=False)
    try:
        records = [client.predict(TOOLS, "bank", ASK, *KNOBS, api_name="/run") for _ in range(12)]
    finally:
        client.close()
    assert [r["ended"] for r in records] == ["answer"] * 12
