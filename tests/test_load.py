"""``bench/load.py``: its leak check (fast, on records made here) and CI's short run
(slow: the app with the embedded model, 3 sessions for 12 s, no error, no leak)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.load import leaks_in, percentile, request_message
from conftest import call_text
from envace_demo.engine import EpisodeConfig, run_episode
from envace_demo.envs.registry import create
from envace_demo.schemas import load_tools
from envace_demo.tasks import Task

ROOT = Path(__file__).resolve().parents[1]


def _record(scripted, session: int, number: int) -> tuple[dict, str, str]:
    """The record of one load request, as the app would return it."""
    message, reference = request_message(session, number)
    tools = load_tools((ROOT / "examples" / "bank" / "tools.json").read_text())
    amount = float(message.split("$")[1].split(" ")[0])
    account = message.split("account ")[1].split(".")[0]
    backend = scripted(actor=[call_text("deposit", {"account_id": account, "amount": amount})])
    traj = run_episode(
        backend,
        Task("custom", message, tools, env="bank"),
        EpisodeConfig(mode="none", max_steps=1),
        create("bank"),
    )
    return json.loads(json.dumps(traj.to_dict())), message, reference


def test_requests_differ_by_session_and_number():
    assert request_message(3, 7) == ("Deposit $40.07 into account ACC-1005. Reference S03R007.", "S03R007")
    messages = {request_message(s, r)[0] for s in range(16) for r in range(100)}
    assert len(messages) == 1600


def test_a_record_of_its_own_making_has_no_leak(scripted):
    record, message, reference = _record(scripted, 3, 7)
    assert record["turns"][0]["calls"][0]["real"]["new_balance"] is not None  # the deposit ran
    assert leaks_in(record, message, reference) == []


def test_another_sessions_call_on_the_same_environment_is_a_leak(scripted):
    record, message, reference = _record(scripted, 3, 7)
    other, _, _ = _record(scripted, 4, 0)  # another session deposited into ACC-1001
    mixed = copy.deepcopy(record)
    mixed["final_state"]["accounts"]["ACC-1001"] = other["final_state"]["accounts"]["ACC-1001"]
    assert leaks_in(mixed, message, reference) == [
        "S03R007: the final state holds changes this request did not make"
    ]
    seen_twice = copy.deepcopy(record)  # the real response of a deposit made on a used environment
    seen_twice["turns"][0]["calls"][0]["real"]["new_balance"] += 50
    assert "S03R007: call 0's real response is not what its own call gives" in leaks_in(
        seen_twice, message, reference
    )


def test_another_requests_prompt_or_reference_is_a_leak(scripted):
    record, message, reference = _record(scripted, 3, 7)
    other_message, other_reference = request_message(5, 1)
    swapped = dict(record, prompt=other_message)
    assert leaks_in(swapped, message, reference)[0].startswith(
        "S03R007: the record's prompt is another request's"
    )
    crossed = copy.deepcopy(record)
    crossed["turns"][0]["actor_prompt"] += other_reference
    assert leaks_in(crossed, message, reference) == [
        "S03R007: turn 0's prompt holds references ['S03R007', 'S05R001']"
    ]


def test_percentile_is_nearest_rank():
    assert percentile([], 50) is None
    assert percentile([3.0], 95) == 3.0
    assert percentile([float(i) for i in range(1, 101)], 50) == 50.0
    assert percentile([float(i) for i in range(1, 101)], 95) == 95.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 100) == 4.0


@pytest.mark.slow
@pytest.mark.heavy
def test_short_load_run_has_no_error_and_no_leak():
    """CI's form of ``python -m bench.load --sessions 16 --seconds 120``."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.load",
            "--sessions",
            "3",
            "--seconds",
            "12",
            "--drain-seconds",
            "240",
            "--json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.stdout, done.stderr[-3000:]
    report = json.loads(done.stdout)
    shown = ("requests", "errors", "leaks", "p50_s", "p95_s", "queue_wait_p95_s")
    print("\n" + json.dumps({k: report[k] for k in shown}))
    assert report["errors"] == 0, report["error_samples"]
    assert report["leaks"] == 0, report["leak_samples"]
    assert report["requests"] >= 3 and all(n >= 1 for n in report["requests_per_session"].values())
    assert report["real_calls"] >= 1  # environments were really used, so the replay check had work
    assert report["server_tracebacks"] == 0
    assert done.returncode == 0


@pytest.mark.slow
def test_the_attacker_gets_answers_never_errors_or_secrets():
    """One round of ``bench.attack`` against the real app (a scripted model: the model does
    not matter to the hostile inputs), its secret configured: every answer came, none shows it."""
    import threading

    from helpers import RuleBackend, serve

    from bench.attack import Attacker
    from envace_demo.settings import Settings

    canary = "sk-attack-canary-0c1d2e3f"
    with serve(Settings(model="rules", api_key=canary), RuleBackend()) as url:
        attacker = Attacker(url, (canary,), (ROOT / "examples" / "bank" / "tools.json").read_text())
        thread = threading.Thread(target=attacker.run)
        thread.start()
        while attacker.report.rounds < 1 and thread.is_alive():
            thread.join(0.5)
        attacker.stop.set()
        thread.join(600)
    report = attacker.report.to_dict()
    assert report["errors"] == 0, report["error_samples"]
    assert report["leaks"] == 0, report["leak_samples"]
    assert set(report["sent"]) == {"status", "run", "suite_estimate", "suite"}
    assert report["sent"]["status"] >= 24  # every family at 64 KB and 1 MB
