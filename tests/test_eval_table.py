"""The eval table's arithmetic: per-episode metrics, means, paired differences and intervals."""

import json

import pytest

from conftest import SHARED_BFCL, VENDORED_BFCL, call_text
from envace_demo.bfcl import reference_calls
from envace_demo.engine import EpisodeConfig, run_episode
from envace_demo.evaluation import category_of, episode_record, markdown_table, summarize
from envace_demo.evaluation.report import figures, write_report
from envace_demo.tasks import load_task_file

BFCL = VENDORED_BFCL if VENDORED_BFCL.exists() else SHARED_BFCL


def rec(task, mode, seed, success, validity=1.0, fidelity=None, tokens=100, seconds=1.0, category="simple", error=None):
    return {"task_id": f"f:{task}", "category": category, "mode": mode, "seed": seed, "success": success,
            "validity": validity, "fidelity": fidelity, "tokens": tokens, "seconds": seconds, "error": error}


def row(summary, category, mode):
    (r,) = [r for r in summary["rows"] if r["category"] == category and r["mode"] == mode]
    return r


def test_category_comes_from_the_bfcl_record_the_environment_or_the_file():
    assert category_of({"id": "simple_12", "question": [], "function": []}, "x") == "simple"
    assert category_of({"id": "live_simple_3-1-0", "question": [], "function": []}, "x") == "live_simple"
    assert category_of({"id": "q", "category": "multiple", "question": [], "function": []}, "x") == "multiple"
    assert category_of({"name": "t", "prompt": "p", "env": "bank"}, "tasks") == "bank"
    assert category_of({"name": "t", "prompt": "p", "tools": []}, "my_tasks") == "my_tasks"


def test_means_and_paired_differences_to_none():
    records = []
    # 4 tasks x 2 seeds. none succeeds on tasks 0-1, parallel on tasks 0-2: +25 points exactly.
    for t in range(4):
        for s in range(2):
            records.append(rec(t, "none", s, t < 2, validity=0.5, tokens=100, seconds=2.0))
            records.append(rec(t, "parallel", s, t < 3, validity=1.0, fidelity=0.8, tokens=300, seconds=5.0))
    summary = summarize(records, ["none", "parallel"])
    assert summary["categories"] == ["simple"] and [r["mode"] for r in summary["rows"]] == ["none", "parallel"]
    none, par = row(summary, "simple", "none"), row(summary, "simple", "parallel")
    assert none["success"]["mean"] == 0.5 and par["success"]["mean"] == 0.75 and par["success"]["n"] == 8
    assert none["fidelity"]["mean"] is None and par["fidelity"]["mean"] == pytest.approx(0.8)
    assert "diff" not in none
    d = par["diff"]
    assert d["success"]["mean"] == pytest.approx(0.25) and d["success"]["n"] == 8
    lo, hi = d["success"]["ci"]
    assert 0 <= lo <= 0.25 <= hi <= 1  # the per-pair differences are 0 or 1
    # A constant difference has no spread: the interval is the point.
    assert d["validity"]["mean"] == pytest.approx(0.5) and d["validity"]["ci"] == pytest.approx([0.5, 0.5])
    assert d["tokens"]["mean"] == 200 and d["seconds"]["ci"] == pytest.approx([3.0, 3.0])
    assert d["fidelity"]["n"] == 0  # none has no fidelity: nothing to pair
    assert summarize(records, ["none", "parallel"]) == summary  # the bootstrap is seeded


def test_interval_narrows_with_more_pairs_and_needs_two():
    few = [rec(t, m, 0, ok) for t, pair in enumerate([(0, 1), (1, 1), (0, 0), (0, 1)])
           for m, ok in zip(("none", "parallel"), map(bool, pair))]
    many = [dict(r, task_id=f"{r['task_id']}-{k}") for k in range(25) for r in few]
    (lo_f, hi_f), (lo_m, hi_m) = (row(summarize(x), "simple", "parallel")["diff"]["success"]["ci"] for x in (few, many))
    assert hi_m - lo_m < hi_f - lo_f and lo_m > 0  # 50% better on 100 pairs: clearly above zero
    one = [rec(0, "none", 0, False), rec(0, "parallel", 0, True)]
    assert row(summarize(one), "simple", "parallel")["diff"]["success"] == {"mean": 1.0, "n": 1, "ci": None}


def test_errors_are_counted_and_left_out_of_metrics_and_pairs():
    records = [
        rec(0, "none", 0, False), rec(0, "parallel", 0, True),
        rec(1, "none", 0, True), rec(1, "parallel", 0, None, validity=None, error="HTTP 500"),
        rec(2, "none", 0, True, category="multiple"), rec(2, "parallel", 0, True, category="multiple"),
    ]
    summary = summarize(records)
    par = row(summary, "simple", "parallel")
    assert (par["episodes"], par["errors"], par["success"]["n"]) == (2, 1, 1)
    assert par["diff"]["success"]["n"] == 1 and par["diff"]["success"]["mean"] == 1.0
    overall = row(summary, "overall", "parallel")  # two categories: an overall row pools them
    assert overall["episodes"] == 3 and overall["success"]["mean"] == 1.0 and overall["diff"]["success"]["n"] == 2
    assert summary["errors"] == 1
    text = markdown_table(summary)
    assert "| simple | parallel | 2 | 1 |" in text and "+100.0 pts" in text


def test_episode_record_of_a_scripted_bfcl_episode(scripted):
    right, wrong = load_task_file(BFCL / "bfcl_simple.jsonl", limit=2)
    (call,) = reference_calls(right.check["calls"], right.tools)
    backend = scripted(actor=[call_text(call.name, call.arguments), "<think>x</think>no call here"])
    traj = run_episode(backend, right, EpisodeConfig(mode="none", max_steps=2))
    r = episode_record("bfcl_simple:" + right.name, "simple_python", "none", 0, traj)
    assert (r["success"], r["validity"], r["calls"], r["valid_calls"], r["error"]) == (True, 1.0, 1, 1, None)
    assert r["fidelity"] is None and r["tokens"] > 0 and r["trajectory"]["task"] == right.name
    traj = run_episode(backend, wrong, EpisodeConfig(mode="none", max_steps=2))
    r = episode_record("bfcl_simple:" + wrong.name, "simple_python", "none", 0, traj)
    assert r["success"] is False and r["validity"] is None  # answered in prose: no call attempted


def test_report_files_and_charts_have_titles_and_axis_titles(tmp_path):
    records = [rec(t, m, 0, (t + (m == "parallel")) % 2 == 0, category=c)
               for t, c in enumerate(["simple", "multiple", "simple"]) for m in ("none", "parallel", "sequential")]
    summary = summarize(records, ["none", "parallel", "sequential"])
    for name, fig in figures(summary).items():
        assert fig.layout.title.text and fig.layout.xaxis.title.text and fig.layout.yaxis.title.text, name
    path = write_report(tmp_path, summary, {"n": 2, "command": "python -m envace_demo eval ..."})
    text = path.read_text()
    assert "| overall | sequential |" in text and "charts/success_difference.html" in text
    assert json.loads((tmp_path / "summary.json").read_text())["rows"] == json.loads(json.dumps(summary["rows"]))
    assert (tmp_path / "charts" / "success.html").stat().st_size > 0 and (tmp_path / "charts" / "plotly.min.js").exists()


def _bank_run(mode, steps, answer, success, ungrounded=()):
    """A hand-built episode: one call a turn (``steps``: CallStep), then the answer."""
    from envace_demo.record import Action, Trajectory, Turn

    turns = [Turn(index=i, action=Action(text="", calls=[s.call]), calls=[s]) for i, s in enumerate(steps)]
    turns.append(Turn(index=len(turns), action=Action(text=answer, content=answer)))
    return Trajectory(mode=mode, model={}, tools=[], prompt="p", task="t", turns=turns, final_answer=answer,
                      success=success, ended="answer", ungrounded=list(ungrounded))


def test_the_summary_counts_what_rehearsal_changed_from_the_rows_alone(tmp_path):
    from envace_demo.evaluation.table import changes_table
    from envace_demo.record import CallStep, ToolCall

    no_funds = {"error": {"code": "INSUFFICIENT_FUNDS", "message": "too little"}}
    withdraw, get = ToolCall("withdraw", {"amount": 500}), ToolCall("get_account", {"id": "A"})

    def held():
        return CallStep(call=withdraw, rehearsed=no_funds, held=True, outcome_right=True, knowable=1.0, unknowable=0.5)

    def failed():
        return CallStep(call=withdraw, real=no_funds)

    def read(right=None):
        return CallStep(call=get, real={"balance": 310.25}, rehearsed={"balance": 310.25}, outcome_right=right,
                        knowable=1.0 if right else None, unknowable=0.0 if right is not None else None)

    episodes = [  # task: (none's run, parallel's run)
        ("a", _bank_run("none", [failed()], "Done.", False), _bank_run("parallel", [held()], "Too little.", True)),
        ("b", _bank_run("none", [read()], "310.25", True), _bank_run("parallel", [read(True)], "300", False, ["300"])),
        ("c", _bank_run("none", [read()], "310.25", True), _bank_run("parallel", [read(False)], "310.25", True)),
    ]
    records = []
    for task, without, with_ in episodes:
        for traj in (without, with_):
            r = json.loads(json.dumps(episode_record(f"f:{task}", "bank", traj.mode, 0, traj)))
            records.append({k: v for k, v in r.items() if k != "trajectory"})  # as the app keeps them
    records.append(rec("d", "none", 0, True, category="bank"))  # rows without call records: verdicts only
    records.append(rec("d", "parallel", 0, False, category="bank"))
    summary = summarize(records, ["none", "parallel"])
    none, par = row(summary, "bank", "none"), row(summary, "bank", "parallel")
    assert "divergence" not in none and none["ungrounded_answers"] == 0
    assert par["divergence"] == {
        "pairs": 4, "helped": 1, "hurt": 2, "same": 1, "unread": 1,
        "kinds": {"failure_avoided": 1, "different_call": 0, "rehearsed_value": 1, "answer": 0, "nothing": 1},
    }
    assert par["ungrounded_answers"] == 1
    assert none["real_calls"]["mean"] == 1.0 and none["real_errors"]["mean"] == pytest.approx(1 / 3)
    assert par["real_calls"]["mean"] == pytest.approx(2 / 3) and par["held_calls"]["mean"] == pytest.approx(1 / 3)
    assert par["real_errors"]["mean"] == 0.0 and par["diff"]["real_errors"]["mean"] == pytest.approx(-1 / 3)
    # The fidelity's parts: a mean over the episodes that have them.
    assert par["outcome_right"]["mean"] == pytest.approx(2 / 3) and par["outcome_right"]["n"] == 3
    assert par["knowable"]["mean"] == 1.0 and par["unknowable"]["mean"] == pytest.approx(1 / 6)
    assert none["outcome_right"]["n"] == 0
    # As error or not, over the calls that also ran (the held one did not): both reads right.
    assert par["error_right"]["mean"] == 1.0 and par["error_right"]["n"] == 2
    text = changes_table(summary)
    assert "| bank | parallel | 0.67 | 0.00 | 0.33 / 0.00 / 0.00 / 0.00 / 0.00 | 1 of 4 | 66.7% (error or not 100.0%) | 100.0% | 16.7% | 100.0% / — | 100.0% / — | 1 / 2 / 1 |" in text
    assert "failure avoided 1, rehearsed value 1, nothing 1 (1 pair without call records)" in text
    from envace_demo.evaluation.table import changes_line

    assert changes_line(summary) == (
        "What rehearsal changed: parallel: helped 1, hurt 2, same 1 of 4 pairs with none (first divergence: "
        "failure avoided 1, rehearsed value 1, nothing 1 (1 pair without call records))"
    )
    (none_line,) = [line for line in text.splitlines() if line.startswith("| bank | none |")]
    assert none_line == "| bank | none | 1.00 | 0.33 | 0.00 / 0.00 / 0.00 / 0.00 / 0.00 | 0 of 4 | — | — | — | — / — | — / — | — | — |"  # no rehearsal, no pairs
    report = write_report(tmp_path, summary, {"n": 2}).read_text()
    assert "## What rehearsal changed" in report and "1 / 2 / 1" in report
