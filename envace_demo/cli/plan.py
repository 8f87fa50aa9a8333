"""``plan``: what the app runs on a Spaces hardware flavor (``envace_demo.plan``), without a model."""

from __future__ import annotations

import argparse
import json

from envace_demo.cli.flags import add_command
from envace_demo.models.hardware import DEFAULT_GPU_MODEL, EMBEDDED, ENVACE_SMALL
from envace_demo.plan import FLAVOR_NAMES, describe, plan
from envace_demo.plan.zerogpu import ZERO_SIZES

MODELS = (DEFAULT_GPU_MODEL, ENVACE_SMALL, EMBEDDED)


def register(sub) -> None:
    p = add_command(sub, "plan", cmd_plan, help="the plan for a model on a Spaces hardware flavor (no model needed)")
    p.add_argument("--hardware", required=True, choices=FLAVOR_NAMES, help="the Space's hardware flavor")
    p.add_argument("--model", default=DEFAULT_GPU_MODEL, choices=MODELS, help="the model")
    p.add_argument(
        "--quantization",
        default="auto",
        choices=("auto", "none", "4bit", "8bit"),
        help="auto: 16-bit where it fits, else 4-bit",
    )
    p.add_argument(
        "--gpu-size",
        default="auto",
        choices=("auto", *ZERO_SIZES),
        help="ZeroGPU: large (half a card) or xlarge (the whole card, twice the quota); auto: xlarge only "
        "where half a card holds no run with rehearsal",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def cmd_plan(args: argparse.Namespace) -> int:
    result = plan(args.hardware, args.model, args.quantization, gpu_size=args.gpu_size)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(describe(result))
    return 0 if result.usable else 1
