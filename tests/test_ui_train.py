"""The Fine-tune tab's parts that need no browser: curves, tables, task sources, progress."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envace_demo.errors import ConfigError, SchemaError, TaskError
from envace_demo.train.config import TrainConfig
from envace_demo.train.events import EvalResult, Progress
from envace_demo.ui.train_charts import training_curves
from envace_demo.ui.train_tab import OWN, config_for, eval_table, load_source, progress_html, source_choices


def _row(step: int, kl: bool = False) -> dict:
    row = {"step": step, "success": 0.5, "valid_call_rate": 0.75}
    for i, role in enumerate(("actor", "rehearser")):
        row |= {
            f"reward/{role}": 0.1 * step + i,
            f"advantage_std/{role}": 0.2,
            f"loss/{role}": -0.01 * step,
            f"gen_len/{role}": 30 + i,
        }
        if kl:
            row[f"kl/{role}"] = 0.001 * step
    return row


def test_curves_draw_one_line_per_role_and_step_wide_metrics_once():
    fig = training_curves([_row(1), _row(2)], total_steps=4)
    titles = [a.text for a in fig.layout.annotations]
    assert "KL to the base model" not in titles  # no KL in a run without it
    by_name = {}
    for trace in fig.data:
        by_name.setdefault(trace.name, []).append(trace)
    assert set(by_name) == {"actor", "rehearser", "all rows"}
    assert len(by_name["actor"]) == 3  # reward, advantage spread, generation length
    assert len(by_name["all rows"]) == 2  # task success and the valid-call rate are step-wide
    assert "loss" not in {a.text for a in fig.layout.annotations}  # ~0 by construction: not plotted
    reward_actor = by_name["actor"][0]
    assert list(reward_actor.x) == [1, 2] and list(reward_actor.y) == pytest.approx([0.1, 0.2])
    assert sum(t.showlegend for t in fig.data) == 3  # one legend entry per line name


def test_curves_show_kl_when_the_run_has_it_and_a_note_before_the_first_step():
    fig = training_curves([_row(1, kl=True)])
    assert "KL to the base model" in [a.text for a in fig.layout.annotations]
    empty = training_curves([])
    assert not empty.data and any("first step" in a.text for a in empty.layout.annotations)


def test_eval_table_gives_before_after_and_the_change():
    before = EvalResult(tasks=6, samples=1, success_without=1 / 6, success_with=None)
    after = EvalResult(tasks=6, samples=1, success_without=3 / 6, success_with=None)
    rows = eval_table(before, after)
    assert rows[0] == ["success without rehearsal", "17%", "50%", "+33 pts"]
    assert all(r[0] != "success with rehearsal" for r in rows)  # not evaluated in this run
    assert eval_table(before, None)[0][:3] == ["success without rehearsal", "17%", "–"]
    cut = eval_table(before, None, stopped=True)
    assert cut[0][:3] == ["success without rehearsal", "17%", "cut by Stop"]
    assert cut[-1] == ["held-out tasks", "6", "cut by Stop", ""]


def test_every_panel_has_one_title_and_axis_titles():
    rows = [{**_row(1), "success": 0.5, "grad_norm": 0.3}, {**_row(2), "success": 1.0, "grad_norm": 0.2}]
    fig = training_curves(rows, total_steps=2)
    assert fig.layout.title.text == "Training curves"
    titles = [a.text for a in fig.layout.annotations]
    assert len(titles) == len(set(titles)) == 6  # KL is absent without it
    assert "gradient norm (how far a step moves)" in titles and "task success of the rollouts" in titles
    layout = fig.to_dict()["layout"]
    axes = [v for k, v in layout.items() if k.startswith(("xaxis", "yaxis"))]
    assert len(axes) == 12 and all(axis.get("title", {}).get("text") for axis in axes)


def test_task_sources_split_into_training_and_heldout():
    values = [v for _, v in source_choices()]
    assert values[0] == "drills:bank" and OWN in values
    train, heldout = load_source("drills:bank", "", None)
    assert len(train) == 18 and len(heldout) == 6
    train, heldout = load_source("env:library", "", None)
    assert train and heldout and all(t.split == "heldout" for t in heldout)


def test_own_tasks_need_a_file_a_valid_schema_and_heldout_tasks(tmp_path):
    tools = json.dumps([{"name": "pick", "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}}])
    with pytest.raises(TaskError, match="upload a JSONL"):
        load_source(OWN, tools, None)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"name": "t", "prompt": "pick a", "check": {"calls": [{"pick": {"x": ["a"]}}]}}))
    with pytest.raises(SchemaError, match=r"tools\[0\]"):
        load_source(OWN, tools.replace('"string"', '"strng"'), str(tasks))
    with pytest.raises(TaskError, match="no held-out tasks"):
        load_source(OWN, tools, str(tasks))
    held = json.dumps({"name": "h", "prompt": "pick b", "check": {"calls": [{"pick": {"x": ["b"]}}]}, "split": "heldout"})
    tasks.write_text(tasks.read_text() + "\n" + held)
    train, heldout = load_source(OWN, tools, str(tasks))
    assert [t.name for t in train] == ["t"] and [t.name for t in heldout] == ["h"]
    assert heldout[0].tools[0].name == "pick"


def test_controls_override_the_device_recipe_and_bad_values_are_config_errors():
    cpu = config_for("cpu", 3, 4, 1e-3, 16, 2)
    assert cpu == TrainConfig.cpu_recipe(steps=3, lr=1e-3, lora_rank=16, seed=2)
    assert cpu.eval_rehearsals == 0  # "with rehearsal" is evaluated only when asked for
    gpu = config_for("cuda:0", 3, 4, 1e-3, 16, 2, True)
    assert gpu.lora_layers is None and gpu.prompts_per_step == TrainConfig().prompts_per_step
    assert gpu.eval_rehearsals == 1
    with pytest.raises(ConfigError, match="group_size"):
        config_for("cpu", 3, 1, 1e-3, 8, 0)
    with pytest.raises(ConfigError, match="lr"):
        config_for("cpu", 3, 4, 2.0, 8, 0)


class _Job:
    def __init__(self, progress):
        self.progress, self.error = progress, None
        self.config = TrainConfig(steps=4)


def test_progress_moves_forward_through_the_run():
    stages = [
        Progress("eval_before", 3, 6, 0),
        Progress("rollout", 0, 1, 1),
        Progress("update", 1, 1, 1),
        Progress("rollout", 1, 1, 3),
        Progress("eval_after", 2, 6, 4),
    ]
    shares = []
    for p in stages:
        html = progress_html(_Job(p))
        shares.append(float(html.split('value="')[1].split('"')[0]))
    assert shares == sorted(shares) and 0 < shares[0] < shares[-1] < 1
    assert "step 3/4" in progress_html(_Job(stages[3]))


def test_the_adapter_zip_is_whole_or_absent(tmp_path, monkeypatch):
    """A full disk while zipping leaves no half zip that would count as done."""
    import errno
    import shutil
    import tempfile
    import zipfile
    from types import SimpleNamespace

    from envace_demo.ui import train_tab

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    adapter = tmp_path / "run-1" / "adapter"
    adapter.mkdir(parents=True)
    (adapter / "adapter_config.json").write_text('{"r": 8}')
    job = SimpleNamespace(result=SimpleNamespace(adapter_dir=adapter, out_dir=tmp_path / "run-1"))
    real = shutil.make_archive

    def disk_full(base, fmt, root):
        Path(base + ".zip").write_bytes(b"PK\x03\x04 half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(shutil, "make_archive", disk_full)
    assert train_tab.adapter_zip(job) is None
    assert list((tmp_path / "envace-adapters").iterdir()) == []
    monkeypatch.setattr(shutil, "make_archive", real)
    path = train_tab.adapter_zip(job)
    assert path is not None and zipfile.ZipFile(path).namelist() == ["adapter_config.json"]
