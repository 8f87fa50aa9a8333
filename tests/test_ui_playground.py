"""The Playground's Run and follow-ups, through the tab's own handlers (as the page calls
them) on the real app with a rule-following model: a follow-up runs on the state the first
message left, each visitor's conversation stays their own, public mode caps a
conversation's messages, and a Run is one handler per queue between the buttons' states."""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import pytest

from conftest import call_text, result_text
from helpers import built_app
from envace_demo.models.base import Backend, Generation, ModelInfo, Sampling
from envace_demo.prompts import CURRENT_TOOL
from envace_demo.settings import Settings
from envace_demo.ui.holder import ModelHolder
from envace_demo.ui.session import Session

ROOT = Path(__file__).resolve().parents[1]
TOOLS = (ROOT / "examples" / "bank" / "tools.json").read_text(encoding="utf-8")
DEPOSIT = "Deposit $100 into ACC-1003."
BALANCE = "What is the balance of ACC-1003 now?"
# tools, environment, message, then mode, n, temperature, top_p, top_k, max_new_tokens, seed,
# constrained, max_steps: RunRequest.from_controls' order, as the page sends them.
KNOBS = (1, 0.6, 0.95, 20, 64, 0, False, 3)


class Teller(Backend):
    """Acts on the latest user message: deposits what it is asked to, otherwise looks the
    account up; once a real result is in, answers with it. Rehearses a plain success."""

    supports_constraints = False

    @property
    def info(self) -> ModelInfo:
        return ModelInfo(model_id="teller", device="cpu", dtype="none")

    def render(self, messages, tools=None, enable_thinking=True) -> str:
        return json.dumps({"messages": messages, "tools": tools}, ensure_ascii=False)

    def generate(self, prompt, sampling: Sampling, constraint=None, on_token=None, cancel=None):
        if CURRENT_TOOL in prompt.text:
            return Generation(result_text({"account_id": "ACC-1003", "balance": 300.0}), 8, 10, 0.01)
        messages = json.loads(prompt.text)["messages"]
        last = max(i for i, m in enumerate(messages) if m["role"] == "user")
        results = [m["content"] for m in messages[last:] if m["role"] == "tool"]
        if results:
            out = f"<think>done</think>\nDone: {results[-1]}"
        elif "Deposit" in messages[last]["content"]:
            out = call_text("deposit", {"account_id": "ACC-1003", "amount": 100})
        else:
            out = call_text("get_account", {"account_id": "ACC-1003"})
        return Generation(out, 8, 10, 0.01)


def _app(settings: Settings):
    return built_app(settings, Teller())


@pytest.fixture(scope="module")
def app():
    demo, handlers = _app(Settings(model="teller", episode_seconds=60.0))
    yield handlers
    demo.close()


def _by_id(update: dict) -> dict:
    return {getattr(k, "elem_id", None) or type(k).__name__: v for k, v in update.items()}


def _run(handlers, session: Session, message: str, mode: str = "none", environment: str = "bank") -> list[dict]:
    return [_by_id(u) for u in handlers["on_model"].fn(session, TOOLS, environment, message, mode, *KNOBS)]


def _follow_up(handlers, session: Session, message: str) -> list[dict]:
    return [_by_id(u) for u in handlers["on_follow_up"].fn(session, message)]


def _last(updates: list[dict], elem_id: str):
    return [u[elem_id] for u in updates if elem_id in u][-1]


def _balances(traj) -> list[float]:
    """ACC-1003's balance in each real result: a deposit's new one, a read's."""
    return [c.real.get("balance", c.real.get("new_balance")) for t in traj.turns for c in t.calls if c.real]


def test_a_follow_up_runs_on_the_state_the_first_message_left(app):
    session = Session()
    _run(app, session, DEPOSIT)
    first = session.conversation.trajectory
    assert first.answers and session.conversation.environment.state()["accounts"]["ACC-1003"]["balance"] == 410.25
    updates = _follow_up(app, session, BALANCE)
    traj = session.conversation.trajectory
    assert traj is session.trajectory and traj.follow_ups == [BALANCE]
    assert [t.user_turn for t in traj.turns] == [0, 0, 1, 1]
    assert _balances(traj) == [410.25, 410.25]  # the deposit's result, then the read after it
    assert "410.25" in traj.answers[1] and len(traj.answers) == 2
    # The steps: each user message heads the steps that answer it, in order.
    steps = _last(updates, "committed-steps")
    assert re.findall(r'data-user-turn="(\d)"', steps) == ["0", "1"]
    at = [steps.index(mark) for mark in ('data-user-turn="0"', DEPOSIT, 'data-step="0"', 'data-step="1"',
                                         'data-user-turn="1"', BALANCE, 'data-step="2"', 'data-step="3"')]
    assert at == sorted(at)
    assert _last(updates, "follow-up-message") == ""  # sent: it heads its steps now
    # Same mode and settings as the Run that began the conversation; the record is the whole conversation.
    assert traj.mode == first.mode == "none" and traj.sampling == first.sampling
    assert "410.25" in _last(updates, "outcome")


def test_a_follow_up_rehearses_from_the_conversation_so_far(app):
    session = Session()
    _run(app, session, DEPOSIT, mode="parallel")
    updates = _follow_up(app, session, BALANCE)
    traj = session.conversation.trajectory
    assert traj.mode == "parallel" and [r.user_turn for r in traj.rehearsals] == [0, 1]
    panels = [m["metadata"]["title"] for m in _last(updates, "rehearsals") if "parent_id" not in m["metadata"]]
    assert [t.split(" · ")[0] + " · " + t.split(" · ")[-1] for t in panels] == [
        "Rehearsal 1 · message 1", "Rehearsal 2 · message 2"]
    assert _balances(traj)[-1] == 410.25


def test_two_visitors_conversations_do_not_mix(app):
    alice, bob = Session(), Session()
    _run(app, alice, DEPOSIT)
    _run(app, bob, BALANCE)
    assert alice.conversation.environment is not bob.conversation.environment
    _follow_up(app, bob, BALANCE)
    _follow_up(app, alice, BALANCE)
    assert _balances(bob.conversation.trajectory) == [310.25, 310.25]  # Alice's deposit is not Bob's
    assert _balances(alice.conversation.trajectory) == [410.25, 410.25]
    assert bob.conversation.trajectory.prompt == BALANCE and alice.conversation.trajectory.prompt == DEPOSIT


def test_a_new_run_starts_a_fresh_conversation_and_environment(app):
    session = Session()
    _run(app, session, DEPOSIT)
    before = session.conversation
    _run(app, session, BALANCE)
    assert session.conversation is not before and before.environment is None  # the old one closed
    assert _balances(session.conversation.trajectory) == [310.25] and session.conversation.trajectory.follow_ups == []


def test_a_run_turns_its_buttons_off_first_and_on_last(app):
    session = Session()
    updates = _run(app, session, BALANCE)
    assert {updates[0]["run-button"].interactive, updates[0]["follow-up-send"].interactive} == {False}
    assert updates[-1]["run-button"].interactive and updates[-1]["follow-up-send"].interactive
    assert "message 2 of this conversation" in updates[-1]["follow-up-note"]


def test_a_refused_follow_up_keeps_the_conversation_and_what_was_typed(app):
    session = Session()
    updates = _follow_up(app, session, BALANCE)  # nothing to follow yet
    assert "press Run first" in _last(updates, "run-status") and "follow-up-message" not in _by_id(updates[-1])
    _run(app, session, DEPOSIT)
    conversation, traj = session.conversation, session.conversation.trajectory
    updates = _follow_up(app, session, "   ")
    assert "follow-up: empty" in _last(updates, "run-status")
    assert all("follow-up-message" not in u and "committed-steps" not in u for u in updates)  # nothing cleared
    assert session.conversation is conversation and conversation.trajectory is traj
    assert updates[-1]["follow-up-send"].interactive  # it may still go on


def test_each_queue_runs_its_own_environments():
    demo, handlers = _app(Settings(model="teller", episode_seconds=60.0, manual_seconds=1.0))
    try:
        session = Session()
        on_model = [_by_id(u) for u in handlers["on_model"].fn(session, TOOLS, "manual", BALANCE, "none", *KNOBS)]
        assert "own Run button" in _last(on_model, "run-status") and session.conversation is None
        on_manual = [_by_id(u) for u in handlers["on_manual"].fn(session, TOOLS, "bank", BALANCE, "none", *KNOBS)]
        assert "runs that environment only" in _last(on_manual, "run-status")
        # The manual environment's run takes no follow-up: its responses were typed.
        typed = [_by_id(u) for u in handlers["on_manual"].fn(session, TOOLS, "manual", BALANCE, "none", *KNOBS)]
        assert session.trajectory.environment == "manual" and not typed[-1]["follow-up-send"].interactive
        run_buttons = [d for d in demo.fns.values() if getattr(d.fn, "__name__", "") == "run_buttons"]
        assert len(run_buttons) == 1
    finally:
        demo.close()


def test_a_click_is_one_handler_on_its_queue_then_the_buttons():
    """Each trigger starts one queued handler and, after it, the buttons' state: two steps."""
    demo, _ = _app(Settings(model="teller"))
    try:
        fns = demo.fns  # id -> the event's function and options
        for name, queue in (("on_model", "model"), ("on_manual", "manual"), ("on_follow_up", "model")):
            ((first, fn),) = [(i, f) for i, f in fns.items() if getattr(f.fn, "__name__", "") == name]
            assert fn.concurrency_id == queue and fn.trigger_after is None and fn.queue  # the click's first step
            after = [f for f in fns.values() if f.trigger_after == first]
            assert [f.fn.__name__ for f in after] == ["ready"] and not after[0].queue
            second = next(i for i, f in fns.items() if f is after[0])
            assert not [f for f in fns.values() if f.trigger_after == second]  # nothing more
    finally:
        demo.close()


def test_public_mode_caps_a_conversations_messages():
    from envace_demo.ui.inputs import PUBLIC_USER_TURNS

    demo, handlers = _app(Settings(public=True, model="teller", episode_seconds=60.0, max_steps=3,
                                   max_new_tokens=64))
    try:
        session = Session()
        updates = _run(handlers, session, DEPOSIT)
        assert f"message 2 of this conversation (at most {PUBLIC_USER_TURNS} in this public demo)" in updates[-1]["follow-up-note"]
        for _ in range(PUBLIC_USER_TURNS - 1):
            updates = _follow_up(handlers, session, BALANCE)
        traj = session.conversation.trajectory
        assert 1 + len(traj.follow_ups) == PUBLIC_USER_TURNS == len(traj.answers)
        assert not updates[-1]["follow-up-send"].interactive
        assert f"its {PUBLIC_USER_TURNS} user messages" in updates[-1]["follow-up-note"]
        refused = _follow_up(handlers, session, BALANCE)  # sent anyway (the API, a stale page)
        assert f"its {PUBLIC_USER_TURNS} user messages" in _last(refused, "run-status")
        assert session.conversation.trajectory is traj
    finally:
        demo.close()


def test_a_conversation_on_a_gpu_worker_gets_its_environment_back(monkeypatch):
    """On ZeroGPU an episode runs in a forked worker, on pickled copies of its arguments:
    the environment the worker changed comes back, and the next message sees its state."""
    from envace_demo.ui import runner
    from envace_demo.ui.inputs import RunRequest, resolve
    from envace_demo.ui.options import UIOptions
    from envace_demo.ui.session import Conversation

    def forked(*args):
        for item in runner._episode(*pickle.loads(pickle.dumps(args))):
            yield pickle.loads(pickle.dumps(item))

    settings = Settings(model="teller")
    holder = ModelHolder(settings, loader=lambda s: Teller())
    holder.start()
    backend = holder.wait(timeout=60)
    runner.bind(holder, UIOptions())
    monkeypatch.setattr(runner, "_uses_gpu", lambda: True)
    monkeypatch.setattr(runner, "_episode_on_gpu", forked)
    request = RunRequest(TOOLS, "bank", DEPOSIT, mode="none", max_steps=3)
    task, config = resolve(request, UIOptions(), settings, backend)
    conversation = Conversation(request, runner.kept_environment(task))
    kept = conversation.environment
    events = list(runner.episode_events(task, config, conversation=conversation))
    conversation.trajectory = events[-1].trajectory
    assert conversation.environment is not kept  # the worker's copy, with the deposit
    assert conversation.environment.state()["accounts"]["ACC-1003"]["balance"] == 410.25
    task, config = resolve(request, UIOptions(), settings, backend, previous=conversation.trajectory, follow_up=BALANCE)
    from envace_demo.ui import render

    view = render.LiveView(before=conversation.trajectory)  # the events' records are copies, as on ZeroGPU
    for event in runner.episode_events(task, config, conversation=conversation):
        view.apply(event)
        if not view.finished:
            assert [t.index for t in view.trajectory.turns] == list(range(len(view.trajectory.turns)))
    assert _balances(view.trajectory) == [410.25, 410.25]
    assert [t.user_turn for t in view.trajectory.turns] == [0, 0, 1, 1]
