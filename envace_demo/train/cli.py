"""``python -m envace_demo train``: role-wise GRPO fine-tuning from the command line.

    python -m envace_demo train --env bank --drills --steps 4 --group-size 4 --out runs/bank
    python -m envace_demo train --tools tools.json --tasks tasks.jsonl --steps 8 --group-size 4 --out runs/x
    accelerate launch --num_processes 4 -m envace_demo train --env bank --drills ... --out runs/bank

Tasks: ``--env NAME`` alone uses the environment's example tasks, ``--drills``
its drill set, ``--tasks FILE`` a JSONL of your own (over ``--env`` or
``--tools``). Writes ``DIR/metrics.jsonl`` (one row per step), ``DIR/adapter/``
(the LoRA adapter) and ``DIR/summary.json`` (held-out success before and after).
Nothing heavy is imported until the command runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields, replace
from pathlib import Path

from envace_demo.errors import TaskError
from envace_demo.train.config import TrainConfig
from envace_demo.train.data import split_tasks

# CLI flag -> TrainConfig field, for the flags that map one to one.
_FLAGS = {
    "steps": int,
    "group_size": int,
    "prompts_per_step": int,
    "lr": float,
    "lora_rank": int,
    "lora_layers": int,
    "beta": float,
    "clip_eps": float,
    "updates_per_batch": int,
    "temperature": float,
    "max_new_tokens": int,
    "max_turns": int,
    "micro_batch": int,
    "seed": int,
    "eval_samples": int,
    "eval_rehearsals": int,
    "eval_temperature": float,
}


def register(subparsers) -> argparse.ArgumentParser:
    """Add the ``train`` subcommand; its handler is ``args.handler`` (and ``cmd_train``)."""
    helps = {f.name: f.metadata.get("help", "") for f in fields(TrainConfig)}
    defaults = TrainConfig()
    p = subparsers.add_parser("train", help="fine-tune the model on a tool schema with role-wise GRPO (LoRA)")
    src = p.add_mutually_exclusive_group(required=True)
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
        choices=["default", "cpu"],
        default="default",
        help="starting values for the flags below; 'cpu': TrainConfig.cpu_recipe(), measured on the "
        "embedded model and the bank drills (flags given still win)",
    )
    for name, kind in _FLAGS.items():
        default = getattr(defaults, name)
        p.add_argument(
            "--" + name.replace("_", "-"),
            type=kind,
            default=None,
            help=f"{helps[name]} (default {default})",
        )
    p.add_argument("--scale-std", action="store_true", help=helps["scale_std"])
    p.add_argument(
        "--first-call",
        choices=["auto", "required", "optional"],
        default="auto",
        help=helps["require_first_call"] + " (auto: what the loaded model needs)",
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    g = p.add_argument_group("model")
    g.add_argument("--model", help="'embedded', a hub id or a local path (env ENVACE_MODEL)")
    g.add_argument("--dtype", choices=["auto", "bfloat16", "float32"])
    g.add_argument("--device", choices=["auto", "cpu", "cuda"])
    g.add_argument(
        "--constrained", action=argparse.BooleanOptionalAction, default=None, help="constrained decoding"
    )
    g.add_argument(
        "--threads", type=int, help="CPU threads for torch (env ENVACE_THREADS); 1 is fastest on a busy CPU"
    )
    p.set_defaults(handler=cmd_train)
    return p


def config_from(args: argparse.Namespace) -> TrainConfig:
    base = TrainConfig.cpu_recipe() if getattr(args, "recipe", "default") == "cpu" else TrainConfig()
    given = {name: getattr(args, name) for name in _FLAGS if getattr(args, name) is not None}
    if args.first_call != "auto":  # auto: decided once the model is loaded
        given["require_first_call"] = args.first_call == "required"
    return replace(base, **given, scale_std=args.scale_std, constrained=args.constrained is not False)


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


def cmd_train(args: argparse.Namespace) -> int:
    from envace_demo.cli import load_model, settings_from
    from envace_demo.train.events import Evaluated, StepFinished, TrainFinished, TrainStarted
    from envace_demo.train.trainer import Trainer

    config = config_from(args)
    train_tasks, heldout = split_tasks(load_tasks(args))
    settings = settings_from(args)
    if args.threads:
        settings = replace(settings, threads=args.threads)
    backend = load_model(settings)
    if args.constrained is None and not backend.supports_constraints:
        config = replace(config, constrained=False)
    if args.first_call == "auto":
        config = replace(config, require_first_call=backend.requires_first_call)
    trainer = Trainer(backend, train_tasks, heldout, config, Path(args.out), copy_model=False)
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
