"""``simulate``: a tool schema served as an MCP server whose every answer is the model's rehearsal."""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import dataclass

from envace_demo.cli import flags
from envace_demo.models.base import Sampling
from envace_demo.policy import read_user_file
from envace_demo.schemas import load_tools
from envace_demo.settings import Settings
from envace_demo.simulate.rehearse import UNKNOWN_REQUEST, RehearsalSettings

# The rehearser's budget: new tokens, its reasoning bound (steps do not apply), and CPU threads
# (a simulator started by an agent shares the CPU with it: 1 thread avoids oversubscription).
RehearsalBudgetFlags = flags.optional_flags(
    "RehearsalBudgetFlags", Settings, ["max_new_tokens", "think_chars", "threads"], flags._setting_note
)


@dataclass
class SamplingFlags:
    seed: int = flags._like(Sampling, "seed", default=0)  # the same call, the same answer across runs
    temperature: float = flags._like(Sampling, "temperature")
    top_p: float = flags._like(Sampling, "top_p")
    top_k: int = flags._like(Sampling, "top_k")


def register(sub) -> None:
    p = flags.add_command(
        sub, "simulate", cmd_simulate, [SamplingFlags, RehearsalBudgetFlags, flags.ModelFlags],
        help="serve a tool schema as an MCP server that answers with the model's rehearsal",
    )
    p.add_argument("--tools", required=True, help="the tool schema file to simulate")
    p.add_argument(
        "--http", metavar="HOST:PORT", help="serve streamable HTTP at http://HOST:PORT/mcp (default: stdio)"
    )
    p.add_argument(
        "--examples", metavar="FILE",
        help="real call/result pairs (JSON array or JSONL of {name, arguments, result}): few-shot for the "
        "rehearser, and answered as given when called again",
    )
    p.add_argument("--context", default=UNKNOWN_REQUEST, help="what the rehearser is told the user asked")
    p.add_argument("--no-cache", action="store_true", help="rehearse every call afresh, identical ones too")


def cmd_simulate(args: argparse.Namespace) -> int:
    from envace_demo.simulate.pairs import parse_pairs
    from envace_demo.simulate.server import parse_address, serve_http, serve_stdio
    from envace_demo.simulate.world import SimulatedWorld

    # Logs go to stderr: over stdio, stdout is the protocol.
    logging.basicConfig(stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("envace_demo").setLevel(logging.INFO)
    settings = flags.settings_from(args)
    address = parse_address(args.http) if args.http else None
    tools = load_tools(read_user_file(args.tools, where=args.tools))
    examples = []
    if args.examples:
        examples = parse_pairs(read_user_file(args.examples, where=args.examples), tools, args.examples)
    rehearsal = RehearsalSettings(
        sampling=Sampling.taken_from(args, max_new_tokens=settings.max_new_tokens),
        constrained=settings.constrained is not False,
        think_chars=settings.think_chars,
        context=args.context,
    )
    load = lambda: flags.load_model(settings)  # noqa: E731
    world = SimulatedWorld(tools, load, rehearsal, examples, cache=not args.no_cache)
    world.preload()  # tools/list is answered at once; the first call waits for the model
    if address is None:
        serve_stdio(world)
    else:
        serve_http(world, *address)
    return 0
