"""The app's logic without a browser: inputs -> task and config, events -> what the page
shows, the runner, the model holder.

Episodes here use the ``scripted`` backend (exact outputs, so the rendering can be
checked exactly); the real model runs in test_app_api.py and test_browser.py.
"""

from __future__ import annotations

import copy
import html
import json
import threading
import time
from pathlib import Path

import pytest
from conftest import VENDORED_BFCL, call_text, result_text
from helpers.scripted import sure

from envace_demo.engine import Episode, EpisodeConfig
from envace_demo.envs.registry import create
from envace_demo.errors import ConfigError, ModelError, SchemaError, TaskError
from envace_demo.policy import DEFAULT_POLICY as POLICY
from envace_demo.events import EpisodeFinished, EpisodeStarted, Generating, TurnUpdated
from envace_demo.record import Trajectory, call_steps
from envace_demo.settings import Settings
from envace_demo.tasks import Task, find_task
from envace_demo.ui import render, runner
from envace_demo.ui.holder import ModelHolder
from envace_demo.ui.inputs import (
    NO_ENVIRONMENT,
    RunRequest,
    build_config,
    build_task,
    compare_modes,
    example_tools,
    suite_tasks,
)
from envace_demo.ui.options import UIOptions
from envace_demo.ui.session import Session

BALANCE = call_text(
    "get_account", {"account_id": "ACC-1003"}, thinking="look it up <tool_call>not a call</tool_call>"
)
ANSWER = "<think>done</think>\nThe balance of ACC-1003 is 310.25 USD."
PREDICTED = {"account_id": "ACC-1003", "owner": "Ben Okafor", "balance": 300.0}
PROMPT = "What is the current balance of account ACC-1003?"


def _parallel_events(scripted) -> list:
    backend = scripted(
        # 2 imagined, then the commit: it takes the lead imagined action (the same prompt and seed)
        actor=[BALANCE, BALANCE, ANSWER, ANSWER, ANSWER],
        rehearser=[result_text(PREDICTED)] * 3,
    )
    task = find_task("bank", "check-balance")
    return list(Episode(backend, task, EpisodeConfig(mode="parallel", n=2, imagined_reads="rehearse",
                                                              imagined_others="always"), create("bank")).run())


def _view(events) -> render.LiveView:
    view = render.LiveView()
    for event in events:
        view.apply(event)
    return view


# ---- inputs -------------------------------------------------------------------------------


def _request(**changes) -> RunRequest:
    base = dict(tools=example_tools("bank"), environment="bank", message=PROMPT)
    return RunRequest(**{**base, **changes})


def test_an_example_request_keeps_its_success_check_and_a_custom_one_has_none():
    task = build_task(_request())
    assert task.name == "check-balance" and task.env == "bank" and task.check
    custom = build_task(_request(message="Freeze ACC-1001 please."))
    assert custom.name == "custom" and custom.env == "bank" and custom.check is None
    imagined = build_task(_request(environment=NO_ENVIRONMENT))
    assert imagined.env is None and imagined.check is None


def test_an_invalid_schema_raises_a_located_error():
    bad = '[{"type": "function", "function": {"name": "x", "parameters": {"type": "object", "properties": {"u": {"type": "strng"}}}}}]'
    with pytest.raises(SchemaError) as err:
        build_task(_request(tools=bad))
    assert err.value.location == "tools[0].function.parameters.properties.u.type"
    shown = render.schema_error_html(err.value)
    assert "tools[0].function.parameters.properties.u.type" in shown and "strng" in shown


def test_an_empty_message_is_refused():
    with pytest.raises(TaskError, match="user message"):
        build_task(_request(message="   "))


def test_public_caps_are_enforced_on_the_server_side():
    public = UIOptions.from_settings(Settings(public=True))
    with pytest.raises(ConfigError, match="n: expected an integer from 1 to 4"):
        _request(n=5).check(public)
    # Public caps are the settings' own step and token values.
    _request(n=4, max_new_tokens=Settings().max_new_tokens, max_steps=Settings().max_steps).check(public)
    with pytest.raises(ConfigError, match="max_new_tokens"):
        _request(max_new_tokens=100_000).check(UIOptions())
    with pytest.raises(ConfigError, match="mode"):
        _request(mode="dream").check(UIOptions())
    with pytest.raises(ConfigError, match="environment"):
        _request(environment="casino").check(UIOptions())


def test_config_follows_the_request_and_the_backend(scripted):
    backend = scripted()
    config = build_config(
        _request(n=3, seed=7, max_new_tokens=64, max_steps=2), Settings(), backend, mode="none"
    )
    assert config.mode == "none" and config.n == 3 and config.max_steps == 2
    assert config.sampling.seed == 7 and config.sampling.max_new_tokens == 64
    assert config.constrained is False  # the scripted backend cannot constrain
    assert config.require_first_call is False  # only the embedded model must call first


def test_compare_modes_and_suite_sources(tmp_path):
    assert compare_modes("sequential") == ("none", "sequential")
    with pytest.raises(ConfigError):
        compare_modes("none")
    assert [t.task.name for t in suite_tasks("env", "bank", None, 3, POLICY)] == [
        "check-balance",
        "deposit-cash",
        "transfer-to-savings",
    ]
    bfcl = suite_tasks("upload", "bank", str(VENDORED_BFCL / "bfcl_simple.jsonl"), 2, POLICY)
    assert len(bfcl) == 2 and all(t.task.env is None and "calls" in t.task.check for t in bfcl)
    with pytest.raises(TaskError, match="upload a JSONL"):
        suite_tasks("upload", "bank", None, 3, POLICY)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"name": "a", "prompt": "p", "env": "bank"}\nnot json\n')
    with pytest.raises(TaskError, match="broken.jsonl:2"):
        suite_tasks("upload", "bank", str(broken), 5, POLICY)


# ---- events -> page ------------------------------------------------------------------------


def test_rehearsals_render_as_nested_panels(scripted):
    messages = render.messages_for(_view(_parallel_events(scripted)))
    ids = {m["metadata"]["id"]: m for m in messages}
    assert [m["metadata"]["title"] for m in messages if "parent_id" not in m["metadata"]] == [
        "Rehearsal 1 · 1 imagined call, ended: answer",
        "Rehearsal 2 · 1 imagined call, ended: answer",
    ]
    step = ids["r0s0"]
    assert step["metadata"]["parent_id"] == "r0" and "get_account" in step["metadata"]["title"]
    assert '"account_id": "ACC-1003"' in step["content"]
    assert ids["r0s0reh"]["metadata"]["parent_id"] == "r0s0" and "Ben Okafor" in ids["r0s0reh"]["content"]
    # Reasoning is nested under its step, escaped: no raw tag reaches the chatbot.
    think = ids["r0s0think"]["content"]
    assert ids["r0s0think"]["metadata"]["parent_id"] == "r0s0"
    assert "<tool_call>" not in think and "&lt;tool_call&gt;" in think
    assert ids["r1ans"]["content"].startswith("The balance")
    assert all(m["metadata"]["status"] == "done" for m in messages)


def test_an_imagined_read_fetched_for_real_says_so_under_its_step(scripted):
    backend = scripted(actor=[BALANCE, ANSWER, ANSWER])  # no rehearser output: the read is fetched
    events = list(Episode(backend, find_task("bank", "check-balance"), EpisodeConfig(mode="parallel", n=1),
                          create("bank")).run())
    ids = {m["metadata"]["id"]: m for m in render.messages_for(_view(events))}
    fetched = ids["r0s0reh"]
    assert fetched["metadata"]["title"] == render.episode.FETCHED_TITLE and "310.25" in fetched["content"]
    assert events[-1].trajectory.success is True


def test_a_read_made_in_the_actors_place_says_so_and_the_refused_one_says_why(scripted):
    notes = "/notes/meeting-2025-03-10.md"
    backend = scripted(actor=[call_text("list_directory", {"path": notes}), "<think></think>\nAna, Raj and Mei."])
    events = list(Episode(backend, Task("t", f"Who attended the sync in {notes}?", create("files").tools()),
                          EpisodeConfig(mode="none"), create("files")).run())
    page = render.steps_html(_view(events))
    assert html.escape(render.episode.INSTEAD_NOTE.format(why="read_file of the path list_directory refused")) in page
    assert "NOT_A_DIRECTORY): read_file reads it instead" in html.unescape(page)  # the refused turn's note


def test_an_answer_whose_quote_was_completed_says_so(scripted):
    notes = "/notes/meeting-2025-03-10.md"
    cut = "<think></think>\nIt says: # Team sync, 2025-03-10\nAttendees: Ana, Raj, Mei"
    backend = scripted(actor=[call_text("read_file", {"path": notes}), cut])
    events = list(Episode(backend, Task("t", f"What does {notes} say?", create("files").tools()),
                          EpisodeConfig(mode="none"), create("files")).run())
    page = html.unescape(render.steps_html(_view(events)))
    assert render.episode.COMPLETED_NOTE.format(why=cut.split("\n", 1)[1]) in page
    assert "- Next sync: 2025-03-17" in page


def test_a_read_repeated_and_not_made_says_so(scripted):
    backend = scripted(actor=[BALANCE, BALANCE, ANSWER])
    events = list(Episode(backend, find_task("bank", "check-balance"), EpisodeConfig(mode="none"),
                          create("bank")).run())
    page = html.unescape(render.steps_html(_view(events)))
    assert "call not made" in page and "it repeats a read made since the last write" in page


def test_committed_steps_show_action_rehearsed_and_real_with_badges(scripted):
    events = _parallel_events(scripted)
    view = _view(events)
    page = render.steps_html(view)
    assert page.count('class="ev-col ev-act"') == 1  # one call, then the answer turn
    assert 'class="ev-col ev-rehearsed"' in page and 'class="ev-col ev-real"' in page
    real_col = page.split('class="ev-col ev-real"')[1]
    assert "310.25" in real_col  # the environment's answer
    assert "300.0" in page.split('class="ev-col ev-rehearsed"')[1].split("ev-col ev-real")[0]
    fid = events[-1].trajectory.turns[0].calls[0].fidelity
    assert f"fidelity {fid:.2f}" in page and "arguments valid" in page
    assert "<tool_call>not a call" not in page and "&lt;tool_call&gt;not a call" in page  # reasoning escaped
    outcome = render.outcome_html(view.trajectory)
    assert "task succeeded" in outcome and "310.25" in outcome and "ended: answer" in outcome


def test_an_answer_set_aside_and_its_checked_call_are_shown(scripted):
    withdraw = call_text("withdraw", {"account_id": "ACC-1005", "amount": 40})
    refused = {"error": {"code": "INSUFFICIENT_FUNDS", "message": "too little"}}
    backend = scripted(actor=["<think></think>\nNo call.", withdraw, "<think></think>\nToo little.",
                              "<think></think>\nRefused."], rehearser=[result_text(refused)])
    task = Task("w", "Withdraw $40 from ACC-1005.", create("bank").tools())
    view = _view(list(Episode(backend, task, EpisodeConfig(mode="parallel", n=1), create("bank")).run()))
    page = render.steps_html(view)
    assert "answer set aside" in page and "checked for real" in page and "the held withdraw" in page
    assert "<b>1</b> checked calls" in render.outcome_html(view.trajectory)


def _foreseen_refusal(scripted, certainty: float, answer: str):
    """A $40 withdrawal from 15.50 whose rehearser foresaw the refusal with ``certainty``:
    the view, and its steps page unescaped."""
    withdraw = call_text("withdraw", {"account_id": "ACC-1005", "amount": 40})
    refused = {"error": {"code": "INSUFFICIENT_FUNDS", "message": "too little"}}
    backend = scripted(actor=["<think></think>\nNo call.", withdraw, f"<think></think>\n{answer}"],
                       rehearser=[sure(result_text(refused), certainty)])
    task = Task("w", "Withdraw $40 from ACC-1005.", create("bank").tools())
    view = _view(list(Episode(backend, task, EpisodeConfig(mode="parallel", n=1), create("bank")).run()))
    return view, html.unescape(render.steps_html(view))


def test_a_trusted_held_call_says_how_sure_the_rehearser_was(scripted):
    view, page = _foreseen_refusal(scripted, 0.97, "Too little.")
    assert "trusted: the rehearser gave this failure 0.97" in page and "answer set aside" not in page
    assert "<b>1</b> trusted calls" in render.outcome_html(view.trajectory)


def test_an_unsure_foreseen_failure_says_it_ran_at_once(scripted):
    view, page = _foreseen_refusal(scripted, 0.55, "Refused.")
    assert "not held: the rehearser gave this failure only 0.55" in page and "INSUFFICIENT_FUNDS" in page
    assert "<b>1</b> failures foreseen unsure" in render.outcome_html(view.trajectory)


def test_facts_the_engine_stated_to_the_rehearser_are_shown_under_its_reads(scripted):
    view, page = _foreseen_refusal(scripted, 0.97, "Too little.")
    assert "stated from these reads" not in page  # a rehearser not trained on facts is told none
    (step,) = call_steps(view.trajectory.turns)
    step.stated_facts = "ACC-1005: active, balance 15.5; amount 40 vs balance 15.5: over. Outcome: "
    page = html.unescape(render.steps_html(view))
    assert ("stated from these reads: ACC-1005: active, balance 15.5; amount 40 vs balance 15.5: over; "
            "the outcome and the response are the rehearser's") in page


def test_memory_card_lists_each_rehearsal_by_the_name_the_panels_use(scripted):
    view = _view(_parallel_events(scripted))
    card = render.memory_html(view.trajectory.memory)
    assert card.count("<b>Rehearsal ") == 2 and "<b>Attempt" not in card
    assert "get_account" in card and "Ben Okafor" in card


def test_pickled_events_render_the_same_as_live_ones(scripted):
    """On ZeroGPU events cross a process boundary: the view must not rely on shared objects."""
    events = _parallel_events(scripted)
    copied = [copy.deepcopy(e) for e in events[:-1]]  # stop short of EpisodeFinished
    live = _view(events[:-1])
    assert render.steps_html(_view(copied)) == render.steps_html(live)
    assert render.messages_for(_view(copied)) == render.messages_for(live)


def test_streaming_text_shows_in_a_pending_step():
    view = render.LiveView()
    view.apply(
        EpisodeStarted(
            Trajectory(mode="parallel", model={}, tools=[], prompt=PROMPT, environment="bank", n=2)
        )
    )
    # Each imagined trajectory streams under its own index.
    view.apply(Generating("actor", "rehearsal", 1, "<tool_call>{partial"))
    messages = render.messages_for(view)
    pending = [m for m in messages if m["metadata"]["status"] == "pending"]
    assert [m["metadata"]["id"] for m in pending] == ["r1", "r1live"]
    assert render.progress_text(view).startswith("rehearsal 2 of 2")
    view.apply(Generating("actor", "commit", None, "<script>alert(1)</script>"))
    page = render.steps_html(view)
    assert "ev-pending" in page and "&lt;script&gt;" in page and "<script>" not in page


def test_an_event_before_the_start_is_a_bug():
    with pytest.raises(ValueError, match="before EpisodeStarted"):
        render.LiveView().apply(Generating("actor", "commit", None, "x"))


def test_prompt_inspector_shows_the_rendered_prompts(scripted):
    traj = _view(_parallel_events(scripted)).trajectory
    choices = dict((key, label) for label, key in render.inspector_choices(traj))
    assert "c:0" in choices and "r:1:0" in choices and "get_account" in choices["c:0"]
    actor, rehearser = render.inspector_prompts(traj, "c:0")
    assert actor == traj.turns[0].actor_prompt and PROMPT in actor
    assert rehearser == traj.turns[0].calls[0].rehearser_prompt and "Current tool to simulate:" in rehearser
    _, none = render.inspector_prompts(traj, "c:1")  # the answer turn: nothing rehearsed
    assert "no call" in none
    assert render.inspector_prompts(traj, "c:99") == ("", "")


def test_mode_none_and_no_environment_say_why_a_column_is_empty(scripted):
    task = find_task("bank", "check-balance")
    backend = scripted(actor=[BALANCE, ANSWER])
    events = list(Episode(backend, task, EpisodeConfig(mode="none"), create("bank")).run())
    assert "not rehearsed (mode none)" in render.steps_html(_view(events))
    backend = scripted(actor=[BALANCE, ANSWER, BALANCE], rehearser=[result_text(PREDICTED)] * 2)
    task = build_task(_request(environment=NO_ENVIRONMENT))
    events = list(Episode(backend, task, EpisodeConfig(mode="parallel", n=1)).run())
    # The committed call is rehearsed, but nothing real stands behind it.
    assert events[-1].trajectory.ended == "no_environment"
    assert "no environment: not executed" in render.steps_html(_view(events))


def test_metrics_table_and_badges():
    headers, rows = render.metrics_table(
        {
            "none": {"success": False, "real_errors": 2, "fidelity": None},
            "parallel": {"success": True, "real_errors": 0, "fidelity": 0.9},
        }
    )
    assert headers == ["metric", "none", "parallel"]
    table = {r[0]: r[1:] for r in rows}
    assert (
        table["success"] == ["no", "yes"]
        and table["real errors hit"] == [2, 0]
        and table["mean fidelity"] == ["—", "0.90"]
    )
    assert "ev-good" in render.fidelity_badge(0.85) and "ev-bad" in render.fidelity_badge(0.2)
    assert "fidelity —" in render.fidelity_badge(None)


def test_fence_cannot_be_closed_by_the_text_inside():
    block = render.fence("a ``` b", "json")
    assert block.startswith("````json\n") and block.endswith("\n````")


# ---- runner, holder, session --------------------------------------------------------------------


def _holder(backend) -> ModelHolder:
    holder = ModelHolder(Settings(), loader=lambda settings: backend)
    holder.start()
    holder.wait(timeout=60)
    return holder


def test_runner_compare_with_a_scripted_model(scripted):
    backend = scripted(
        actor=[BALANCE, ANSWER] + [BALANCE, ANSWER, BALANCE, ANSWER],
        rehearser=[result_text(PREDICTED)] * 2,
    )
    runner.bind(_holder(backend))
    task = find_task("bank", "check-balance")
    configs = {"none": EpisodeConfig(mode="none"), "parallel": EpisodeConfig(mode="parallel", n=1)}
    sides = [side for side, e in runner.compare_events(task, configs) if isinstance(e, EpisodeFinished)]
    assert sides == ["none", "parallel"]


@pytest.mark.timing
def test_stop_cancels_a_running_episode_promptly(scripted):
    backend = scripted(actor=[BALANCE] * 10, rehearser=[result_text(PREDICTED)] * 10, delay=1.0)
    runner.bind(_holder(backend))
    session = Session()
    cancel = session.begin()
    stopped: list[float] = []

    def stop() -> None:
        stopped.append(time.monotonic())
        session.stop()

    ended = timer = None
    for event in runner.episode_events(
        find_task("bank", "check-balance"), EpisodeConfig(mode="parallel", n=2), cancel
    ):
        if isinstance(event, TurnUpdated) and timer is None:
            timer = threading.Timer(0.3, stop)  # Stop pressed while the rehearser's 1 s generation runs
            timer.start()
        if isinstance(event, EpisodeFinished):
            ended = event.trajectory.ended
            assert stopped and time.monotonic() - stopped[0] < 0.6  # before that generation would end
    assert ended == "cancelled"


def test_holder_reports_loading_then_a_failure_with_its_message():
    gate = threading.Event()

    def slow_failure(settings):
        gate.wait(60)
        raise ModelError("no weights for 'nowhere/model': set ENVACE_MODEL=embedded")

    holder = ModelHolder(Settings(model="nowhere/model"), loader=slow_failure)
    holder.start()
    assert holder.status().state == "loading" and holder.status().model == "nowhere/model"
    with pytest.raises(ModelError, match="still loading"):
        holder.wait(timeout=0.05)
    gate.set()
    with pytest.raises(ModelError, match="ENVACE_MODEL=embedded"):
        holder.wait(timeout=60)
    st = holder.status()
    assert st.state == "failed" and "ENVACE_MODEL" in st.error
    assert "failed to load" in render.model_status_html(st.state, st.model, st.seconds, st.error, st.info)


def test_holder_switches_models_and_a_failed_switch_keeps_the_working_model(scripted):
    first, second = scripted(), scripted()

    def loader(settings):
        if settings.model == "/nowhere":
            raise OSError("no such folder")
        return first if settings.model is None else second

    holder = ModelHolder(Settings(), loader=loader)
    holder.start()
    assert holder.wait(60) is first
    holder.start(Settings(model="other"))
    assert holder.wait(60) is second and holder.status().state == "ready"
    assert holder.status().info["model_id"] == "scripted"
    holder.start(Settings(model="/nowhere"))
    assert holder.wait(60) is second  # loaded again: the page keeps a model that works
    st = holder.status()
    assert st.state == "ready" and st.model == "other"
    assert st.note == "could not load /nowhere: OSError: no such folder; kept scripted"
    banner = render.model_status_html(st.state, st.model, st.seconds, st.error, st.info, st.note)
    assert "ev-status-warn" in banner and "model switch failed" in banner


def test_a_failed_switch_whose_previous_model_fails_too_says_both():
    calls = []

    def loader(settings):
        calls.append(settings.model)
        if len(calls) > 1:
            raise OSError(f"no {settings.model}")
        from conftest import ScriptedBackend

        return ScriptedBackend()

    holder = ModelHolder(Settings(model="first"), loader=loader)
    holder.start()
    holder.wait(60)
    holder.start(Settings(model="/nowhere"))
    with pytest.raises(ModelError, match="could not load /nowhere: OSError: no /nowhere"):
        holder.wait(60)
    assert calls == ["first", "/nowhere", "first"]
    assert "the previous model, scripted, could not be loaded again" in holder.status().error


def test_session_downloads_are_its_own_and_removed_on_close():
    a, b = Session(), Session()
    path_a = Path(a.save_json("trajectory.json", {"mode": "none"}))
    path_b = Path(b.save_json("trajectory.json", {"mode": "parallel"}))
    assert path_a != path_b and json.loads(path_a.read_text()) == {"mode": "none"}
    a.close()
    assert not path_a.exists() and path_b.exists() and a.cancel.is_set() and not b.cancel.is_set()
    b.close()


def test_schema_status_lists_the_tools():
    from envace_demo.schemas import load_tools

    ok = render.schema_ok_html(load_tools(example_tools("files")))
    assert ok.startswith('<div class="ev-schema ev-schema-ok">') and "read_file" in html.unescape(ok)


# ---- what a run says about itself: colours, titles, speed, the header ------------------------


def _finished(success, ended, mode="parallel") -> Trajectory:
    return Trajectory(mode=mode, model={}, tools=[], prompt=PROMPT, success=success, ended=ended)


@pytest.mark.parametrize(
    "success, ended, mode, kind",
    [
        (True, "answer", "parallel", "ok"),
        (False, "answer", "parallel", "error"),  # a failed check
        (None, "time_limit", "parallel", "error"),
        (True, "time_limit", "parallel", "error"),  # a limit is never success-coloured
        (False, "time_limit", "parallel", "error"),
        (None, "cancelled", "none", "error"),
        (None, "model_error: out of memory", "none", "error"),
        (None, "answer", "parallel", "info"),  # a custom request: no check, not a success
        (None, "max_steps", "imagine", "warn"),
        (None, "answer", "imagine", "info"),
    ],
)
def test_only_a_passed_check_gets_the_success_colour(success, ended, mode, kind):
    traj = _finished(success, ended, mode)
    assert render.outcome_kind(traj) == kind
    assert f'data-kind="{kind}"' in render.outcome_html(traj)
    status = render.status_html("finished", render.outcome_kind(traj))
    assert ("ev-status-ok" in status) is (kind == "ok")


def test_imagine_says_it_commits_nothing_and_its_memory_card_is_filled(scripted):
    from envace_demo.ui.playground import shown_memory

    backend = scripted(actor=[BALANCE, ANSWER], rehearser=[result_text(PREDICTED)])
    task = find_task("bank", "check-balance")
    traj = list(Episode(backend, task, EpisodeConfig(mode="imagine", n=1)).run())[-1].trajectory
    assert "commits nothing" in render.outcome_html(traj) and "task succeeded" not in render.outcome_html(traj)
    assert "<b>Rehearsal 1</b>" in shown_memory(traj)
    traj.memory = None  # cut by a time limit before the engine summed up its rehearsals
    assert "<b>Rehearsal 1</b>" in shown_memory(traj)


def test_step_titles_show_the_call_and_its_arguments(scripted):
    view = _view(_parallel_events(scripted))
    titles = [m["metadata"]["title"] for m in render.messages_for(view)]
    assert 'step 1: get_account(account_id="ACC-1003")' in titles
    assert html.escape('get_account(account_id="ACC-1003")') in render.steps_html(view)
    long_step = view.trajectory.turns[0].calls[0]
    long_step.call.arguments = {"account_id": "ACC-" + "9" * 200}
    title = render.call_title(long_step)
    assert len(title) == 90 and title.endswith("…)")


def test_progress_shows_elapsed_time_and_live_tokens_per_second(scripted):
    events = _parallel_events(scripted)
    view = render.LiveView()
    for event in events[:-1]:
        view.apply(event)
    tokens = view.tokens()
    assert tokens > 0
    text = render.progress_text(view, now=view.started + 4.0)
    assert text.endswith(f"· 4.0 s · {tokens / 4.0:.1f} tokens/s")
    view.apply(events[-1])
    assert render.progress_text(view).startswith("finished: answer in ")


def test_the_estimate_follows_the_controls_and_says_when_the_model_is_not_timed():
    from envace_demo.budget import Speed

    speed = Speed(decode=25.0, prefill=1000.0)
    short = render.estimate_html(speed, "parallel", 2, 2, 192, 120)
    longer = render.estimate_html(speed, "parallel", 4, 3, 192, 120)
    seconds = [int(s.split('data-seconds="')[1].split('"')[0]) for s in (short, longer)]
    assert seconds[0] < seconds[1] and "at 25 tokens/s" in short and "time limit 120 s" in short
    assert "it will be cut" in render.estimate_html(speed, "sequential", 8, 8, 192, 120)
    assert "known once the model has loaded" in render.estimate_html(None, "parallel", 2, 2, 192, 120)


def test_the_header_names_the_loaded_model_and_the_adapter_on_it():
    info = {"model_id": "embedded (SmolLM2-135M-Instruct)"}
    plain = render.header_model_html("ready", "embedded", info, None)
    assert "embedded (SmolLM2-135M-Instruct)" in plain and "no adapter" in plain
    assert "EnvACE-Qwen3-8B" not in plain
    tuned = render.header_model_html("ready", "embedded", info, "run-20261201-0300")
    assert "adapter: <code>run-20261201-0300</code>" in tuned and "fine-tuned" in tuned
    assert "loading <code>Team-ACE/EnvACE-Qwen3-8B</code>" in render.header_model_html(
        "loading", "Team-ACE/EnvACE-Qwen3-8B", None, None
    )
    # Loaded with an adapter (the embedded model's default): named from the model's info.
    served = {"model_id": "embedded (SmolLM2-135M-Instruct) + demo-cpu adapter", "adapter": "/srv/adapters/demo-cpu"}
    default = render.header_model_html("ready", "embedded", served, None)
    assert "adapter: <code>demo-cpu</code>" in default and "no adapter" not in default and "/srv" not in default


def test_the_holder_records_the_adapter_and_fits_a_budget_to_the_measured_speed(scripted):
    from envace_demo.budget import Speed

    backend = scripted()
    holder = ModelHolder(Settings(), loader=lambda s: backend, measure=lambda b: Speed(25.0, 1000.0))
    holder.start()
    holder.wait(60)
    st = holder.status()
    assert st.speed == Speed(25.0, 1000.0) and st.budget is not None and st.budget.n == 2
    assert st.budget.estimate_seconds <= Settings().target_seconds
    holder.set_adapter("run-1")
    assert holder.status().adapter == "run-1"
    off = ModelHolder(Settings(target_seconds=0), loader=lambda s: backend, measure=lambda b: Speed(25.0, 1000.0))
    off.start()
    off.wait(60)
    assert off.status().budget is None


def test_the_holder_follows_the_speed_a_finished_run_saw(scripted):
    from envace_demo.budget import Speed

    holder = ModelHolder(Settings(), loader=lambda s: scripted(), measure=lambda b: Speed(20.0, 1000.0))
    holder.start()
    holder.wait(60)
    events = _parallel_events(scripted)
    traj = events[-1].trajectory
    for turn in traj.turns:
        turn.prompt_tokens, turn.act_tokens, turn.act_seconds = 1000, 40, 12.0  # 4x slower than timed
    before = holder.status().budget
    holder.observe(traj)
    assert holder.status().speed.decode < 20.0
    after = holder.status().budget  # the estimate follows; the defaults a page shows stay
    assert after.estimate_seconds > before.estimate_seconds
    assert (after.n, after.max_steps, after.max_new_tokens) == (before.n, before.max_steps, before.max_new_tokens)


def test_a_response_the_engine_wrote_says_why():
    from envace_demo.record import CallStep, ToolCall
    from envace_demo.ui.render import engine_written

    call = ToolCall("get_account", {"account_id": "1003"})
    invalid = CallStep(call, rehearsed={"error_tool_call": {"code": "INVALID_PARAMETERS", "message": "m"}})
    again = CallStep(call, rehearsed={"error": {"code": "ACCOUNT_NOT_FOUND", "message": "m"}})
    assert "validation" in engine_written(invalid)
    assert "failed for real" in engine_written(again)


# ---- what a visitor sees says what happens ---------------------------------------------------------


def _deposit_on_a_balance_request(scripted) -> Trajectory:
    deposit = call_text("deposit", {"account_id": "ACC-1003", "amount": 100.0})
    backend = scripted(actor=[call_text("get_account", {"account_id": "ACC-1003"}), deposit, ANSWER])
    from envace_demo.engine import run_episode

    return run_episode(backend, find_task("bank", "check-balance"), EpisodeConfig(mode="none"), create("bank"))


def test_a_real_write_is_marked_and_one_not_asked_for_is_flagged_on_its_step_and_in_the_outcome(scripted):
    traj = _deposit_on_a_balance_request(scripted)
    steps = render.steps_html(render.showcase_view(traj))
    read, write = steps.split('data-step="1"')
    assert "not asked for" not in read and ">write<" not in read
    assert "write: not asked for" in write and "ev-bad" in write
    outcome = render.outcome_html(traj)
    assert "1 write not asked for" in outcome and "<b>1</b> real writes" in outcome
    assert render.write_metrics(traj) == {"real_writes": 1, "unrequested_writes": 1}


def test_compare_metrics_count_the_writes_not_asked_for(scripted):
    from envace_demo.ui.compare import _with_difference

    traj = _deposit_on_a_balance_request(scripted)
    by_side = {"none": {**runner.metrics(traj), **render.write_metrics(traj)}, "parallel": {**runner.metrics(traj)}}
    headers, rows = _with_difference(by_side)
    row = next(r for r in rows if r[0] == "writes not asked for")
    assert row[1] == 1 and row[2] == "—"


def test_a_write_the_request_asked_for_is_marked_without_a_flag():
    from envace_demo.record import CallStep, ToolCall

    asked = CallStep(ToolCall("deposit", {}), real={"balance": 1.0}, write=True)
    refused = CallStep(ToolCall("deposit", {}), real={"error": {"code": "X", "message": "m"}}, write=True)
    assert "ev-warn" in render.write_badge(asked) and "not asked" not in render.write_badge(asked)
    assert "write refused" in render.write_badge(refused)
    assert render.write_badge(CallStep(ToolCall("get_account", {}), real={}, write=False)) == ""


def test_rehearsals_cut_by_their_time_say_so_in_panels_memory_and_steps():
    from envace_demo.memory import summarize
    from envace_demo.record import Action, CallStep, Rehearsal, ToolCall, Turn

    call = ToolCall("get_account", {"account_id": "ACC-1003"})
    cut_step = CallStep(call, error="the rehearsal time ran out before the rehearsal", rehearsal_cut=True)
    rehearsal = Rehearsal(index=0, turns=[Turn(0, Action("x", calls=[call]), calls=[cut_step])],
                          ended="rehearsal_time", cut=True)
    traj = _finished(True, "answer")
    traj.rehearsals, traj.memory = [rehearsal], summarize([rehearsal])
    view = render.showcase_view(traj)
    titles = [m["metadata"]["title"] for m in render.messages_for(view)]
    assert "Rehearsal 1 · 1 imagined call, ended: cut: the rehearsal time ran out" in titles
    assert "not rehearsed (cut)" in titles
    card = render.memory_html(traj.memory)
    assert "cut short" in card and "not rehearsed: cut" in card and "ev-badge ev-bad" not in card
    committed = CallStep(call, real={"balance": 1.0}, rehearsal_cut=True)
    traj.turns = [Turn(0, Action("x", calls=[call]), calls=[committed])]
    assert "the time left was kept for the real call" in render.steps_html(view)


def test_green_is_for_a_passed_check_only():
    info = {"model_id": "embedded (SmolLM2-135M-Instruct)", "device": "cpu", "dtype": "float32"}
    ready = render.model_status_html("ready", "embedded", 2.0, None, info)
    assert "ev-status-ok" not in ready and "ev-status-info" in ready


def test_the_banner_names_an_untrained_model_as_such():
    base = {"model_id": "embedded (SmolLM2-135M-Instruct)", "device": "cpu", "dtype": "float32"}
    assert "Untrained" in render.model_status_html("ready", "embedded", 2.0, None, base)
    tuned = {**base, "adapter": "demo-cpu"}
    assert "Untrained" not in render.model_status_html("ready", "embedded", 2.0, None, tuned)
    release = {**base, "model_id": "Team-ACE/EnvACE-Qwen3-8B"}
    assert "Untrained" not in render.model_status_html("ready", "x", 2.0, None, release)


def test_with_no_environment_the_rehearsing_modes_say_nothing_will_be_committed():
    from envace_demo.budget import Speed

    speed = Speed(25.0, 1000.0)
    for mode in ("parallel", "sequential"):
        assert "nothing will be committed" in render.estimate_html(speed, mode, 2, 2, 192, 120, executed=False)
        assert "nothing will be committed" in render.estimate_html(None, mode, 2, 2, 192, 120, executed=False)
        assert "nothing will be committed" not in render.estimate_html(speed, mode, 2, 2, 192, 120)
    assert "nothing will be committed" not in render.estimate_html(speed, "imagine", 2, 2, 192, 120, executed=False)


def test_the_outcome_shows_a_runs_wait_in_the_queue_apart():
    from envace_demo.record import Trajectory
    from envace_demo.ui.render import outcome_html

    traj = Trajectory(mode="none", model={}, tools=[], prompt="p", ended="answer", seconds=83.6)
    assert "83.6 s" in outcome_html(traj) and "queued" not in outcome_html(traj)
    traj.queued_seconds = 192.8
    assert "276.4 s (192.8 s queued)" in outcome_html(traj)
    assert Trajectory.from_dict(traj.to_dict()).queued_seconds == 192.8


def test_tools_an_example_environment_does_not_have_are_named_with_what_to_pick():
    from envace_demo.errors import TaskError
    from envace_demo.ui.inputs import RunRequest, build_task, example_tools
    from envace_demo.ui.playground import schema_status

    library = example_tools("library")
    box = schema_status(library, environment="bank")
    assert "ev-status-warn" in box and "search_catalog" in box and "&#x27;none&#x27;" in box and "&#x27;manual&#x27;" in box
    assert "ev-status-warn" not in schema_status(library, environment="library")
    assert "ev-status-warn" not in schema_status(library, environment="none")
    with pytest.raises(TaskError, match="not all bank's .*pick environment 'none'"):
        build_task(RunRequest(tools=library, environment="bank", message="Who wrote Dune?"))
    for fine in ("none", "manual", "library"):
        assert build_task(RunRequest(tools=library, environment=fine, message="Who wrote Dune?")).tools


# ---- conversations: the resolver and the steps view -------------------------------------------


def _conversation(scripted) -> Trajectory:
    """Deposit, then a follow-up that reads the balance (mode none), on one bank."""
    from dataclasses import replace

    env = create("bank")
    task = build_task(_request(message="Deposit $100 into ACC-1003."))
    first = list(Episode(scripted(actor=[call_text("deposit", {"account_id": "ACC-1003", "amount": 100}),
                                         "<think></think>\nDeposited."]),
                         task, EpisodeConfig(mode="none"), env).run())[-1].trajectory
    follow = replace(task, follow_ups=["And its balance now?"])
    backend = scripted(actor=[BALANCE, "<think></think>\nIt holds 410.25 USD."])
    return list(Episode(backend, follow, EpisodeConfig(mode="none"), env, previous=first).run())[-1].trajectory


def test_a_conversations_steps_sit_under_their_user_messages(scripted):
    traj = _conversation(scripted)
    shown = render.steps_html(render.showcase_view(traj))
    headers = [shown.index(f'data-user-turn="{k}"') for k in (0, 1)]
    steps = [shown.index(f'data-step="{i}"') for i in range(4)]
    assert headers[0] < steps[0] < steps[1] < headers[1] < steps[2] < steps[3]
    assert "<b>User:</b> Deposit $100 into ACC-1003." in shown and "<b>User:</b> And its balance now?" in shown
    # One message: no header, as before conversations.
    single = render.steps_html(_view(_parallel_events(scripted)))
    assert "ev-user-turn" not in single


def test_the_next_message_is_headed_before_its_first_step(scripted):
    from envace_demo.events import UserTurnStarted

    traj = _conversation(scripted)
    before = Trajectory.from_dict(traj.to_dict())
    before.turns, before.answers = [t for t in before.turns if t.user_turn == 0], before.answers[:1]
    view = render.LiveView(before=before)
    started = copy.deepcopy(traj)
    started.turns, started.answers = [], []  # an episode's first record, as a GPU worker sends it
    view.apply(EpisodeStarted(started))
    view.apply(UserTurnStarted(1, "And its balance now?"))
    shown = render.steps_html(view)
    assert [t.user_turn for t in view.trajectory.turns] == [0, 0]  # the conversation so far, from the start
    assert shown.index('data-step="1"') < shown.index('data-user-turn="1"') < shown.index("acting…")


def test_resolve_turns_a_request_into_its_task_and_config_in_one_call(scripted):
    from envace_demo.ui.inputs import resolve

    backend = scripted()
    known = {"bank": [("call", "result")]}
    task, config = resolve(_request(n=3, seed=7), UIOptions(), Settings(), backend, known=known)
    assert task.name == "check-balance" and task.check and config.n == 3 and config.sampling.seed == 7
    assert config.known_results == (("call", "result"),)  # this visitor's earlier reads there
    with pytest.raises(ConfigError, match="environment manual: not here"):
        resolve(_request(environment="manual"), UIOptions(), Settings(), backend, refuses=lambda e: "not here")
    # A follow-up: the same request, the conversation so far and the next message.
    traj = _conversation(scripted)
    task, config = resolve(_request(message="Deposit $100 into ACC-1003."), UIOptions(), Settings(), backend,
                           known=known, previous=traj, follow_up="  And the transactions?  ")
    assert task.follow_ups == ["And its balance now?", "And the transactions?"] and task.check is None
    assert config.known_results == ()  # the conversation wrote: earlier reads no longer hold
    with pytest.raises(TaskError, match="follow-up: empty"):
        resolve(_request(), UIOptions(), Settings(), backend, previous=traj, follow_up=" ")
    cut = Trajectory.from_dict({**traj.to_dict(), "answers": traj.answers[:1], "ended": "cancelled"})
    with pytest.raises(ConfigError, match=r"the last message was not answered \(ended: cancelled\)"):
        resolve(_request(), UIOptions(), Settings(), backend, previous=cut, follow_up="more")


def test_the_memory_card_says_how_many_imagined_runs_never_started():
    card = render.memory_html({"attempts": [], "text": "", "shown": False, "others_skipped": 3})
    assert "3 other imagined runs never started" in card and "lead run foresaw nothing" in card
    assert "never started" not in render.memory_html({"attempts": [], "text": "", "shown": False})


def test_a_superseded_held_turn_says_it_left_the_actors_history():
    from envace_demo.record import Action, CallStep, ToolCall, Turn

    step = CallStep(ToolCall("withdraw", {"account_id": "ACC-1005", "amount": 40}), valid=True, held=True,
                    rehearsed={"error": {"code": "DAILY_LIMIT_EXCEEDED", "message": "no"}})
    turn = Turn(0, Action(text="", calls=[step.call]), calls=[step],
                superseded="withdraw ran for real and failed with INSUFFICIENT_FUNDS, not DAILY_LIMIT_EXCEEDED as foreseen")
    traj = Trajectory(mode="parallel", model={}, tools=[], prompt=PROMPT, environment="bank", turns=[turn])
    page = html.unescape(render.steps_html(_view([EpisodeStarted(traj), EpisodeFinished(traj)])))
    assert "left out of the actor's history: withdraw ran for real and failed with INSUFFICIENT_FUNDS" in page
