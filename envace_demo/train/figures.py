"""Held-out figures of one model from an ``eval --out DIR`` run (``results.jsonl``), per
mode: success, episodes that end with an answer, the model's own rehearsal fidelity,
real writes on tasks that ask only to read, and episode seconds.

    python -m envace_demo.train.figures DIR [DIR ...]
    python -m envace_demo.train.figures --rehearse [--adapter none]

``--rehearse``: the model's own rehearsal of the first call each held-out example task
needs (``HELDOUT_CALLS``), in the prompt and under the grammar the engine uses in a
rehearsal (no real result known yet), greedy, scored against the real response. It
measures the rehearser alone, without an episode's time limit.

Fidelity counts the committed calls the model itself rehearsed (``rehearsal_text`` set)
and that ran for real; steps the engine wrote (``validation.decided_by``) are counted
apart. A task asks only to read when its check has no ``state`` condition; a write is a
real call that changed the environment's state (the final state differs from a fresh
environment's).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from envace_demo.envs.registry import create
from envace_demo.record import Trajectory, call_steps
from envace_demo.validation import decided_by

RESULTS = "results.jsonl"


def _mean(values: list[float]) -> float | None:
    return round(statistics.fmean(values), 3) if values else None


def read_only(check: dict | None) -> bool:
    return not (check or {}).get("state")


def figures(rows: list[dict], checks: dict[str, dict]) -> dict[str, dict]:
    """``rows``: results.jsonl records; ``checks``: task name -> its check."""
    by_mode: dict[str, list[dict]] = {}
    for row in rows:
        by_mode.setdefault(row["mode"], []).append(row)
    out = {}
    for mode, mine in sorted(by_mode.items()):
        success, answered, seconds, fidelity, decided, writes, reads = [], [], [], [], 0, 0, 0
        for row in mine:
            traj = Trajectory.from_dict(row["trajectory"])
            success.append(1.0 if traj.success else 0.0)
            answered.append(1.0 if traj.ended == "answer" else 0.0)
            seconds.append(traj.seconds)
            for step in call_steps(traj.turns):
                if decided_by(step) is not None:
                    decided += 1
                elif step.rehearsal_text is not None and step.fidelity is not None:
                    fidelity.append(step.fidelity)
            if read_only(checks.get(traj.task or "")) and traj.environment:
                reads += 1
                writes += traj.final_state != create(traj.environment).state()
        out[mode] = {
            "episodes": len(mine),
            "success": _mean(success),
            "answered": _mean(answered),
            "model_fidelity": _mean(fidelity),
            "model_rehearsed_steps": len(fidelity),
            "engine_written_steps": decided,
            "read_only_episodes": reads,
            "read_only_episodes_with_a_write": writes,
            "episode_seconds": _mean(seconds),
        }
    return out


# The first call each held-out example task needs.
HELDOUT_CALLS = {
    "recent-transactions": ("bank", "list_transactions", {"account_id": "ACC-1001", "limit": 3}),
    "transfer-over-daily-limit": ("bank", "transfer", {"from_account_id": "ACC-1002", "to_account_id": "ACC-1001",
                                                       "amount": 1500.0}),
    "edit-readonly-config": ("files", "write_file", {"path": "/system/config.ini", "content": "proxy = 10.0.0.1",
                                                     "overwrite": True}),
    "copy-budget": ("files", "read_file", {"path": "/projects/budget.csv"}),
    "hold-limit": ("library", "place_hold", {"book_id": "BK-037", "patron_id": "P-1077"}),
    "early-science-fiction": ("library", "list_books", {"genre": "science-fiction", "year_to": 1949}),
}


def rehearse_heldout(backend, max_new_tokens: int = 192) -> dict:
    """Fidelity of the model's greedy rehearsal of each ``HELDOUT_CALLS`` call, the
    caller's response written as the CPU default serves it (the empty reasoning block)."""
    from envace_demo.calls import format_call, parse_execution_result
    from envace_demo.fidelity import fidelity
    from envace_demo.models.base import Sampling
    from envace_demo.models.grammar import rehearsal_constraint, rehearses_failures
    from envace_demo.prompts import Conversation, rehearser_messages, rehearser_prompt, shows_response_schema
    from envace_demo.record import ToolCall
    from envace_demo.schemas import find_tool
    from envace_demo.tasks import find_task
    from envace_demo.train.warmstart import EMPTY_THOUGHT

    rows = {}
    for name, (env, tool_name, arguments) in HELDOUT_CALLS.items():
        task = find_task(env, name)
        call = ToolCall(tool_name, arguments)
        tool = find_tool(task.tools, tool_name)
        real = create(env).execute(tool_name, arguments)
        latest = EMPTY_THOUGHT + format_call(call)
        messages = rehearser_messages(
            task.tools, [], Conversation(task.prompt), latest, call, tool,
            response_schema=shows_response_schema(backend.info.model_id),
        )
        constraint = None
        if backend.supports_constraints:
            constraint = rehearsal_constraint(tool.response, tool_name, arguments, [], rehearses_failures(backend))
        gen = backend.generate(rehearser_prompt(backend, messages), Sampling(temperature=0.0, max_new_tokens=max_new_tokens),
                               constraint)
        rehearsed, problem = parse_execution_result(gen.text)
        rows[name] = {"fidelity": None if problem else fidelity(rehearsed, real), "problem": problem,
                      "rehearsed": rehearsed, "real": real, "seconds": round(gen.seconds, 1)}
    scores = [r["fidelity"] if r["fidelity"] is not None else 0.0 for r in rows.values()]
    return {"model": backend.info.model_id, "mean_fidelity": _mean(scores), "calls": rows}


def load(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (Path(run_dir) / RESULTS).read_text(encoding="utf-8").splitlines() if line]


def main(argv: list[str]) -> int:
    from envace_demo.tasks import env_tasks

    if argv and argv[0] == "--rehearse":
        from envace_demo.models.loader import load_backend
        from envace_demo.settings import Settings

        adapter = argv[argv.index("--adapter") + 1] if "--adapter" in argv else None
        backend = load_backend("embedded", cache_dir=Settings.from_env().cache_dir, device="cpu", adapter=adapter)
        print(json.dumps(rehearse_heldout(backend), indent=2, default=str))
        return 0
    checks = {t.name: t.check for env in ("bank", "files", "library") for t in env_tasks(env)}
    for run_dir in argv:
        print(json.dumps({"run": run_dir, **figures(load(Path(run_dir)), checks)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
