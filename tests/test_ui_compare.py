"""The Compare tab: the difference column, the suite's own controls, its estimate, and the
suite's table and charts (the eval table), run through the tab's own handler with a
scripted model."""

import pytest

from conftest import SHARED_BFCL, VENDORED_BFCL, call_text, result_text
from envace_demo.policy import DEFAULT_POLICY
from envace_demo.ui.inputs import suite_tasks
from envace_demo.settings import Settings
from envace_demo.ui import compare, suite
from envace_demo.ui.common import EpisodeSeconds
from envace_demo.ui.holder import ModelHolder

BFCL = VENDORED_BFCL if VENDORED_BFCL.exists() else SHARED_BFCL
BALANCE = call_text("get_account", {"account_id": "ACC-1003"})
ANSWER = "<think>done</think>\nThe balance of ACC-1003 is 310.25 USD."


def test_the_compare_table_has_a_difference_column():
    none = {"success": False, "real_calls": 3, "real_errors": 1, "tokens": 200, "seconds": 4.0,
            "fidelity": None, "ended": "answer"}
    par = {"success": True, "real_calls": 1, "real_errors": 0, "tokens": 650, "seconds": 9.5,
           "fidelity": 0.75, "ended": "answer"}
    headers, rows = compare._with_difference({"none": none, "parallel": par})
    assert headers == ["metric", "none", "parallel", "difference (rehearsal − none)"]
    diff = {row[0]: row[-1] for row in rows}
    assert diff["success"] == "succeeds only with rehearsal"
    assert (diff["real tool calls"], diff["tokens"], diff["wall time (s)"]) == ("-2", "+450", "+5.50")
    assert diff["mean fidelity"] == "—" and diff["ended"] == "—"
    same = compare._with_difference({"none": {**none, "success": True}, "parallel": par})[1]
    assert same[0][-1] == "same"


def test_suite_tasks_and_their_categories_are_the_ones_eval_reads(tmp_path):
    env = suite_tasks("env", "bank", None, 3, DEFAULT_POLICY)
    assert [(t.task_id.split(":")[0], t.category) for t in env] == [("bank", "bank")] * 3
    (simple,) = suite_tasks("upload", "bank", str(BFCL / "bfcl_simple.jsonl"), 1, DEFAULT_POLICY)
    assert (simple.task_id, simple.category) == ("bfcl_simple:simple_python_0", "simple_python")
    with pytest.raises(Exception, match="upload a JSONL"):
        suite_tasks("upload", "bank", None, 3, DEFAULT_POLICY)
    with pytest.raises(Exception, match="pick one or more"):
        suite._suite_modes([])


def test_the_estimate_counts_episodes_and_prefers_measured_seconds():
    speeds = EpisodeSeconds()
    guess = suite._estimate_text(speeds, 4, ["none", "parallel"], 2, 3, 128)
    assert "4 task(s) × 2 mode(s) × 3 seed(s) = 24 episodes" in guess and "rough guess" in guess
    speeds.observe({"mode": "none", "seconds": 10.0, "error": None})
    speeds.observe({"mode": "parallel", "seconds": 50.0, "error": None})
    speeds.observe({"mode": "parallel", "seconds": 999.0, "error": "HTTP 500"})  # not a measurement
    measured = suite._estimate_text(speeds, 4, ["none", "parallel"], 2, 3, 128)
    assert "about **12 min**" in measured and "measured on this model" in measured  # 12 x 10 s + 12 x 50 s


def test_the_measured_seconds_belong_to_one_app_not_to_every_app_in_the_process():
    from envace_demo.ui.common import AppContext
    from envace_demo.ui.options import UIOptions

    one, other = (AppContext(Settings(), UIOptions(), holder=None) for _ in range(2))
    one.speeds.observe({"mode": "none", "seconds": 10.0, "error": None})
    assert one.speeds.means() == {"none": 10.0} and other.speeds.means() == {}


def _scripted_holder(scripted):
    actor = [lambda p: ANSWER if '"role": "tool"' in p else BALANCE] * 200
    backend = scripted(actor=actor, rehearser=[result_text({"balance": 300.0})] * 200)
    holder = ModelHolder(Settings(), loader=lambda settings: backend)
    holder.start()
    holder.wait(timeout=60)
    return holder


def test_the_suite_shows_the_eval_table_and_charts_with_titles(scripted):
    from envace_demo.ui import build_app
    from envace_demo.ui.session import Session

    demo = build_app(Settings(), holder=_scripted_holder(scripted))
    (run_suite,) = [f.fn for f in demo.fns.values() if getattr(f.fn, "__name__", "") == "run_suite"]
    session = Session()
    updates = list(run_suite(session, "env", "bank", None, 2, ["none", "parallel"], 1, 2,
                             0.6, 0.95, 20, 64, 0, False, 3, lambda *a, **k: None))
    assert len(session.suite) == 2 * 2 * 2  # tasks x modes x seeds
    assert {(r["task"], r["mode"], r["seed"]) for r in session.suite} == {
        (t, m, s) for t in ("check-balance", "deposit-cash") for m in ("none", "parallel") for s in (0, 1)}
    last_table = [u for u in updates if any(getattr(k, "elem_id", None) == "suite-table" for k in u)][-1]
    (table,) = [v for k, v in last_table.items() if getattr(k, "elem_id", None) == "suite-table"]
    rows = table.value["data"] if isinstance(table.value, dict) else table.value
    assert [r[:4] for r in rows] == [["bank", "none", 4, 0], ["bank", "parallel", 4, 0]]
    assert rows[0][6] == "50.0%" and rows[1][7].startswith("+0.0 pts")  # check-balance passes, deposit fails
    figs = [v for v in last_table.values() if hasattr(v, "layout")]
    assert len(figs) == 4
    for fig in figs:
        assert fig.layout.title.text and fig.layout.xaxis.title.text and fig.layout.yaxis.title.text
    assert "8 of 8 episodes" in str(list(updates[-1].values())[0])
    plots = [c for c in demo.config["components"] if str(c["props"].get("elem_id")).startswith("suite-plot")]
    assert len(plots) == 4 and all(p["props"]["show_label"] is False for p in plots)  # one title: the figure's
    demo.close()


def test_compare_on_a_disk_that_cannot_take_the_download_says_so_and_draws_its_table(scripted, tmp_path):
    from envace_demo.ui import build_app
    from envace_demo.ui.session import Session

    demo = build_app(Settings(), holder=_scripted_holder(scripted))
    (run_compare,) = [f.fn for f in demo.fns.values() if getattr(f.fn, "__name__", "") == "run_compare"]
    session = Session(folder=tmp_path / "not-a-folder")
    session.folder.write_text("a file where the downloads would go")  # writing there fails as a full disk does
    updates = list(run_compare(session, "bank", "check-balance", "parallel", 1, "rehearsal", 0.6, 0.95, 20, 64, 0, False, 3))
    last = {getattr(k, "elem_id", None) or type(k).__name__: v for k, v in updates[-1].items()}
    assert "compare.json" in str(updates[-1])  # the status names the file it could not write
    assert "ev-status-error" in str(updates[-1])
    assert last["compare-table"].value["data"]  # the table is drawn all the same
    assert last["DownloadButton"].interactive is False
    assert set(session.compared) == {"none", "parallel"}
    demo.close()


def test_the_sides_of_a_compare_run():
    from envace_demo.errors import ConfigError

    none, par = compare.compare_sides("rehearsal", "parallel", 2, None)
    assert (none.key, none.mode, par.key, par.mode) == ("none", "none", "parallel", "parallel")
    assert not none.base_weights and not par.base_weights
    base, trained = compare.compare_sides("weights", "sequential", 3, "demo-cpu")
    assert (base.key, trained.key) == ("base", "trained") and base.mode == trained.mode == "sequential"
    assert base.base_weights and not trained.base_weights and "demo-cpu" in trained.title
    with pytest.raises(ConfigError, match="without an adapter"):
        compare.compare_sides("weights", "parallel", 2, None)
    with pytest.raises(ConfigError, match="expected 'rehearsal' or 'weights'"):
        compare.compare_sides("models", "parallel", 2, "demo-cpu")
    headers, rows = compare._with_difference({"base": {"success": False}, "trained": {"success": True}})
    assert headers[-1] == "difference (trained − base)" and rows[0][-1] == "succeeds only on the trained model"


def test_base_against_trained_without_an_adapter_is_refused_and_runs_nothing(scripted, tmp_path):
    from envace_demo.ui import build_app
    from envace_demo.ui.session import Session

    demo = build_app(Settings(), holder=_scripted_holder(scripted))
    (run_compare,) = [f.fn for f in demo.fns.values() if getattr(f.fn, "__name__", "") == "run_compare"]
    session = Session(folder=tmp_path)
    updates = list(run_compare(session, "bank", "check-balance", "parallel", 1, "weights", 0.6, 0.95, 20, 64, 0, False, 3))
    assert "ev-status-error" in str(updates[-1]) and "without an adapter" in str(updates[-1])
    assert not session.compared
    demo.close()


def test_compare_says_where_rehearsal_changed_the_run_above_the_two_sides(scripted, tmp_path):
    from envace_demo.ui import build_app
    from envace_demo.ui.session import Session

    demo = build_app(Settings(), holder=_scripted_holder(scripted))
    (run_compare,) = [f.fn for f in demo.fns.values() if getattr(f.fn, "__name__", "") == "run_compare"]
    session = Session(folder=tmp_path)
    updates = list(run_compare(session, "bank", "check-balance", "parallel", 1, "rehearsal", 0.6, 0.95, 20, 64, 0, False, 3))
    (status,) = [v for k, v in updates[-1].items() if isinstance(v, str) and "ev-status" in v]
    # Both sides look the balance up and answer alike: the line says so, under "done".
    assert "done" in status and status.count("ev-status ") == 2
    assert any(lead in status for lead in ("No difference:", "Rehearsal helped:", "Rehearsal hurt:", "Same outcome:"))
    demo.close()
