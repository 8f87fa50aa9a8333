"""The command line, run as a user would: ``python -m envace_demo ...`` in a subprocess."""

import json
import subprocess
import sys

import pytest

from conftest import ROOT, SHARED_BFCL, VENDORED_BFCL


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
              "--max-new-tokens", "128", "--max-steps", "1")
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
