"""Load: S concurrent API sessions against the app on 127.0.0.1 for T seconds.

    python -m bench.load --sessions 16 --seconds 120 [--attacker] [--json]

Launches ``python app.py`` on a free loopback port with a cheap configuration (the
embedded model on CPU, one thread, one actor turn, 96 new tokens, mode ``none``),
then runs S ``gradio_client`` sessions, each its own client, calling ``/run`` one
request after another until T seconds have passed; requests still running then are
awaited (at most ``--drain-seconds``). Bounded: at most 64 sessions, one hour, and
``--max-requests`` per session if given. Loopback only.

A **leak** is a session seeing calls or state it did not make. Each request carries
its own reference (``S03R007``) and its own deposit, and its record is checked
three ways: the prompt is its own; every rendered actor prompt holds its reference
and no other; replaying its own committed calls on a fresh environment reproduces
every real response and the final state exactly, so any call another session made
on the same environment would show.

The app holds a secret (its API key, ``CANARY``): a record that shows it is a leak too.

Reports ``sessions``, ``requests``, ``errors``, ``leaks``, ``p50_s``/``p95_s`` (request
latency) and ``queue_wait_p50_s``/``queue_wait_p95_s`` (submit until the server starts
the job); exit status 1 when there was any error or leak.

``--attacker``: the run twice, on a fresh app each time: without, then with one more
visitor sending hostile inputs all along (``bench.attack``: hostile schemas to the editor's
status handler and to ``/run``, an oversized suite upload); reports both runs, the
attacker's own counts, and ``p95_ratio`` (with over without). Done when the ratio is at
most 1.5 with no error and no leak.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.app_process import CHEAP_ENV, LOOPBACK, ROOT, TOKENS, AppProcess

MAX_SESSIONS = 64
MAX_SECONDS = 3600
APP_ENV = {**CHEAP_ENV, "ENVACE_THREADS": "1", "ENVACE_CONCURRENCY": "1"}
# This machine's app, this configuration: nothing remote.
REMOTE_VARS = ("SPACE_ID", "ENVACE_PUBLIC", "ENVACE_BACKEND", "ENVACE_BASE_URL", "ENVACE_MCP")
CANARY = "sk-load-canary-7f3a9c21e4b8"  # the app's API key: seen in any answer, it is a leak
REQUEST = {"mode": "none", "n": 1, "max_new_tokens": TOKENS, "max_steps": 1}
ACCOUNTS = ("ACC-1001", "ACC-1002", "ACC-1003", "ACC-1005")
REFERENCE = re.compile(r"S\d{2}R\d{3}")
POLL_S = 0.05


def _tools_text() -> str:
    return (ROOT / "examples" / "bank" / "tools.json").read_text(encoding="utf-8")


def request_message(session: int, number: int) -> tuple[str, str]:
    """(message, reference) of a session's request: its own deposit, its own reference."""
    reference = f"S{session:02d}R{number:03d}"
    amount = 10 * (session + 1) + number / 100
    account = ACCOUNTS[session % len(ACCOUNTS)]
    return f"Deposit ${amount:.2f} into account {account}. Reference {reference}.", reference


def leaks_in(record: dict, message: str, reference: str) -> list[str]:
    """Why ``record`` shows something its own request did not make (empty: nothing)."""
    from envace_demo.envs.registry import create

    found: list[str] = []
    if record.get("prompt") != message:
        found.append(f"{reference}: the record's prompt is another request's: {record.get('prompt')!r}")
    for turn in record.get("turns", []):
        seen = set(REFERENCE.findall(turn.get("actor_prompt") or ""))
        if seen != {reference}:
            found.append(f"{reference}: turn {turn.get('index')}'s prompt holds references {sorted(seen)}")
    # Replay this request's own committed calls on a fresh environment.
    originals = {
        t["function"]["name"]: t.get("original_name", t["function"]["name"]) for t in record.get("tools", [])
    }
    env = create("bank")
    calls = [c for turn in record.get("turns", []) for c in turn.get("calls", [])]
    for number, step in enumerate(calls):
        call, real = step.get("call"), step.get("real")
        if call is None or real is None or call["name"] not in originals:
            continue
        try:
            again = env.execute(originals[call["name"]], call["arguments"])
        except Exception as err:  # the engine records a raising tool as ENVIRONMENT_FAILURE
            again = {"error": {"code": "ENVIRONMENT_FAILURE", "message": str(err)}}
        if _json(again) != _json(real):
            found.append(f"{reference}: call {number}'s real response is not what its own call gives")
    if _json(env.state()) != _json(record.get("final_state")):
        found.append(f"{reference}: the final state holds changes this request did not make")
    return found


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value))


@dataclass
class Outcome:
    session: int
    reference: str
    seconds: float = 0.0
    queue_wait: float | None = None
    server_seconds: float | None = None
    real_calls: int = 0
    error: str | None = None
    leaks: list[str] = field(default_factory=list)


def launch_app(queue_size: int, log_dir: Path) -> AppProcess:
    """``python app.py`` on a free loopback port with the cheap configuration, its API key the canary."""
    env = {**APP_ENV, "ENVACE_QUEUE_SIZE": str(queue_size), "ENVACE_API_KEY": CANARY}
    return AppProcess(log_dir / "app.log", env, drop=REMOTE_VARS)


def _one_request(client, tools: str, session: int, number: int, give_up_at: float) -> Outcome:
    from gradio_client.utils import Status

    message, reference = request_message(session, number)
    out = Outcome(session, reference)
    started = time.monotonic()
    job = client.submit(tools, "bank", message, api_name="/run", seed=number, **REQUEST)
    while not job.done():
        if out.queue_wait is None and job.status().code in (Status.PROCESSING, Status.ITERATING):
            out.queue_wait = time.monotonic() - started
        if time.monotonic() > give_up_at:
            job.cancel()
            out.seconds = time.monotonic() - started
            out.error = f"{reference}: no answer before the drain deadline"
            return out
        time.sleep(POLL_S)
    out.seconds = time.monotonic() - started
    try:
        record = job.result()
    except Exception as err:  # an AppError or a transport failure: the request failed
        out.error = f"{reference}: {type(err).__name__}: {err}"
        return out
    out.server_seconds = record.get("seconds")
    out.real_calls = record.get("totals", {}).get("real_calls", 0)
    if out.queue_wait is None and out.server_seconds is not None:
        out.queue_wait = max(0.0, out.seconds - out.server_seconds)  # finished between two polls
    out.leaks = leaks_in(record, message, reference)
    if CANARY in json.dumps(record):
        out.leaks.append(f"{reference}: the app's secret is in the record")
    return out


def _session(
    url: str,
    tools: str,
    session: int,
    stop_at: float,
    give_up_at: float,
    max_requests: int | None,
    outcomes: list[Outcome],
    lock: threading.Lock,
) -> None:
    from gradio_client import Client

    try:
        client = Client(url, verbose=False)
    except Exception as err:
        with lock:
            outcomes.append(
                Outcome(session, f"S{session:02d}", error=f"connect: {type(err).__name__}: {err}")
            )
        return
    number = 0
    while time.monotonic() < stop_at and (max_requests is None or number < max_requests):
        outcome = _one_request(client, tools, session, number, give_up_at)
        with lock:
            outcomes.append(outcome)
        number += 1
    client.close()


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile; None without values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))  # ceil(n * q / 100)
    return round(ordered[int(rank) - 1], 3)


def run_load(
    sessions: int, seconds: float, max_requests: int | None = None, drain_seconds: float = 600.0,
    attacker: bool = False,
) -> dict:
    if not 1 <= sessions <= MAX_SESSIONS:
        raise SystemExit(f"--sessions: expected 1 to {MAX_SESSIONS}, got {sessions}")
    if not 0 < seconds <= MAX_SECONDS:
        raise SystemExit(f"--seconds: expected more than 0 and at most {MAX_SECONDS}, got {seconds}")
    os.environ["NO_PROXY"] = os.environ["no_proxy"] = f"{LOOPBACK},localhost"  # loopback, never a proxy
    tools = _tools_text()
    with tempfile.TemporaryDirectory(prefix="envace-load-") as tmp:
        app = launch_app(queue_size=max(16, sessions), log_dir=Path(tmp))
        try:
            ready = app.wait_ready()
            from gradio_client import Client

            warm = Client(app.url, verbose=False)  # first request: grammar compiled, caches filled
            started = time.monotonic()
            warm.predict(tools, "bank", request_message(99, 0)[0], api_name="/run", seed=0, **REQUEST)
            warmup = time.monotonic() - started
            warm.close()
            outcomes: list[Outcome] = []
            lock = threading.Lock()
            attack = None
            if attacker:
                from bench.attack import Attacker

                attack = Attacker(app.url, (CANARY,), tools)
                attack_thread = threading.Thread(target=attack.run, name="attacker", daemon=True)
                attack_thread.start()
            began = time.monotonic()
            stop_at, give_up_at = began + seconds, began + seconds + drain_seconds
            threads = [
                threading.Thread(
                    target=_session,
                    args=(app.url, tools, s, stop_at, give_up_at, max_requests, outcomes, lock),
                    daemon=True,
                )
                for s in range(sessions)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(max(0.0, give_up_at - time.monotonic()) + 30)
            wall = time.monotonic() - began
            if attack is not None:
                attack.stop.set()
                attack_thread.join(600)
            server_log = app.log()
        finally:
            app.stop()
    done = [o for o in outcomes if o.error is None]
    errors = [o.error for o in outcomes if o.error is not None]
    leaks = [leak for o in outcomes for leak in o.leaks]
    waits = [o.queue_wait for o in done if o.queue_wait is not None]
    return {
        "sessions": sessions,
        "seconds": seconds,
        "requests": len(outcomes),
        "completed": len(done),
        "errors": len(errors),
        "leaks": len(leaks),
        "p50_s": percentile([o.seconds for o in done], 50),
        "p95_s": percentile([o.seconds for o in done], 95),
        "max_s": percentile([o.seconds for o in done], 100),
        "queue_wait_p50_s": percentile(waits, 50),
        "queue_wait_p95_s": percentile(waits, 95),
        "episode_p50_s": percentile([o.server_seconds for o in done if o.server_seconds is not None], 50),
        "real_calls": sum(o.real_calls for o in done),
        "requests_per_session": {s: sum(1 for o in outcomes if o.session == s) for s in range(sessions)},
        "wall_s": round(wall, 1),
        "startup_s": round(ready, 1),
        "warmup_s": round(warmup, 1),
        "error_samples": errors[:5],
        "leak_samples": leaks[:5],
        "server_tracebacks": server_log.count("Traceback"),
        **({"attacker": attack.report.to_dict()} if attack is not None else {}),
        "config": {
            "app_env": {k: v for k, v in APP_ENV.items() if k != "ENVACE_CACHE_DIR"},
            "queue_size": max(16, sessions),
            "request": REQUEST,
            "endpoint": "/run",
            "environment": "bank",
        },
    }


def with_and_without_attacker(
    sessions: int, seconds: float, max_requests: int | None = None, drain_seconds: float = 600.0
) -> dict:
    """The load run without, then with, the attacker; ``done``: p95 within 1.5x, no error, no leak."""
    without = run_load(sessions, seconds, max_requests, drain_seconds)
    attacked = run_load(sessions, seconds, max_requests, drain_seconds, attacker=True)
    ratio = (
        round(attacked["p95_s"] / without["p95_s"], 3) if attacked["p95_s"] and without["p95_s"] else None
    )
    attack = attacked["attacker"]
    errors = without["errors"] + attacked["errors"] + attack["errors"]
    leaks = without["leaks"] + attacked["leaks"] + attack["leaks"]
    keys = ("requests", "errors", "leaks", "p50_s", "p95_s", "max_s", "queue_wait_p95_s", "server_tracebacks",
            "error_samples", "leak_samples")
    return {
        "without": {k: without[k] for k in keys},
        "with": {k: attacked[k] for k in keys},
        "attacker": attack,
        "p95_ratio": ratio,
        "done": ratio is not None and ratio <= 1.5 and errors == 0 and leaks == 0,
        "config": without["config"] | {"sessions": sessions, "seconds": seconds},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=16, help=f"concurrent sessions (1 to {MAX_SESSIONS})")
    parser.add_argument(
        "--seconds", type=float, default=120.0, help="how long sessions keep sending requests"
    )
    parser.add_argument(
        "--max-requests", type=int, default=None, help="at most this many requests per session"
    )
    parser.add_argument(
        "--drain-seconds", type=float, default=600.0, help="wait this long for requests in flight"
    )
    parser.add_argument("--attacker", action="store_true", help="run without, then with, an attacker")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.attacker:
        report = with_and_without_attacker(args.sessions, args.seconds, args.max_requests, args.drain_seconds)
        print(json.dumps(report, indent=2))
        return 0 if report["done"] else 1
    report = run_load(args.sessions, args.seconds, args.max_requests, args.drain_seconds)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for key, value in report.items():
            print(f"{key:>22}: {value}")
    return 0 if report["errors"] == 0 and report["leaks"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
