"""The ``train`` command: its flags over TrainConfig, its task loading, and a run on a TINY
RANDOM model (mechanics only; see test_train_trainer.py for the model)."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from envace_demo.cli import build_parser
from envace_demo.cli import train as train_cli
from envace_demo.errors import TaskError
from envace_demo.train.config import TrainConfig
from envace_demo.train.data import split_tasks
from helpers import HELDOUT, TOOLS_JSON, TRAIN, teach_format, tiny_random_backend


def _parse(*argv):
    return build_parser().parse_args(["train", *argv])


def test_cli_flags_override_the_recipe():
    plain = train_cli.config_from(_parse("--env", "bank", "--out", "x"))
    assert plain == TrainConfig()
    cpu = train_cli.config_from(_parse("--env", "bank", "--out", "x", "--recipe", "cpu", "--steps", "9"))
    assert cpu == TrainConfig.cpu_recipe(steps=9)
    assert cpu.lora_layers == 4 and cpu.temperature == 0.7


def test_every_flag_reaches_its_config_field_and_the_help_shows_the_config_default():
    args = _parse("--env", "bank", "--out", "x", "--lora-layers", "2", "--scale-std", "--first-call", "optional",
                  "--no-constrained", "--eval-temperature", "0.5", "--threads", "1")
    config = train_cli.config_from(args)
    assert (config.lora_layers, config.scale_std, config.require_first_call, config.constrained) == (2, True, False, False)
    assert config.eval_temperature == 0.5 and train_cli.config_from(_parse("--env", "b", "--out", "x")).constrained
    assert args.threads == 1 and args.handler is train_cli.cmd_train
    help_text = " ".join(build_parser()._subparsers._group_actions[0].choices["train"].format_help().split())
    assert "--group-size" in help_text and "rollouts per prompt (n in the paper) (default: 4)" in help_text
    assert "--quantization" not in help_text  # the trained model's weights are local


def test_cli_refuses_a_task_file_without_heldout_tasks(tmp_path):
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS_JSON))
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"name": "x", "prompt": "pick a", "check": {"calls": []}}))
    loaded = train_cli.load_tasks(_parse("--tools", str(tools), "--tasks", str(tasks), "--out", "x"))
    assert loaded[0].tools[0].name == "pick"
    with pytest.raises(TaskError, match="no held-out tasks"):
        split_tasks(loaded)


@pytest.fixture(scope="module")
def tiny_backend():
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model is fastest on one thread
    backend = tiny_random_backend()
    teach_format(backend.model, backend.tokenizer, backend)
    yield backend
    torch.set_num_threads(before)


def test_cli_writes_metrics_with_per_role_keys(tiny_backend, tmp_path, monkeypatch, capsys):
    from envace_demo.cli import flags
    from envace_demo.models.transformers_backend import TransformersBackend

    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS_JSON))
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "\n".join(json.dumps({k: v for k, v in t.to_dict().items() if k != "tools"}) for t in TRAIN + HELDOUT)
    )
    # The CLI trains the model it loaded, in place: give it its own copy.
    own = TransformersBackend(
        copy.deepcopy(tiny_backend.model), tiny_backend.tokenizer, model_id="tiny", constrained=True
    )
    monkeypatch.setattr(flags, "load_model", lambda settings: own)
    out = tmp_path / "run"
    args = _parse("--tools", str(tools), "--tasks", str(tasks), "--steps", "1", "--group-size", "2", "--out", str(out),
                  "--max-new-tokens", "40", "--eval-rehearsals", "0", "--lr", "1e-3", "--lora-rank", "4")
    assert args.handler(args) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 1
    assert {"reward/actor", "reward/rehearser", "advantage_std/rehearser", "loss/rehearser", "gen_len/actor"} <= set(rows[0])
    assert json.loads((out / "adapter" / "adapter_config.json").read_text())["r"] == 4
    printed = capsys.readouterr().out
    assert "held-out before" in printed and "held-out after" in printed and "step 1/1" in printed


def test_nothing_in_the_training_package_imports_the_command_line():
    import ast
    from pathlib import Path

    import envace_demo.train

    imported = set()
    for path in Path(envace_demo.train.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.add((path.name, node.module))
            elif isinstance(node, ast.Import):
                imported.update((path.name, alias.name) for alias in node.names)
    assert ("trainer.py", "envace_demo.train.rollout") in imported  # the walk sees the package's imports
    assert not [(name, module) for name, module in imported if module.startswith("envace_demo.cli")]
