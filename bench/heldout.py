"""Base against trained: the embedded model without and with the shipped ``demo-cpu``
adapter, on the example environments' held-out tasks and their default runs.

For each adapter (``none``, ``demo-cpu``), each as a fresh process timed from its start:
  - ``eval`` of the held-out example tasks (``"split": "heldout"``), modes none and
    parallel, N=1 (``envace_demo.train.figures``: success, episodes that end with an
    answer, the model's own rehearsal fidelity with engine-written steps apart, real
    writes on tasks that ask only to read, episode seconds);
  - the model's own greedy rehearsal of each held-out task's first call
    (``python -m envace_demo.train.figures --rehearse``);
  - the default run of each environment's first task, as ``make demo`` runs it
    (``run --env E --task T --mode parallel --json``, fitted defaults): process seconds,
    committed real calls, whether it ended with an answer.

    python -m bench --only heldout [--quick]   # --quick: the default runs alone
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Where to keep the eval folders and run records (else a temporary folder, removed after).
KEEP = os.environ.get("BENCH_HELDOUT_KEEP")
ADAPTERS = ("demo-cpu", "none")  # the trained side first: its figures are the ones awaited
ENVS = ("bank", "files", "library")


def heldout_file(folder: Path) -> Path:
    """The held-out example tasks as one task file (with their environment)."""
    from envace_demo.tasks import env_tasks

    path = folder / "heldout.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for env in ENVS:
            for task in env_tasks(env):
                if task.split == "heldout":
                    record = task.to_dict()
                    record.pop("tools")  # the environment brings its own
                    fh.write(json.dumps(record) + "\n")
    return path


def _timed(command: list[str], log) -> tuple[float, subprocess.CompletedProcess]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        log(f"heldout: {' '.join(command[2:6])}… exited {done.returncode}: {done.stderr[-400:]}")
    return seconds, done


def default_runs(adapter: str, log, keep: Path | None = None) -> dict:
    """The default run of each environment's first example task (records kept in ``keep``)."""
    from envace_demo.tasks import env_tasks

    rows = {}
    for env in ENVS:
        task = env_tasks(env)[0].name
        command = [sys.executable, "-m", "envace_demo", "run", "--env", env, "--task", task, "--mode", "parallel",
                   "--json", "--adapter", adapter]
        seconds, done = _timed(command, log)
        if keep is not None:
            (keep / f"run-{adapter}-{env}.json").write_text(done.stdout, encoding="utf-8")
        try:
            record = json.loads(done.stdout)
        except json.JSONDecodeError:
            rows[env] = {"task": task, "process_s": round(seconds, 1), "error": done.stderr[-300:]}
            continue
        committed = sum(1 for turn in record["turns"] for step in turn.get("calls", []) if step.get("real") is not None)
        rows[env] = {"task": task, "process_s": round(seconds, 1), "episode_s": round(record["seconds"], 1),
                     "committed_calls": committed, "ended": record["ended"], "success": record["success"]}
        log(f"heldout: default run {env}/{task} with adapter {adapter}: {rows[env]}")
    walls = [r["process_s"] for r in rows.values()]
    return {"runs": rows, "median_process_s": round(statistics.median(walls), 1), "max_process_s": max(walls),
            "all_committed": all(r.get("committed_calls", 0) > 0 for r in rows.values()),
            "answered": sum(r.get("ended") == "answer" for r in rows.values()),
            "succeeded": sum(bool(r.get("success")) for r in rows.values())}


def measure(adapter: str, seeds: int, log) -> dict:
    from envace_demo.tasks import env_tasks
    from envace_demo.train.figures import figures, load

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(KEEP) if KEEP else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        tasks = heldout_file(folder)
        out = folder / f"eval-{adapter}"
        command = [sys.executable, "-m", "envace_demo", "eval", "--tasks", str(tasks), "--modes", "none,parallel",
                   "--n", "1", "--seeds", str(seeds), "--model", "embedded", "--adapter", adapter, "--out", str(out),
                   "--no-progress"]
        eval_s, _ = _timed(command, log)
        checks = {t.name: t.check for env in ENVS for t in env_tasks(env)}
        by_mode = figures(load(out), checks)
    _, done = _timed([sys.executable, "-m", "envace_demo.train.figures", "--rehearse", "--adapter", adapter], log)
    rehearse = json.loads(done.stdout) if done.returncode == 0 else {"error": done.stderr[-300:]}
    result = {
        "eval": by_mode,
        "eval_process_s": round(eval_s, 1),
        "first_call_rehearsal_fidelity": rehearse.get("mean_fidelity"),
        "defaults": default_runs(adapter, log, Path(KEEP) if KEEP else None),
    }
    log(f"heldout: adapter {adapter}: {json.dumps(result['eval'])}")
    return result


def section(quick: bool, log) -> tuple[dict, dict]:
    """(figures, details): the trained adapter's headline figures, and both sides in full.
    ``--quick``: the trained adapter's default runs alone (three processes); the evals of
    both sides (about 15 minutes on 2 cores) only in the full run."""
    if quick:
        defaults = default_runs(ADAPTERS[0], log, Path(KEEP) if KEEP else None)
        figures = {"default_run_median_s": defaults["median_process_s"], "default_run_max_s": defaults["max_process_s"]}
        return figures, {ADAPTERS[0]: {"defaults": defaults}}
    measured = {adapter: measure(adapter, 1 if quick else 2, log) for adapter in ADAPTERS}
    details = {"none": measured["none"], "demo-cpu": measured["demo-cpu"]}  # base, then trained
    trained = details["demo-cpu"]
    par, none = trained["eval"].get("parallel", {}), trained["eval"].get("none", {})
    figures = {
        "heldout_success_none": none.get("success"),
        "heldout_success_parallel": par.get("success"),
        "heldout_model_fidelity": par.get("model_fidelity"),
        "heldout_first_call_fidelity": trained["first_call_rehearsal_fidelity"],
        "heldout_read_only_writes": sum(m.get("read_only_episodes_with_a_write", 0) for m in trained["eval"].values()),
        "default_run_median_s": trained["defaults"]["median_process_s"],
        "default_run_max_s": trained["defaults"]["max_process_s"],
    }
    return figures, details
