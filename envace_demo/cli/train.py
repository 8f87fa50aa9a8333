"""``python -m envace_demo train``: role-wise GRPO fine-tuning from the command line.

    python -m envace_demo train --recipe demo-cpu --out runs/demo-cpu
    python -m envace_demo train --env bank --drills --steps 4 --group-size 4 --out runs/bank
    python -m envace_demo train --tools tools.json --tasks tasks.jsonl --steps 8 --group-size 4 --out runs/x
    accelerate launch --num_processes 4 -m envace_demo train --env bank --drills ... --out runs/bank

``--recipe demo-cpu`` runs ``envace_demo.train.recipe``: generated tasks on the three
example environments, a supervised warm start on real transitions, then role-wise
GRPO; it needs no ``--env``. Otherwise tasks: ``--env NAME`` alone uses the environment's example tasks, ``--drills``
its drill set, ``--tasks FILE`` a JSONL of your own (over ``--env`` or
``--tools``). Writes ``DIR/metrics.jsonl`` (one row per step), ``DIR/adapter/``
(the LoRA adapter) and ``DIR/summary.json`` (held-out success before and after).
Nothing heavy is imported until the command runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import Field, fields, replace
from pathlib import Path

from envace_demo.cli import flags
from envace_demo.errors import TaskError
from envace_demo.train.config import TrainConfig
from envace_demo.train.data import split_tasks


def _default_note(f: Field) -> str:
    return "" if f.default is None else f" (default: {f.default})"


# The TrainConfig fields a flag sets; None: not given (the recipe's value stays).
TrainFlags = flags.optional_flags(
    "TrainFlags",
    TrainConfig,
    [
        "steps", "group_size", "prompts_per_step", "lr", "lora_rank", "lora_layers", "beta", "clip_eps",
        "updates_per_batch", "scale_std", "temperature", "max_new_tokens", "max_turns", "micro_batch", "seed",
        "eval_samples", "eval_rehearsals", "eval_temperature",
    ],
    _default_note,
)


def register(sub) -> argparse.ArgumentParser:
    """Add the ``train`` subcommand; its handler is ``args.handler`` (``cmd_train``)."""
    p = flags.add_command(
        sub, "train", cmd_train, [TrainFlags, flags.FirstCallFlags, flags.LocalModelFlags],
        help="fine-tune the model on a tool schema with role-wise GRPO (LoRA)",
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument("--env", help="a built-in environment (its example tasks, or --tasks)")
    src.add_argument("--tools", help="a tool schema file; needs --tasks")
    p.add_argument("--tasks", help="JSONL tasks with checks; 'split': 'heldout' marks the evaluation ones")
    p.add_argument(
        "--drills",
        action="store_true",
        help="with --env: its drill tasks (envace_demo/train/data/ENV_drills.jsonl)",
    )
    p.add_argument("--out", required=True, help="output folder: metrics.jsonl, adapter/, summary.json")
    p.add_argument(
        "--recipe",
        choices=["default", "cpu", "demo-cpu"],
        default="default",
        help="starting values of the training flags; 'cpu': TrainConfig.cpu_recipe(), measured on the "
        "embedded model and the bank drills (flags given still win); 'demo-cpu': the shipped adapter's "
        "recipe (generated tasks on bank, files and library, warm start, then GRPO; no --env)",
    )
    p.add_argument("--sft-epochs", type=int, help="demo-cpu: warm-start epochs of the actor (default: 3)")
    p.add_argument("--rehearser-epochs", type=int, help="demo-cpu: warm-start epochs of the rehearser (default: 5)")
    p.add_argument("--actor-variants", type=int,
                   help="demo-cpu: varied worlds whose actor rows join the seeded world's (default: 2)")
    p.add_argument("--rehearser-phrasings", type=int,
                   help="demo-cpu: wordings of the requests the rehearser's rows are written in (default: 1)")
    p.add_argument("--rehearser-worlds", type=int,
                   help="demo-cpu: varied training worlds whose rehearser rows (calls with context reads: "
                   "writes) join the seeded world's (default: 0)")
    p.add_argument("--world-tasks", type=int,
                   help="demo-cpu: tasks drawn in each of those worlds, spread over the environments (default: 15)")
    p.add_argument("--world-contrast", action=argparse.BooleanOptionalAction, default=None,
                   help="demo-cpu: half of each varied world's tasks drawn among those whose outcome there "
                   "differs from the seeded world's (default: off)")
    p.add_argument("--world-rows-per-outcome", type=int,
                   help="demo-cpu: the varied worlds' rehearser rows drawn evenly, at most N of each tool and "
                   "outcome (success or an error code) from all their tasks (default: off)")
    p.add_argument("--success-rows-per-outcome", type=int,
                   help="demo-cpu: with --world-rows-per-outcome, at most N successes of each tool instead "
                   "(default: as many as of each error code)")
    p.add_argument("--outcome-flags", action=argparse.BooleanOptionalAction, default=None, help="demo-cpu: with "
                   "--world-rows-per-outcome, each setting of a call's boolean arguments an outcome of its own")
    p.add_argument("--outcome-weight", type=float,
                   help="demo-cpu: weight of a rehearser target's outcome tokens (success or which error) in "
                   "the loss (default: 1)")
    p.add_argument("--facts-weight", type=float,
                   help="demo-cpu: weight of a reasoning rehearser target's deciding facts in the loss; 0 where the "
                   "engine states them at run time (default: 1)")
    p.add_argument("--rehearser-facts", action=argparse.BooleanOptionalAction, default=None,
                   help="demo-cpu: rehearser targets reason from the deciding facts their context shows, then "
                   "say the outcome (default: off)")
    p.add_argument("--drill-worlds", type=int,
                   help="demo-cpu: varied training worlds whose calls with context reads also give brief "
                   "rehearser rows (the call's tool, its context reads, the facts, the outcome); needs "
                   "--rehearser-facts (default: 0)")
    p.add_argument("--seeded-rows", choices=["all", "context", "none"],
                   help="demo-cpu: the seeded world's rehearser rows: all, the committed rows of calls with "
                   "context reads alone, or none (a stage of varied worlds or drills alone) (default: all)")
    p.add_argument("--memory-every", type=int,
                   help="demo-cpu: the actor's rows with a rehearsal memory for every Nth task (0: none; default: 3)")
    p.add_argument("--actor-recovery", action=argparse.BooleanOptionalAction, default=None,
                   help="demo-cpu: the actor's rows of the generated tasks with a mistaken call (the "
                   "recovery after a failed write); --no-actor-recovery leaves them to the rehearser "
                   "(default: on)")
    p.add_argument("--memory-elsewhere", action=argparse.BooleanOptionalAction, default=None,
                   help="demo-cpu: a varied world's actor rows show the rehearsal memory of another world, "
                   "not their own (default: on)")
    p.add_argument("--roles", choices=["both", "actor", "rehearser"],
                   help="demo-cpu: the roles trained; one alone makes an adapter of its own for that role "
                   "(no GRPO stage); a rehearser's, saved as rehearser/ in the actor's adapter folder, serves "
                   "rehearser prompts beside it (default: both)")
    p.add_argument("--from-adapter", help="demo-cpu: continue this saved adapter (a stage run again)")
    p.add_argument("--sft-minutes", type=float, help="demo-cpu: time box of the warm start (default: none)")
    p.add_argument("--tasks-per-env", type=int, help="demo-cpu: at most this many generated tasks per environment")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    return p


def config_from(args: argparse.Namespace) -> TrainConfig:
    base = TrainConfig.cpu_recipe() if getattr(args, "recipe", "default") == "cpu" else TrainConfig()
    given = {f.name: getattr(args, f.name) for f in fields(TrainFlags) if getattr(args, f.name) is not None}
    if args.first_call != "auto":  # auto: decided once the model is loaded
        given["require_first_call"] = args.first_call == "required"
    return replace(base, **given, constrained=args.constrained is not False)


def load_tasks(args: argparse.Namespace) -> list:
    """The tasks of ``--env`` (or ``--tasks`` over it), or of ``--tasks`` over ``--tools``."""
    from envace_demo.policy import read_user_file
    from envace_demo.train.data import task_set

    tools = None
    if getattr(args, "tools", None):
        try:
            tools = json.loads(read_user_file(args.tools, where=args.tools))
        except json.JSONDecodeError as err:
            raise TaskError(f"{args.tools}: invalid JSON ({err.msg} at line {err.lineno})") from None
    return task_set(env=args.env, drills=getattr(args, "drills", False), tasks_file=args.tasks, tools=tools)


def _pct(value) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def recipe_from(args: argparse.Namespace):
    """The demo-cpu recipe with the flags given (GRPO flags set its GRPO stage)."""
    from envace_demo.train.recipe import DemoRecipe

    recipe = DemoRecipe()
    given = {f.name: getattr(args, f.name) for f in fields(TrainFlags) if getattr(args, f.name) is not None}
    changes: dict = {"grpo": replace(recipe.grpo, **given)}
    if args.sft_epochs is not None:
        changes["sft_epochs"] = args.sft_epochs
    if args.sft_minutes is not None:
        changes["sft_minutes"] = args.sft_minutes
    if args.tasks_per_env is not None:
        changes["tasks_per_env"] = args.tasks_per_env
    if args.roles is not None:
        changes["roles"] = ("actor", "rehearser") if args.roles == "both" else (args.roles,)
    for name in ("rehearser_epochs", "actor_variants", "rehearser_phrasings", "memory_every", "memory_elsewhere",
                 "actor_recovery", "from_adapter", "rehearser_worlds", "world_tasks", "seeded_rows", "world_contrast",
                 "world_rows_per_outcome", "success_rows_per_outcome", "outcome_flags", "outcome_weight", "facts_weight", "rehearser_facts",
                 "drill_worlds"):
        if getattr(args, name, None) is not None:
            changes[name] = getattr(args, name)
    return replace(recipe, **changes)


def cmd_recipe(args: argparse.Namespace) -> int:
    from envace_demo.train.recipe import run_recipe

    if args.env or args.tools or args.tasks or args.drills:
        raise TaskError("--recipe demo-cpu brings its own tasks: drop --env, --tools, --tasks and --drills")
    recipe = recipe_from(args)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    settings = flags.settings_from(args)
    # The recipe trains the embedded model from its base weights.
    if settings.adapter not in (None, "none"):
        raise TaskError("--recipe demo-cpu trains from the base weights: drop --adapter (or pass --adapter none)")
    settings = replace(settings, model=settings.model or "embedded", adapter="none")
    backend = flags.load_model(settings)
    log = (out_dir / "train.log").open("w", encoding="utf-8")

    def say(line: str) -> None:
        print(line, flush=True)
        log.write(line + "\n")
        log.flush()

    try:
        summary = run_recipe(backend, recipe, out_dir, say)
    finally:
        log.close()
    if args.json:
        print(json.dumps(summary, indent=2))
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    if getattr(args, "recipe", "default") == "demo-cpu":
        return cmd_recipe(args)
    if not args.env and not args.tools:
        raise TaskError("train needs --env NAME or --tools FILE (or --recipe demo-cpu)")
    from envace_demo.train.events import Evaluated, StepFinished, TrainFinished, TrainStarted
    from envace_demo.train.trainer import Trainer

    config = config_from(args)
    train_tasks, heldout = split_tasks(load_tasks(args))
    settings = flags.settings_from(args)
    # From the base weights unless --adapter names one to keep training (then the saved
    # adapter holds both).
    start = settings.adapter not in (None, "none")
    backend = flags.load_model(replace(settings, adapter=settings.adapter if start else "none"))
    if args.constrained is None and not backend.supports_constraints:
        config = replace(config, constrained=False)
    if args.first_call == "auto":
        config = replace(config, require_first_call=backend.requires_first_call)
    trainer = Trainer(backend, train_tasks, heldout, config, Path(args.out), copy_model=False, continue_adapter=start)
    out = sys.stdout
    result = None
    for event in trainer.run():
        if not trainer.accelerator.is_main_process:
            continue
        if isinstance(event, TrainStarted) and not args.json:
            print(
                f"training on {len(event.train_tasks)} task(s), evaluating on {len(event.heldout_tasks)}: "
                f"{', '.join(event.heldout_tasks)}",
                file=out,
                flush=True,
            )
        elif isinstance(event, Evaluated) and not args.json:
            r = event.result
            print(
                f"held-out {event.phase}: success without rehearsal {_pct(r.success_without)}, "
                f"with rehearsal {_pct(r.success_with)} (score {r.score_without} / {r.score_with}; "
                f"{r.tasks} tasks x {r.samples})",
                file=out,
                flush=True,
            )
        elif isinstance(event, StepFinished) and not args.json:
            m = event.metrics
            print(
                f"step {event.step}/{event.total}: reward actor {m['reward/actor']} rehearser {m['reward/rehearser']}, "
                f"success {m['success']}, valid calls {m['valid_call_rate']}, {m['seconds']}s",
                file=out,
                flush=True,
            )
        elif isinstance(event, TrainFinished):
            result = event.result
    if result is None:
        return 0  # not the main process
    if args.json:
        print(json.dumps(result.to_dict(), indent=2), file=out)
    else:
        print(
            f"adapter: {result.adapter_dir}; metrics: {Path(args.out) / 'metrics.jsonl'}; {result.seconds:.0f}s",
            file=out,
        )
    return 0
