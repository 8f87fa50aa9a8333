"""Faults: each ends the episode with an error step or a clear message, keeps what was
already shown, and leaves the app serving everybody else.

- a tool that raises, hangs, or hangs until Stop or the time limit;
- a model that emits garbage, nothing, or never stops, or that raises;
- Stop in the middle of a rehearsal;
- a disk too full to save an adapter;
- in the app: one session's failures beside another session's run.

An MCP server killed or frozen mid-episode is covered in ``tests/test_mcp.py``
(``test_server_killed_mid_episode_gives_an_error_step_not_a_hang``,
``test_server_hung_mid_episode_times_out_and_close_kills_it``).

Models here are scripted stand-ins (``conftest.ScriptedBackend``, ``RuleBackend``
below): the point is an exact fault at an exact moment.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import call_text, result_text
from helpers import RuleBackend, serve
from envace_demo import engine
from envace_demo.engine import Episode, EpisodeConfig, run_episode
from envace_demo.envs.registry import create
from envace_demo.errors import ConfigError, EnvaceError
from envace_demo.events import Generating, TurnUpdated
from envace_demo.models.base import Backend, Generation, ModelInfo
from envace_demo.record import call_steps
from envace_demo.tasks import find_task

ROOT = Path(__file__).resolve().parents[1]
BALANCE = call_text("get_account", {"account_id": "ACC-1003"})
DEPOSIT = call_text("deposit", {"account_id": "ACC-1003", "amount": 50})
ANSWER = "<think>done</think>\nThe balance of ACC-1003 is 310.25 USD."
PREDICTED = result_text({"account_id": "ACC-1003", "balance": 300.0})


def _task():
    return find_task("bank", "check-balance")


def _events(backend, config, env=None, cancel=None):
    return list(Episode(backend, _task(), config, env or create("bank"), cancel=cancel).run())


def _assert_nothing_lost(events) -> None:
    """Every turn and call once shown (a TurnUpdated event) is in the final record, as shown."""
    traj = events[-1].trajectory
    turns = traj.turns + [t for r in traj.rehearsals for t in r.turns]
    shown = [e for e in events if isinstance(e, TurnUpdated)]
    assert shown and all(any(e.turn is t for t in turns) for e in shown)
    assert all(e.call is None or e.call < len(e.turn.calls) for e in shown)
    json.dumps(traj.to_dict())  # and it still exports


# ---- tools that fail ---------------------------------------------------------------------------


def _env_with(execute):
    env = create("bank")
    real = env.execute
    env.execute = lambda name, args: execute(real, name, args)
    return env


def test_a_tool_that_raises_mid_episode_is_an_error_step_after_the_good_ones(scripted):
    def second_call_raises(real, name, args):
        if name == "deposit":
            raise ConnectionResetError("core banking link reset")
        return real(name, args)

    # The committed run takes the imagined run's first action (the same prompt and seed).
    backend = scripted(actor=[BALANCE, ANSWER, DEPOSIT], rehearser=[PREDICTED] * 3)
    events = _events(backend, EpisodeConfig(mode="parallel", n=1), _env_with(second_call_raises))
    traj = events[-1].trajectory
    assert traj.ended == "environment_error"
    good, bad = call_steps(traj.turns)
    assert good.real["balance"] == 310.25 and good.error is None
    assert bad.real == {"error": {"code": "ENVIRONMENT_FAILURE", "message": "core banking link reset"}}
    assert bad.error == "the environment failed: core banking link reset"
    assert bad.rehearsed is not None  # the rehearsal shown before the call is kept
    assert len(traj.rehearsals) == 1 and traj.memory is not None
    _assert_nothing_lost(events)


@pytest.mark.timing
def test_a_tool_that_hangs_times_out_as_an_error_step(scripted):
    release = threading.Event()

    def hang(real, name, args):
        release.wait(30)
        return real(name, args)

    backend = scripted(actor=[BALANCE])
    started = time.monotonic()
    try:
        events = _events(backend, EpisodeConfig(mode="none", tool_seconds=0.5), _env_with(hang))
    finally:
        release.set()
    assert time.monotonic() - started < 5
    traj = events[-1].trajectory
    assert traj.ended == "environment_error"
    (step,) = call_steps(traj.turns)
    assert step.real == {"error": {"code": "TOOL_TIMEOUT", "message": "no response within 0.5 s"}}
    assert step.error == "the environment did not answer: no response within 0.5 s"
    assert 0.4 < step.execute_seconds < 3
    _assert_nothing_lost(events)


@pytest.mark.timing
def test_stop_during_a_hanging_tool_ends_the_episode_at_once(scripted):
    release, cancel = threading.Event(), threading.Event()

    def hang(real, name, args):
        cancel.set()  # the visitor presses Stop while the call runs
        release.wait(30)
        return real(name, args)

    started = time.monotonic()
    try:
        events = _events(
            scripted(actor=[BALANCE]), EpisodeConfig(mode="none"), _env_with(hang), cancel=cancel
        )
    finally:
        release.set()
    assert time.monotonic() - started < 3
    traj = events[-1].trajectory
    assert traj.ended == "cancelled"
    (step,) = call_steps(traj.turns)
    assert step.real["error"]["code"] == "CANCELLED" and step.error
    _assert_nothing_lost(events)


@pytest.mark.timing
def test_the_episode_time_limit_bounds_a_hanging_tool(scripted):
    release = threading.Event()
    started = time.monotonic()
    try:
        events = _events(
            scripted(actor=[BALANCE]),
            EpisodeConfig(mode="none", episode_seconds=0.5, tool_seconds=60),
            _env_with(lambda real, name, args: release.wait(30)),
        )
    finally:
        release.set()
    assert time.monotonic() - started < 3
    traj = events[-1].trajectory
    assert traj.ended == "time_limit" and traj.turns[0].calls[0].real["error"]["code"] == "TIME_LIMIT"


def test_tool_seconds_must_be_positive():
    with pytest.raises(ConfigError, match="tool_seconds must be positive"):
        EpisodeConfig(tool_seconds=0)


# ---- models that misbehave -------------------------------------------------------------------

GARBAGE = [
    "\x00\x01\x02\ufffd" * 50,
    '<tool_call>\n{"name": "get_account", "arguments": {"account_id": "ACC-10',  # cut off mid-call
    "<tool_call>\n<tool_call>\n</tool_call></tool_call>",
    '<tool_call>\n{"name": "drop_tables", "arguments": {}}\n</tool_call>',
    "<tool_call>\n" + "[" * 10_000 + "\n</tool_call>",
]


@pytest.mark.parametrize("text", GARBAGE, ids=["bytes", "cut-off", "nested-tags", "unknown-tool", "deep"])
def test_an_actor_emitting_garbage_gets_a_contract_error_step(scripted, text):
    env = create("bank")
    before = env.state()
    events = _events(scripted(actor=[text]), EpisodeConfig(mode="none", require_first_call=True), env)
    traj = events[-1].trajectory
    assert traj.ended == "parse_error"
    (turn,) = traj.turns
    assert turn.calls == [] and turn.action.text == text
    assert turn.error.split(":")[0] in {
        "JSON_DECODE_ERROR",
        "INVALID_TOOL_NAME",
        "NO_TOOL_CALL_FOUND",
        "NO_ARGUMENTS",
    }
    assert env.state() == before and traj.totals()["real_calls"] == 0  # nothing was executed
    _assert_nothing_lost(events)


def test_an_actor_emitting_nothing(scripted):
    required = run_episode(
        scripted(actor=[""]), _task(), EpisodeConfig(mode="none", require_first_call=True), create("bank")
    )
    assert required.ended == "parse_error" and required.turns[0].error.startswith("NO_TOOL_CALL_FOUND")
    free = run_episode(scripted(actor=[""]), _task(), EpisodeConfig(mode="none"), create("bank"))
    assert free.ended == "answer" and free.final_answer == "" and free.success is False


@pytest.mark.parametrize(
    "text", ["", "\ufffd" * 100, "<execution_result>{not json</execution_result>", "<think>" * 1000]
)
def test_a_rehearser_emitting_garbage_or_nothing_still_lets_the_real_call_run(scripted, text):
    backend = scripted(actor=[BALANCE, ANSWER], rehearser=[text])
    events = _events(backend, EpisodeConfig(mode="parallel", n=1, max_steps=1, imagined_reads="rehearse"), create("bank"))
    traj = events[-1].trajectory
    imagined = traj.rehearsals[0].turns[0].calls[0]
    assert imagined.rehearsed["error"]["code"] == "REHEARSAL_FAILED" and imagined.rehearsal_text == text
    _assert_nothing_lost(events)


class EndlessBackend(Backend):
    """Streams tokens for ever; honours ``cancel`` unless ``deaf``."""

    supports_constraints = False

    def __init__(self, deaf: bool = False):
        self.deaf = deaf

    @property
    def info(self) -> ModelInfo:
        return ModelInfo(model_id="endless", device="cpu", dtype="none")

    def render(self, messages, tools=None, enable_thinking=True) -> str:
        return json.dumps(messages)

    def generate(self, prompt, sampling, constraint=None, on_token=None, cancel=None):
        text, started = "<think>", time.monotonic()
        while time.monotonic() - started < 30:
            if cancel is not None and cancel.is_set() and not self.deaf:
                return Generation(text, len(text), 10, time.monotonic() - started, "cancelled")
            text += "and then "
            if on_token:
                on_token(0, text)
            time.sleep(0.01)
        return Generation(text, len(text), 10, 30.0, "length")


@pytest.mark.timing
def test_a_model_that_never_stops_is_ended_by_the_time_limit_and_its_stream_was_shown():
    started = time.monotonic()
    events = list(
        Episode(
            EndlessBackend(), _task(), EpisodeConfig(mode="none", episode_seconds=0.5), create("bank")
        ).run()
    )
    assert time.monotonic() - started < 3
    assert events[-1].trajectory.ended == "time_limit"
    streamed = [e.text for e in events if isinstance(e, Generating)]
    assert streamed and streamed[-1].startswith("<think>and then")


@pytest.mark.timing
def test_a_model_that_ignores_stop_is_abandoned_after_a_grace_period(monkeypatch):
    monkeypatch.setattr(engine.episode, "HALT_GRACE_S", 0.5)
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    started = time.monotonic()
    traj = run_episode(
        EndlessBackend(deaf=True), _task(), EpisodeConfig(mode="none"), create("bank"), cancel=cancel
    )
    assert traj.ended == "cancelled"
    assert time.monotonic() - started < 3  # Stop at 0.3 s, then the grace


def test_an_answer_cut_by_the_token_limit_says_so(scripted):
    class Cut(type(scripted())):
        def generate(self, *args, **kwargs):
            return Generation("<think>x</think>The balance is 3", 16, 10, 0.1, "length")

    traj = run_episode(Cut(), _task(), EpisodeConfig(mode="none"), create("bank"))
    assert traj.ended == "max_new_tokens"
    assert traj.turns[-1].error.startswith("cut by the new-token limit (max_new_tokens=")


def test_a_model_that_raises_mid_episode_keeps_the_steps_already_shown(scripted):
    def explode(prompt):
        raise RuntimeError("CUDA error: device-side assert triggered")

    events = _events(scripted(actor=[BALANCE, explode]), EpisodeConfig(mode="none"))
    traj = events[-1].trajectory
    assert traj.ended == "model_error: CUDA error: device-side assert triggered"
    assert len(traj.turns) == 1 and traj.turns[0].calls[0].real["balance"] == 310.25
    _assert_nothing_lost(events)


# ---- Stop in the middle of a rehearsal -------------------------------------------------------


def test_stop_in_the_middle_of_a_rehearsal_keeps_the_earlier_ones_and_executes_nothing(scripted):
    cancel = threading.Event()

    def stop_now(prompt):  # the second rehearsal's rehearser is generating when Stop comes
        cancel.set()
        return PREDICTED

    backend = scripted(actor=[BALANCE, ANSWER, BALANCE], rehearser=[PREDICTED, stop_now], delay=0.05)
    env = create("bank")
    before = env.state()
    events = _events(backend, EpisodeConfig(mode="sequential", n=3, imagined_reads="rehearse"), env, cancel=cancel)
    traj = events[-1].trajectory
    assert traj.ended == "cancelled"
    first, second = traj.rehearsals  # the third never started
    assert first.ended == "answer" and first.turns[0].calls[0].rehearsed["balance"] == 300.0
    assert second.ended == "cancelled"
    assert traj.turns == [] and traj.memory is None and env.state() == before
    _assert_nothing_lost(events)


# ---- a disk too full to save an adapter --------------------------------------------------------


@pytest.fixture
def tiny_disk(tmp_path):
    """A 256 KiB tmpfs (root only; skipped where mounting is not allowed)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def _fill(disk: Path) -> None:
    with open(disk / "filler", "wb", buffering=0) as fh:  # unbuffered: close() has nothing left to flush
        try:
            while True:
                fh.write(b"\0" * 4096)
                fh.flush()
        except OSError:
            pass


def test_a_full_disk_when_saving_the_adapter_is_a_clear_typed_error(tiny_disk):
    from envace_demo.train.config import TrainConfig
    from envace_demo.train.events import Progress, StepFinished
    from envace_demo.train.trainer import Trainer
    from helpers import TRAIN, tiny_random_backend

    backend = tiny_random_backend()
    run = TrainConfig(steps=1, group_size=2, prompts_per_step=1, max_new_tokens=8, eval_rehearsals=0)
    trainer = Trainer(backend, TRAIN, [], run, tiny_disk / "run")
    seen = []
    with pytest.raises(EnvaceError) as err:
        for event in trainer.run():
            seen.append(event)
            if isinstance(event, Progress) and event.stage == "save" and event.done == 0:
                _fill(tiny_disk)  # the step is done; now the disk fills up
    message = str(err.value)
    assert "adapter" in message and "No space left on device" in message
    assert "Traceback" not in message
    assert any(isinstance(e, StepFinished) for e in seen)  # the step's metrics were shown ...
    assert (tiny_disk / "run" / "metrics.jsonl").read_text().strip()  # ... and written before the disk filled


# ---- the app keeps serving other sessions --------------------------------------------------------


@pytest.fixture(scope="module")
def fault_app():
    from envace_demo.settings import Settings

    settings = Settings(model="rules", episode_seconds=2.0, max_steps=3, concurrency=2)
    with serve(settings, RuleBackend()) as url:
        yield url


def test_one_sessions_failures_do_not_disturb_another_sessions_run(fault_app):
    from gradio_client import Client

    tools = (ROOT / "examples" / "bank" / "tools.json").read_text(encoding="utf-8")
    healthy = "What is the current balance of account ACC-1003?"

    def run(message):
        client = Client(fault_app, verbose=False)  # a session of its own
        try:
            return client.predict(tools, "bank", message, "none", api_name="/run")
        finally:
            client.close()

    with ThreadPoolExecutor(3) as pool:
        crashed = pool.submit(run, "EXPLODE please")
        endless = pool.submit(run, "think FOREVER")
        fine = pool.submit(run, healthy)
        records = crashed.result(60), endless.result(60), fine.result(60)
    crashed, endless, fine = records
    assert crashed["ended"] == "model_error: the model crashed" and crashed["turns"] == []
    assert endless["ended"] == "time_limit"
    assert fine["ended"] == "answer" and fine["success"] is True and fine["prompt"] == healthy
    assert fine["turns"][0]["calls"][0]["real"]["balance"] == 310.25  # its own fresh environment
    again = run(healthy)  # and the app still serves afterwards
    assert again["ended"] == "answer" and again["final_state"] == fine["final_state"]
