"""``eval``: task files in each mode with the same seeds, reported as a table."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path

from envace_demo.cli import flags
from envace_demo.cli.episodes import _mcp_environment, _run_task
from envace_demo.engine import MODES, EpisodeConfig
from envace_demo.errors import TaskError
from envace_demo.record import Trajectory
from envace_demo.settings import Settings


def register(sub) -> None:
    p = flags.add_command(
        sub, "eval", cmd_eval, flags.EPISODE,
        help="run task files in each mode and report the table (rehearsal versus none)",
        description="Every task in every mode with the same seeds; a per-category table of call validity, "
        "success (BFCL match), fidelity, tokens and seconds, with each mode's paired difference to 'none' "
        "and its bootstrap interval.",
    )
    p.set_defaults(mode="none")  # the baseline, compared with --modes
    p.add_argument("--tasks", nargs="+", help="JSONL files: the project's task format or BFCL records")
    p.add_argument(
        "--suite",
        help="a benchmark instead of (or besides) --tasks: bfcl-multi-turn[:base,miss_func,miss_param,long_context] "
        "(BFCL v4 multi-turn from the bfcl-eval package, scored by its own checker; --limit per category)",
    )
    p.add_argument("--limit", type=int, help="at most this many tasks of each file")
    p.add_argument("--modes", help="comma-separated modes to compare, e.g. none,parallel,sequential (default: --mode)")
    p.add_argument(
        "--seeds", default="1",
        help="a count S (seeds --seed .. --seed+S-1) or a comma-separated list; every mode gets the same seeds",
    )
    p.add_argument("--concurrency", type=int, default=1, help="episodes at once (a serving engine batches them)")
    p.add_argument(
        "--out", type=Path,
        help="write results.jsonl, summary.json, report.md and charts here; run again to resume "
        "(episodes already recorded without an error are skipped)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument(
        "--mcp", action="append", metavar="COMMAND_OR_URL",
        help="run every task against a fresh connection to this MCP server (its tools replace the task's); repeatable",
    )


def _eval_modes(args: argparse.Namespace) -> list[str]:
    modes = [m.strip() for m in (args.modes or args.mode).split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES or m == "imagine"]
    if bad or not modes:
        raise TaskError(f"--modes: expected some of none, parallel, sequential; got {args.modes or args.mode!r}")
    return list(dict.fromkeys(modes))


def _eval_seeds(args: argparse.Namespace) -> list[int]:
    text = str(args.seeds).strip()
    try:
        if "," in text:
            return list(dict.fromkeys(int(x) for x in text.split(",") if x.strip()))
        count = int(text)
    except ValueError:
        raise TaskError(f"--seeds: expected a count or a comma-separated list of integers, got {text!r}") from None
    if count < 1:
        raise TaskError(f"--seeds: expected at least 1, got {count}")
    return [args.seed + i for i in range(count)]


def cmd_eval(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from envace_demo.evaluation import batch

    settings = flags.settings_from(args)
    modes, seeds = _eval_modes(args), _eval_seeds(args)
    if args.concurrency < 1:
        raise TaskError(f"--concurrency: expected at least 1, got {args.concurrency}")
    if not args.tasks and not args.suite:
        raise TaskError("eval: give --tasks (JSONL files) or --suite (e.g. bfcl-multi-turn:base)")
    if args.suite and args.mcp:
        raise TaskError("--suite runs each entry against its own backends: not with --mcp")
    tasks = []
    if args.tasks:
        tasks = batch.load_eval_tasks(args.tasks, args.limit, _mcp_tools_transform(settings) if args.mcp else None)
    if args.suite:  # BFCL v4 multi-turn entries, each against its own backends (envace_demo.bfcl_multi)
        from envace_demo import bfcl_multi

        tasks += bfcl_multi.suite_tasks(args.suite, args.limit)
    backend = flags.load_model(settings)
    if args.suite:
        bfcl_multi.bind_oracle(backend, tasks)  # the oracle backend replays these entries' ground truth
    if args.concurrency > 1 and settings.backend != "openai":
        from envace_demo.evaluation.coalesce import CoalescingBackend

        # In process: the episodes' generations are merged into shared batches (a server batches its own).
        backend = CoalescingBackend(backend, episodes=args.concurrency)
    base = flags.episode_config(args, settings, backend)
    meta = {
        "model": backend.info.model_id,
        "n": base.n,
        **{k: getattr(args, k) for k in ("temperature", "top_p", "top_k")},
        "max_new_tokens": settings.max_new_tokens,
        "max_steps": settings.max_steps,
        "constrained": base.constrained,
    }
    jobs = batch.plan(tasks, modes, seeds)
    done: dict = {}
    results = None
    if args.out is not None:
        batch.check_run_meta(args.out, meta)
        results = args.out / batch.RESULTS
        done = {k: r for k, r in batch.load_results(results).items() if not r.get("error")}
    todo = [j for j in jobs if j.key not in done]

    cancel = threading.Event()

    def run_one(job) -> Trajectory:
        task = replace(job.etask.task)  # episodes on other threads share the task
        config = replace(base, mode=job.mode, sampling=replace(base.sampling, seed=job.seed))
        if args.mcp:  # a fresh connection per episode: a stdio server starts over with a fresh state
            with _mcp_environment(settings) as environment:
                task.tools, task.env = environment.tools(), None
                return _run_task(backend, task, config, environment=environment, cancel=cancel)
        return _run_task(backend, task, config, cancel=cancel)

    bar = batch.Progress(len(jobs), initial=len(jobs) - len(todo), disable=args.no_progress)
    fresh: dict = {}
    try:
        for rec in batch.run_jobs(todo, run_one, args.concurrency, results, cancel):
            fresh[(rec["task_id"], rec["mode"], rec["seed"])] = rec
            bar.update(rec)
            if rec.get("error"):
                bar.write(f"error: {rec['task_id']} ({rec['mode']}, seed {rec['seed']}): {rec['error']}")
    except KeyboardInterrupt:
        bar.close()
        where = f"; {len(done) + len(fresh)} episodes are in {results}: run the same command to resume" if results else ""
        print(f"stopped{where}", file=sys.stderr)
        return 130
    finally:
        bar.close()
    records = [fresh.get(j.key) or done[j.key] for j in jobs]
    _print_eval(args, records, {**meta, "modes": ",".join(modes), "seeds": seeds},
                _eval_totals(records, modes, seeds, backend, base))
    return 0


def _mcp_tools_transform(settings: Settings):
    """Rewrites each task record to run over the MCP servers' tools (BFCL records keep theirs
    until run, then get the server's)."""
    with _mcp_environment(settings) as probe:
        offered = [t.to_openai() for t in probe.tools()]

    def transform(record):
        if isinstance(record, dict) and not {"question", "function"} <= set(record):
            return {**{k: v for k, v in record.items() if k != "env"}, "tools": offered}
        return record

    return transform


def _print_eval(args: argparse.Namespace, records: list[dict], meta: dict, totals: dict) -> None:
    """The table (text or JSON) on stdout; with --out, the report files beside the results."""
    from envace_demo.evaluation import report, table

    summary = table.summarize(records, meta["modes"].split(","))
    if args.out is not None:
        command = "python -m envace_demo eval " + " ".join(sys.argv[2:]) if sys.argv[1:2] == ["eval"] else ""
        path = report.write_report(args.out, summary, {**meta, "command": command})
        print(f"report: {path}", file=sys.stderr)
    if args.json:
        episodes = [{k: v for k, v in r.items() if k != "trajectory"} for r in records]
        print(json.dumps({"tasks": episodes, "totals": totals, "summary": summary}, indent=2, ensure_ascii=False))
    else:
        print(table.markdown_table(summary))
        print(f"\nΔ: difference to none on the same task and seed; brackets: {table.INTERVAL}.")
        print("\nWhat rehearsal changed:\n")
        print(table.changes_table(summary))
        print(f"\n{table.CHANGES_NOTE}")


def _eval_totals(records: list[dict], modes: list[str], seeds: list[int], backend, config: EpisodeConfig) -> dict:
    """Pooled counts over every episode (the single-mode report of earlier versions)."""
    ok = [r for r in records if not r.get("error")]
    calls = sum(r["calls"] for r in ok)
    valid = sum(r["valid_calls"] for r in ok)
    parse_errors = sum(r["parse_errors"] for r in ok)
    judged = [r for r in ok if r["success"] is not None]
    counts = {k: sum(int(r.get(k) or 0) for r in ok) for k in ("real_calls", "real_errors", "held_calls")}
    successes = sum(1 for r in judged if r["success"])
    attempted = calls + parse_errors
    return {
        "tasks": len({r["task_id"] for r in records}),
        "episodes": len(records),
        "errors": len(records) - len(ok),
        "modes": modes,
        "mode": modes[0] if len(modes) == 1 else None,
        "seeds": seeds,
        "n": config.n,
        "model": backend.info.model_id,
        "constrained": config.constrained,
        "calls": calls,
        "valid_calls": valid,
        "parse_errors": parse_errors,
        "valid_call_rate": round(valid / attempted, 4) if attempted else None,
        "success_rate": round(successes / len(judged), 4) if judged else None,
        "successes": successes,
        "judged": len(judged),
        **counts,
        "ungrounded_answers": sum(1 for r in ok if r.get("ungrounded")),
    }
