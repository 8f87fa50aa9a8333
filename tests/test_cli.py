"""The command line, run as a user would: ``python -m envace_demo ...`` in a subprocess."""

import json
import subprocess
import sys
from dataclasses import fields

import pytest

from conftest import ROOT, SHARED_BFCL, VENDORED_BFCL
from envace_demo.cli import build_parser, settings_from
from envace_demo.engine import EpisodeConfig
from envace_demo.models.base import Sampling
from envace_demo.settings import Settings


def cli(*args, stdin=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "envace_demo", *args], cwd=ROOT, input=stdin,
                          capture_output=True, text=True, timeout=timeout)


def test_envs_json_lists_environments_and_tasks():
    out = cli("envs", "--json")
    assert out.returncode == 0, out.stderr
    listing = json.loads(out.stdout)
    assert {"bank", "files"} <= {e["name"] for e in listing} and len(listing) >= 3
    for env in listing:
        assert set(env) == {"name", "description", "tasks"} and len(env["tasks"]) >= 5
        assert all(set(t) == {"name", "prompt"} for t in env["tasks"])


def test_schema_prints_normalized_tools():
    bfcl = '[{"name": "spotify.play", "parameters": {"type": "dict", "properties": {"n": {"type": "float"}}}}]'
    out = cli("schema", "-", stdin=bfcl)
    assert out.returncode == 0, out.stderr
    (tool,) = json.loads(out.stdout)
    assert tool["function"]["name"] == "spotify_play" and tool["original_name"] == "spotify.play"
    assert tool["function"]["parameters"]["properties"]["n"]["type"] == "number"


def test_schema_error_is_located_on_stderr_with_exit_2(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"tools": [{"name": "a", "parameters": {"type": "object"}}, {"name": "b"},
                                         {"name": "c", "parameters": {"type": "object", "properties": {"unit": {"type": "strng"}}}}]}))
    out = cli("schema", str(bad))
    assert out.returncode == 2 and out.stdout == ""
    assert 'tools[2].parameters.properties.unit.type: unknown type "strng"' in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("how", ["file", "stdin"])
def test_a_schema_that_is_not_utf8_is_a_located_error_not_a_traceback_or_a_tool(tmp_path, how):
    """Regression: a file ended in a UnicodeDecodeError traceback; stdin loaded a tool named f__."""
    data = b'[{"name": "f\xff\xfe", "parameters": {"type": "object"}}]'
    path = tmp_path / "tools.json"
    path.write_bytes(data)
    args = [sys.executable, "-m", "envace_demo", "schema", str(path) if how == "file" else "-"]
    out = subprocess.run(args, cwd=ROOT, input=data if how == "stdin" else None, capture_output=True, timeout=120)
    where = str(path) if how == "file" else "stdin"
    assert out.returncode == 2 and out.stdout == b""
    assert f"{where}: not UTF-8 text (byte 0xff at line 1, column 13)".encode() in out.stderr
    assert b"Traceback" not in out.stderr


def test_unknown_environment_is_a_clear_error():
    out = cli("run", "--env", "atlantis", "--mode", "none")
    assert out.returncode == 2 and "atlantis" in out.stderr and "bank" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.slow
def test_run_parallel_json_has_action_rehearsed_and_real_on_each_committed_call():
    out = cli("run", "--env", "bank", "--task", "check-balance", "--mode", "parallel", "--n", "2", "--json",
              "--max-new-tokens", "128", "--max-steps", "1", "--imagined-reads", "rehearse",
              "--imagined-others", "always")
    assert out.returncode == 0, out.stderr
    record = json.loads(out.stdout)
    assert record["mode"] == "parallel" and len(record["rehearsals"]) == 2 and record["memory"]["text"]
    turns = [t for t in record["turns"] if t["calls"]]
    assert turns, record["ended"]
    for t in turns:
        assert t["action"]["text"] and t["action"]["calls"]
        assert all(s["rehearsed"] is not None and s["real"] is not None for s in t["calls"])


@pytest.mark.slow
def test_eval_on_bfcl_records_reports_rates():
    path = (VENDORED_BFCL if VENDORED_BFCL.exists() else SHARED_BFCL) / "bfcl_simple.jsonl"
    out = cli("eval", "--tasks", str(path), "--limit", "3", "--json", "--max-new-tokens", "96", "--max-steps", "1")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert len(report["tasks"]) == 3
    totals = report["totals"]
    assert totals["tasks"] == 3 and totals["judged"] == 3
    assert 0.0 <= totals["success_rate"] <= 1.0 and totals["valid_call_rate"] >= 2 / 3


# ---- the parser: every documented flag, defaults from where the values are defined -------------

DOCUMENTED = [  # the README's, the Makefile's and the tests' command lines
    ["run", "--env", "bank", "--task", "transfer-to-savings", "--mode", "parallel", "--n", "2", "--seed", "0", "--json"],
    ["run", "--tools", "t.json", "--prompt", "p", "--mode", "imagine", "--manual"],
    ["run", "--mcp", "python s.py", "--mcp", "http://127.0.0.1:8765/mcp", "--prompt", "p"],
    ["run", "--env", "bank", "--backend", "openai", "--base-url", "http://h:8000/v1", "--model", "m", "--openai-extras",
     "--api-key", "k", "--top-p", "0.9", "--top-k", "5", "--temperature", "0", "--max-new-tokens", "9",
     "--max-steps", "1", "--first-call", "required", "--no-constrained", "--quantization", "none", "--dtype",
     "float32", "--device", "cpu"],
    ["eval", "--tasks", "a.jsonl", "b.jsonl", "--limit", "3", "--modes", "none,parallel", "--seeds", "2",
     "--concurrency", "2", "--out", "o", "--no-progress", "--json", "--mcp", "python s.py"],
    ["showcase", "--out", "o", "--env", "bank", "--n", "1", "--seed", "3", "--model", "embedded"],
    ["train", "--env", "bank", "--drills", "--recipe", "cpu", "--out", "runs/bank", "--threads", "1"],
    ["train", "--tools", "t.json", "--tasks", "t.jsonl", "--steps", "8", "--group-size", "4", "--out", "o", "--lr",
     "1e-3", "--lora-rank", "4", "--max-new-tokens", "40", "--eval-rehearsals", "0", "--scale-std", "--json"],
    ["envs", "--json"],
    ["schema", "-"],
]


@pytest.mark.parametrize("argv", DOCUMENTED, ids=lambda argv: argv[0])
def test_every_documented_command_line_still_parses(argv):
    args = build_parser().parse_args(argv)
    assert args.command == argv[0] and callable(args.handler)


def test_episode_flags_default_to_the_sampling_and_episode_definitions(scripted):
    run = build_parser().parse_args(["run", "--env", "bank"])
    sampling, config = Sampling(), EpisodeConfig()
    assert (run.temperature, run.top_p, run.top_k) == (sampling.temperature, sampling.top_p, sampling.top_k)
    assert (run.mode, run.n, run.seed, run.first_call) == (config.mode, None, 0, "auto")
    from envace_demo.cli.flags import episode_n

    assert episode_n(run) == config.n  # not given: the definition's N (run fits it instead)
    assert build_parser().parse_args(["run", "--env", "bank", "--n", str(config.n)]).n == config.n  # given: kept
    assert build_parser().parse_args(["eval", "--tasks", "a.jsonl"]).mode == "none"  # the baseline
    assert run.check_given_up is config.check_given_up is True
    from envace_demo.cli.flags import episode_config
    from envace_demo.settings import Settings

    trusting = build_parser().parse_args(["eval", "--tasks", "a.jsonl", "--no-check-given-up"])
    assert episode_config(trusting, Settings(), scripted(actor=[])).check_given_up is False
    assert episode_config(run, Settings(), scripted(actor=[])).imagined_reads == config.imagined_reads == "fetch"
    rehearsing = build_parser().parse_args(["eval", "--tasks", "a.jsonl", "--imagined-reads", "rehearse"])
    assert episode_config(rehearsing, Settings(), scripted(actor=[])).imagined_reads == "rehearse"
    defaults = episode_config(run, Settings(), scripted(actor=[]))
    assert (defaults.hold_certainty, defaults.grounded_ids) == (config.hold_certainty, config.grounded_ids) == (0.9, True)
    holding = build_parser().parse_args(["eval", "--tasks", "a.jsonl", "--hold-certainty", "0", "--no-grounded-ids"])
    held = episode_config(holding, Settings(), scripted(actor=[]))
    assert (held.hold_certainty, held.grounded_ids) == (None, False)  # 0: every foreseen failure held


def test_model_flags_leave_the_environment_alone_unless_given(monkeypatch):
    monkeypatch.setenv("ENVACE_QUANTIZATION", "4bit")
    monkeypatch.setenv("ENVACE_MAX_STEPS", "5")
    monkeypatch.setenv("ENVACE_CONCURRENCY", "3")
    plain = settings_from(build_parser().parse_args(["eval", "--tasks", "a.jsonl", "--concurrency", "8"]))
    assert (plain.quantization, plain.max_steps, plain.constrained) == ("4bit", 5, None)
    assert plain.concurrency == 3  # eval's --concurrency is its own, not the app's setting
    given = settings_from(build_parser().parse_args(
        ["run", "--env", "bank", "--quantization", "none", "--max-steps", "2", "--constrained"]))
    assert (given.quantization, given.max_steps, given.constrained) == (None, 2, True)


def test_model_flag_choices_and_help_come_from_the_settings(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--env", "bank", "--dtype", "float64"])
    assert "invalid choice: 'float64' (choose from" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for f in fields(Settings):
        if f.name in ("model", "dtype", "max_new_tokens", "api_key"):
            assert f.metadata["help"] in text and f"env {f.metadata['env']}" in text
    assert f"(env ENVACE_MAX_NEW_TOKENS, default {Settings().max_new_tokens})" in text
