"""BFCL v4 multi-turn entries in the app, through the tabs' own handlers (as the page calls
them) on the real app with the oracle backend (it replays each entry's ground truth): the
Playground sends an entry's user turns one by one against the entry's live backends kept
in the visitor's session (never another's), prefilling the next turn, and BFCL's checker
judges the conversation once every turn is answered; the Suite runs a few entries whole,
scored by that checker; public mode offers fewer entries, each within the turn cap."""

from __future__ import annotations

import json

import pytest
from helpers import built_app

pytest.importorskip("bfcl_eval", reason="bfcl-eval is installed by `make setup` (--no-deps)")

from envace_demo.bfcl_multi import data, open_entry  # noqa: E402
from envace_demo.bfcl_multi.oracle import OracleBackend  # noqa: E402
from envace_demo.errors import ConfigError  # noqa: E402
from envace_demo.settings import Settings  # noqa: E402
from envace_demo.ui import bfcl_entries  # noqa: E402
from envace_demo.ui.inputs import PUBLIC_USER_TURNS, RunRequest, environment_choices  # noqa: E402
from envace_demo.ui.options import UIOptions  # noqa: E402
from envace_demo.ui.session import Session  # noqa: E402

ENTRY = "bfcl-multi-turn:multi_turn_base_3"  # two turns over the file system: find, then copy
TURNS = data.user_turns("multi_turn_base_3")
# mode, n, temperature, top_p, top_k, max_new_tokens, seed, constrained, max_steps
KNOBS = ("none", 1, 0.6, 0.95, 20, 256, 0, False, 6)


def _app(settings: Settings):
    return built_app(settings, OracleBackend([bfcl_entries.entry_task(e) for e in bfcl_entries.offered(False, None)]))


@pytest.fixture(scope="module")
def app():
    demo, handlers = _app(Settings(model="oracle", episode_seconds=60.0))
    yield handlers
    demo.close()


@pytest.fixture(scope="module")
def public_app():
    demo, handlers = _app(Settings(model="oracle", episode_seconds=60.0, max_steps=6, public=True))
    yield demo, handlers
    demo.close()


def _by_id(update: dict) -> dict:
    return {getattr(k, "elem_id", None) or type(k).__name__: v for k, v in update.items()}


def _last(updates: list[dict], elem_id: str):
    return [u[elem_id] for u in updates if elem_id in u][-1]


def _run(handlers, session: Session, message: str = TURNS[0]) -> list[dict]:
    tools = bfcl_entries.tools_text(ENTRY)
    return [_by_id(u) for u in handlers["on_model"].fn(session, tools, ENTRY, message, *KNOBS)]


def _follow_up(handlers, session: Session, message: str) -> list[dict]:
    return [_by_id(u) for u in handlers["on_follow_up"].fn(session, message)]


def _copies(session: Session) -> int:
    """How many files of the session's file system hold the image the second turn copies."""
    return json.dumps(session.conversation.environment.state()).count("Image data 1")


def test_an_entry_is_sent_turn_by_turn_against_backends_kept_per_session(app):
    mine, theirs = Session(), Session()
    updates = _run(app, mine)
    first = mine.conversation.trajectory
    assert first.environment == ENTRY and first.answers and not first.follow_ups
    # Not judged yet: BFCL's checker judges the whole conversation (the record keeps its verdict).
    assert "ev-outcome-info" in _last(updates, "outcome") and "once its 2 user turns" in _last(updates, "outcome")
    assert _last(updates, "follow-up-message") == TURNS[1]  # the entry's next turn, prefilled
    _run(app, theirs)
    assert mine.conversation.environment is not theirs.conversation.environment
    updates = _follow_up(app, mine, TURNS[1])
    traj = mine.conversation.trajectory
    assert traj.follow_ups == [TURNS[1]] and [t.user_turn for t in traj.turns][-1] == 1
    assert traj.success is True and traj.check_reasons == []  # BFCL's checker: valid
    assert "task succeeded" in _last(updates, "outcome")
    # The copy happened in my backends only: the other visitor's stay as their first turn left them.
    assert (_copies(mine), _copies(theirs)) == (2, 1)
    assert theirs.conversation.environment.state() == open_entry(ENTRY).state()  # a read changed nothing
    ready = _by_id(app["ready"].fn(mine))
    assert ready["follow-up-send"].interactive is False and "all answered" in ready["follow-up-note"]


def test_a_turn_that_is_not_the_entrys_own_is_refused(app):
    session = Session()
    _run(app, session)
    updates = _follow_up(app, session, "Now delete everything instead.")
    assert "must be the entry&#x27;s own" in _last(updates, "run-status")
    assert session.conversation.trajectory.follow_ups == []  # nothing ran
    refused = _run(app, Session(), "Something else entirely.")
    assert "must be the entry&#x27;s own" in _last(refused, "run-status")


def test_public_mode_offers_fewer_entries_each_within_the_turn_cap(public_app):
    demo, _ = public_app
    public = UIOptions.from_settings(Settings(public=True))
    offered = [v for _, v in environment_choices(public) if bfcl_entries.is_entry(v)]
    everything = [v for _, v in environment_choices(UIOptions()) if bfcl_entries.is_entry(v)]
    assert 0 < len(offered) <= bfcl_entries.PUBLIC_ENTRIES < len(everything)
    assert all(len(data.user_turns(bfcl_entries.entry_id(v))) <= PUBLIC_USER_TURNS for v in offered)
    hidden = next(v for v in everything if v not in offered)
    with pytest.raises(ConfigError, match="environment: expected one of"):
        RunRequest(bfcl_entries.tools_text(hidden), hidden, "hello").check(public)
    (examples,) = [c for c in demo.config["components"] if c["props"].get("elem_id") == "schema-example"]
    shown = [value for _, value in examples["props"]["choices"] if bfcl_entries.is_entry(value)]
    assert shown == offered


def test_the_suite_runs_the_entries_offered_scored_by_bfcls_checker(public_app):
    _, handlers = public_app
    session = Session()
    updates = list(handlers["run_suite"].fn(session, "bfcl", "bank", None, 8, ["none"], 1, 1,
                                            0.6, 0.95, 20, 128, 0, False, 6, lambda *a, **k: None))
    offered = bfcl_entries.offered(True, PUBLIC_USER_TURNS)
    assert [r["task"] for r in session.suite] == [bfcl_entries.entry_id(e) for e in offered]
    assert all(r["bfcl"]["valid"] is True and r["success"] is True for r in session.suite)
    assert all(r["category"].startswith("multi_turn_") for r in session.suite)
    assert f"{len(offered)} of {len(offered)} episodes" in str(list(updates[-1].values())[0])
