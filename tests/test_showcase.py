"""Recorded showcases: the committed records, their format, and the command that makes them."""

from __future__ import annotations

import json

import pytest

from envace_demo import showcase
from envace_demo.cli import build_parser, main
from envace_demo.envs.registry import ENVIRONMENTS
from envace_demo.errors import TaskError
from envace_demo.settings import PROJECT_ROOT
from envace_demo.tasks import env_tasks


@pytest.mark.parametrize("env", list(ENVIRONMENTS))
def test_each_example_has_a_recorded_parallel_run_that_names_its_model(env):
    show = showcase.load(env)
    assert show is not None, f"no showcase for {env}: run {showcase.COMMAND}"
    traj = show.trajectory
    assert show.env == env and show.command == showcase.COMMAND
    # Recorded at the N fitted to the recording machine (the Playground's Run has the same).
    n = show.budget["n"]
    assert traj.mode == "parallel" and traj.n == n >= 1 and 1 <= len(traj.rehearsals) <= n
    # The lead run first; the others only where it foresaw something (EpisodeConfig.imagined_others).
    assert len(traj.rehearsals) + traj.memory.get("others_skipped", 0) == n
    assert traj.environment == env and traj.task == env_tasks(env)[0].name  # the Playground's default request
    assert show.model == traj.model["model_id"] and show.model  # named on the record
    assert all(r.turns for r in traj.rehearsals) and traj.memory is not None
    assert traj.turns and traj.turns[0].actor_prompt  # a full record: prompts included
    assert show.speed["decode_tokens_per_s"] > 0


def test_the_playground_shows_the_showcase_before_anything_runs():
    from envace_demo.ui.playground import showcase_panels

    note, rehearsals, memory, steps, outcome = showcase_panels("bank")
    show = showcase.load("bank")
    assert "Recorded showcase" in note and show.model in note and "Nothing has run yet" in note
    assert [m["metadata"]["title"].split(" · ")[0] for m in rehearsals if "parent_id" not in m["metadata"]] == [
        f"Rehearsal {k + 1}" for k in range(len(show.trajectory.rehearsals))
    ]
    assert "<b>Rehearsal 1</b>" in memory and 'class="ev-step"' in steps and "ev-outcome" in outcome


def test_a_saved_showcase_loads_back_and_a_broken_one_says_how_to_remake_it(tmp_path):
    show = showcase.load("files")
    path = showcase.save(show, tmp_path)
    again = showcase.load("files", tmp_path)
    assert again.to_dict() == show.to_dict()
    # The model's folders are named from the project's root, never from the recording machine's.
    assert str(PROJECT_ROOT) not in path.read_text(encoding="utf-8")
    assert again.trajectory.model["rehearser_adapter"] == "envace_demo/adapters/demo-cpu/rehearser"
    assert showcase.load("library", tmp_path) is None  # not recorded there
    path.write_text(json.dumps({"format": 1, "trajectory": {"mode": 3}}), encoding="utf-8")
    with pytest.raises(TaskError, match="its trajectory is invalid .* record it again with: python -m envace_demo showcase"):
        showcase.load("files", tmp_path)
    path.write_text("{", encoding="utf-8")
    with pytest.raises(TaskError, match="files.json: not JSON"):
        showcase.load("files", tmp_path)


def test_the_command_line_offers_the_showcase_command():
    args = build_parser().parse_args(["showcase"])
    assert (args.out, args.n, args.env, args.model) == ("examples/showcase/", None, None, None)  # N: fitted, as Run has it
    assert main(["showcase", "--env", "nowhere"]) == 2  # refused before any model loads


@pytest.mark.slow
@pytest.mark.heavy
def test_the_command_records_a_showcase_with_the_embedded_model(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ENVACE_MAX_STEPS", "1")  # set on purpose: the fitted budget keeps it (mechanics only)
    assert main(["showcase", "--out", str(tmp_path), "--env", "bank", "--n", "1", "--model", "embedded"]) == 0
    show = showcase.load("bank", tmp_path)
    assert show.model.startswith("embedded (SmolLM2-135M-Instruct)") and show.trajectory.n == 1
    assert "tokens/s" in capsys.readouterr().out
