"""Command line: ``python -m envace_demo envs|schema|run|eval``."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path
from typing import Any, Sequence

from envace_demo.engine import MODES, Episode, EpisodeConfig
from envace_demo.errors import EnvaceError, TaskError
from envace_demo.events import EpisodeFinished, MemoryReady, RehearsalFinished, TurnUpdated
from envace_demo.models.base import Sampling
from envace_demo.record import Trajectory
from envace_demo.policy import decode_text, read_user_file
from envace_demo.schemas import load_tools
from envace_demo.settings import Settings
from envace_demo.tasks import Task, env_tasks, find_task


def _add_model_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model")
    g.add_argument(
        "--model",
        help="'embedded', a hub id or a local path; with --backend openai, the served model's name (env ENVACE_MODEL)",
    )
    g.add_argument("--backend", choices=["transformers", "openai"], help="local model or a chat-completions server (env ENVACE_BACKEND)")
    g.add_argument("--base-url", help="--backend openai: the server's API root, e.g. http://127.0.0.1:8000/v1 (env ENVACE_BASE_URL)")
    g.add_argument("--api-key", help="--backend openai: API key; prefer the environment variable ENVACE_API_KEY")
    g.add_argument(
        "--openai-extras", action=argparse.BooleanOptionalAction, default=None,
        help="--backend openai: also send top_k and chat_template_kwargs (vLLM, SGLang) (env ENVACE_OPENAI_EXTRAS)",
    )
    g.add_argument("--quantization", choices=["none", "4bit", "8bit"], help="bitsandbytes quantization (GPU)")
    g.add_argument("--dtype", choices=["auto", "bfloat16", "float32"])
    g.add_argument("--device", choices=["auto", "cpu", "cuda"])
    g.add_argument(
        "--constrained", action=argparse.BooleanOptionalAction, default=None, help="constrained decoding"
    )
    g.add_argument(
        "--first-call",
        choices=["auto", "required", "optional"],
        default="auto",
        help="whether the first actor turn must call a tool (auto: required for the embedded model)",
    )


def _add_episode_flags(p: argparse.ArgumentParser, default_mode: str) -> None:
    p.add_argument("--mode", choices=MODES, default=default_mode)
    p.add_argument("--n", type=int, default=2, help="rehearsal budget N")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--temperature", type=float, default=0.6)
    p.add_argument("--top-p", type=float, default=0.95)
    p.add_argument("--top-k", type=int, default=20)
    p.add_argument("--max-new-tokens", type=int, help="per generation (env ENVACE_MAX_NEW_TOKENS)")
    p.add_argument("--max-steps", type=int, help="actor turns per trajectory (env ENVACE_MAX_STEPS)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m envace_demo", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("envs", help="list environments and their tasks")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("schema", help="normalize tool schemas (a file, or - for stdin)")
    p.add_argument("file")

    p = sub.add_parser("run", help="run one episode")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--env", help="a built-in environment")
    src.add_argument("--tools", help="a tool schema file (no environment: imagine, calls only, or --manual)")
    src.add_argument(
        "--mcp", action="append", metavar="COMMAND_OR_URL",
        help="an MCP server (a command line run over stdio, or a streamable-HTTP URL); repeat to combine servers",
    )
    p.add_argument("--task", help="a task of the environment (default: its first)")
    p.add_argument("--prompt", help="the user's request (overrides the task's)")
    p.add_argument("--manual", action="store_true", help="with --tools: you type each committed call's real response")
    _add_episode_flags(p, "parallel")
    _add_model_flags(p)

    p = sub.add_parser(
        "eval",
        help="run task files in each mode and report the table (rehearsal versus none)",
        description="Every task in every mode with the same seeds; a per-category table of call validity, "
        "success (BFCL match), fidelity, tokens and seconds, with each mode's paired difference to 'none' "
        "and its bootstrap interval.",
    )
    p.add_argument("--tasks", required=True, nargs="+", help="JSONL files: the project's task format or BFCL records")
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
    _add_episode_flags(p, "none")
    _add_model_flags(p)

    p = sub.add_parser(
        "showcase", help="record one parallel-rehearsal run per example environment (the Playground shows them on opening)"
    )
    p.add_argument("--out", default="examples/showcase/", help="folder for the records (one <env>.json each)")
    p.add_argument("--env", action="append", help="only this example environment (repeatable; default: all)")
    p.add_argument("--n", type=int, default=2, help="rehearsal budget N (steps, new tokens and the limit are fitted to the model's speed)")
    p.add_argument("--seed", type=int, default=0)
    _add_model_flags(p)
    from envace_demo.train.cli import register as register_train

    register_train(sub)
    return parser


# ---- helpers ---------------------------------------------------------------------------


def settings_from(args: argparse.Namespace) -> Settings:
    return Settings.from_env(
        model=getattr(args, "model", None),
        quantization=None if getattr(args, "quantization", None) == "none" else getattr(args, "quantization", None),
        dtype=getattr(args, "dtype", None),
        device=getattr(args, "device", None),
        constrained=getattr(args, "constrained", None),
        max_new_tokens=getattr(args, "max_new_tokens", None),
        max_steps=getattr(args, "max_steps", None),
        backend=getattr(args, "backend", None),
        base_url=getattr(args, "base_url", None),
        api_key=getattr(args, "api_key", None),
        openai_extras=getattr(args, "openai_extras", None),
        mcp_servers=tuple(args.mcp) if getattr(args, "mcp", None) else None,
    )


def load_model(settings: Settings):
    from envace_demo.models.loader import load_configured  # heavy: torch, transformers

    return load_configured(settings)


def episode_config(args: argparse.Namespace, settings: Settings, backend: Any) -> EpisodeConfig:
    return EpisodeConfig.for_backend(
        backend,
        constrained=settings.constrained is not False,
        require_first_call=None if args.first_call == "auto" else args.first_call == "required",
        mode=args.mode,
        n=args.n,
        sampling=Sampling(
            temperature=args.temperature,
            top_p=args.top_p,
            top_k=args.top_k,
            max_new_tokens=settings.max_new_tokens,
            seed=args.seed,
        ),
        max_steps=settings.max_steps,
        episode_seconds=settings.episode_seconds,
    )


def _environment(task: Task):
    from envace_demo.envs.registry import open_environment

    return open_environment(task.env)


def _short(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _print_step(where: str, event: TurnUpdated, out) -> None:
    """One call of the event's turn (``step 2.1``: turn 2, its first call of several), or the turn itself."""
    turn = event.turn
    several = event.call is not None and len(turn.action.calls) > 1
    prefix = f"{where} step {turn.index + 1}" + (f".{event.call + 1}" if several else "") + ":"
    if event.call is None:
        if turn.error:
            print(f"{prefix} error: {turn.error}", file=out)
        else:
            print(f"{prefix} answer: {turn.action.content}", file=out)
        return
    step = turn.calls[event.call]
    valid = "valid" if step.valid else "INVALID: " + "; ".join(step.validation_errors)
    print(f"{prefix} call {step.call.name} {_short(step.call.arguments)} ({valid})", file=out)
    if step.rehearsed is not None:
        print(f"{prefix}   rehearsed: {_short(step.rehearsed)}", file=out)
    if step.real is not None:
        fid = "" if step.fidelity is None else f"  [fidelity {step.fidelity:.2f}]"
        print(f"{prefix}   real:      {_short(step.real)}{fid}", file=out)
    if step.error:
        print(f"{prefix}   error: {step.error}", file=out)


def _mcp_environment(settings: Settings):
    from envace_demo.envs.mcp import MCPEnvironment

    return MCPEnvironment(settings.mcp_servers, call_timeout=settings.mcp_timeout)


def _manual_environment(task: Task, shown: dict, out):
    """Reads each committed call's real response from stdin (prompts go to ``out``)."""
    from envace_demo.envs.manual import ManualEnvironment, ResponseError

    def ask(call) -> None:
        print(f"[commit] call {call.name} {_short(call.arguments)} is waiting for its real response", file=out)
        step = shown.get("step")
        if step is not None and step.rehearsed is not None:
            print(f"[commit]   rehearsed: {_short(step.rehearsed)}", file=out)
        while True:
            print("real response (JSON, one line; empty line = the rehearsed one)> ", end="", file=out, flush=True)
            line = sys.stdin.readline()
            if not line:
                env.abort("no response: end of input")
                return
            text = line.strip()
            try:
                if not text and step is not None and step.rehearsed is not None:
                    env.respond(step.rehearsed, call.id)
                else:
                    env.respond(text, call.id)
                return
            except ResponseError as err:
                print(f"error: {err}", file=out)

    env = ManualEnvironment(task.tools, on_request=ask)
    return env


def _run_task(
    backend, task: Task, config: EpisodeConfig, out=None, environment=None, shown=None, cancel=None
) -> Trajectory:
    """Run one episode; with ``out``, print it readably as it goes. ``shown`` gets
    the latest committed step (the manual environment prints its rehearsal)."""
    episode = Episode(
        backend, task, config, environment if environment is not None else _environment(task), cancel=cancel
    )
    for event in episode.run():
        if shown is not None and isinstance(event, TurnUpdated) and event.where == "commit" and event.call is not None:
            shown["step"] = event.turn.calls[event.call]
        if out is None:
            if isinstance(event, EpisodeFinished):
                return event.trajectory
            continue
        if isinstance(event, TurnUpdated) and (
            event.phase == "executed" or (event.phase == "rehearsed" and event.where == "rehearsal")
            or (event.phase == "acted" and event.call is None)
        ):
            where = f"[rehearsal {event.rehearsal + 1}]" if event.where == "rehearsal" else "[commit]"
            _print_step(where, event, out)
        elif isinstance(event, TurnUpdated) and event.phase == "rehearsed" and not episode.executor:
            _print_step("[commit]", event, out)
        elif isinstance(event, RehearsalFinished):
            print(f"[rehearsal {event.rehearsal.index + 1}] ended: {event.rehearsal.ended}", file=out)
        elif isinstance(event, MemoryReady):
            print("--- rehearsal memory ---\n" + event.memory["text"] + "\n---", file=out)
        elif isinstance(event, EpisodeFinished):
            t = event.trajectory
            print(f"final answer: {t.final_answer}", file=out)
            print(
                f"ended: {t.ended}; success: {t.success}"
                + (f" ({'; '.join(t.check_reasons)})" if t.check_reasons else "")
                + f"; mean fidelity: {t.fidelity}; totals: {json.dumps(t.totals())}",
                file=out,
            )
            return t
    raise AssertionError("unreachable")


# ---- commands ----------------------------------------------------------------------------


def cmd_envs(args: argparse.Namespace) -> int:
    from envace_demo.envs.registry import list_environments

    listing = [
        {
            "name": env.name,
            "description": env.description,
            "tasks": [{"name": t.name, "prompt": t.prompt} for t in env_tasks(env.name)],
        }
        for env in list_environments()
    ]
    if args.json:
        print(json.dumps(listing, indent=2, ensure_ascii=False))
    else:
        for env in listing:
            print(f"{env['name']}: {env['description']}")
            for t in env["tasks"]:
                print(f"  {t['name']}: {t['prompt']}")
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    if args.file == "-":  # bytes, so that bad input is refused here as it is from a file
        text = decode_text(sys.stdin.buffer.read(), "stdin")
    else:
        text = read_user_file(args.file, where=args.file)
    tools = load_tools(text)
    print(json.dumps([t.to_dict() for t in tools], indent=2, ensure_ascii=False))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    if args.manual and not args.tools:
        raise TaskError("--manual needs --tools: the schemas whose responses you type")
    environment = None
    if args.env:
        task = find_task(args.env, args.task) if args.task else env_tasks(args.env)[0]
    elif args.mcp:
        if not args.prompt:
            raise TaskError("--mcp needs --prompt: the user's request")
        environment = _mcp_environment(settings)
        task = Task(name="mcp", prompt=args.prompt, tools=environment.tools())
    else:
        text = read_user_file(args.tools, where=args.tools)
        if not args.prompt:
            raise TaskError("--tools needs --prompt: the user's request")
        task = Task(name="custom", prompt=args.prompt, tools=load_tools(text))
    if args.prompt:
        task.prompt, task.check = args.prompt, None  # a new request: the task's check no longer applies
    out = sys.stderr if args.json else sys.stdout
    shown: dict = {}
    if args.manual:
        environment = _manual_environment(task, shown, out)
    try:
        backend = load_model(settings)
        config = episode_config(args, settings, backend)
        if args.manual:  # a person answers: give them the manual environment's own, longer limit
            config.tool_seconds = environment.timeout + 5
        traj = _run_task(backend, task, config, out=None if args.json else out, environment=environment, shown=shown)
    finally:
        if hasattr(environment, "close"):
            environment.close()
    if args.json:
        print(json.dumps(traj.to_dict(), indent=2, ensure_ascii=False))
    return 0


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

    settings = settings_from(args)
    modes, seeds = _eval_modes(args), _eval_seeds(args)
    if args.concurrency < 1:
        raise TaskError(f"--concurrency: expected at least 1, got {args.concurrency}")
    tasks = batch.load_eval_tasks(args.tasks, args.limit, _mcp_tools_transform(settings) if args.mcp else None)
    backend = load_model(settings)
    if args.concurrency > 1 and settings.backend != "openai":
        from envace_demo.evaluation.coalesce import CoalescingBackend

        # In process: the episodes' generations are merged into shared batches (a server batches its own).
        backend = CoalescingBackend(backend, episodes=args.concurrency)
    base = episode_config(args, settings, backend)
    meta = {
        "model": backend.info.model_id,
        **{k: getattr(args, k) for k in ("n", "temperature", "top_p", "top_k")},
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


def _eval_totals(records: list[dict], modes: list[str], seeds: list[int], backend, config: EpisodeConfig) -> dict:
    """Pooled counts over every episode (the single-mode report of earlier versions)."""
    ok = [r for r in records if not r.get("error")]
    calls = sum(r["calls"] for r in ok)
    valid = sum(r["valid_calls"] for r in ok)
    parse_errors = sum(r["parse_errors"] for r in ok)
    judged = [r for r in ok if r["success"] is not None]
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
    }


RECORDING_SECONDS = 900.0


def cmd_showcase(args: argparse.Namespace) -> int:
    """Each example environment's first task (the Playground's default request), in
    parallel mode with the defaults fitted to this model on this machine, recorded."""
    from envace_demo import budget as budget_mod
    from envace_demo import showcase
    from envace_demo.envs.registry import ENVIRONMENTS

    envs = args.env or list(ENVIRONMENTS)
    unknown = [e for e in envs if e not in ENVIRONMENTS]
    if unknown:
        raise TaskError(f"--env {unknown[0]}: no such example environment; choose from {', '.join(ENVIRONMENTS)}")
    settings = settings_from(args)
    backend = load_model(settings)
    speed = budget_mod.measure_speed(backend)
    fitted = budget_mod.fit(speed, settings.target_seconds) if settings.target_seconds else None
    settings = budget_mod.apply(settings, fitted)
    args.mode, args.temperature, args.top_p, args.top_k = "parallel", 0.6, 0.95, 20
    config = episode_config(args, settings, backend)
    # Nobody waits on a recording: a busy machine must not cut it short.
    config.episode_seconds = max(config.episode_seconds, RECORDING_SECONDS)
    budget = {"n": config.n, "max_steps": config.max_steps, "max_new_tokens": config.sampling.max_new_tokens,
              "episode_seconds": config.episode_seconds}
    print(f"{backend.info.model_id}: {speed.decode:.1f} tokens/s; {json.dumps(budget)}")
    for env in envs:
        task = env_tasks(env)[0]
        traj = _run_task(backend, task, config)
        path = showcase.save(
            showcase.Showcase(env, traj, showcase.COMMAND, budget=budget, speed=speed.to_dict()), Path(args.out)
        )
        print(f"{env}/{task.name}: ended {traj.ended}, success {traj.success}, {traj.seconds:.1f} s -> {path}")
    return 0


COMMANDS = {"envs": cmd_envs, "schema": cmd_schema, "run": cmd_run, "eval": cmd_eval, "showcase": cmd_showcase}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        handler = COMMANDS.get(args.command) or args.handler
        return handler(args)
    except EnvaceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
