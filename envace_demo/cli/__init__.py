"""Command line: ``python -m envace_demo envs|schema|run|eval|showcase|train|plan|simulate``.

One module per command (each adds its subcommand with ``register``); ``flags`` holds the
flags they share, built from the dataclasses that define those values."""

from __future__ import annotations

import sys
from typing import Sequence

from envace_demo.cli import evaluate, listing, plan, run, showcase, simulate, train
from envace_demo.cli.flags import new_parser, settings_from
from envace_demo.errors import EnvaceError

__all__ = ["build_parser", "main", "settings_from"]


def build_parser():
    parser = new_parser(prog="python -m envace_demo", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for command in (listing, run, evaluate, showcase, train, plan, simulate):
        command.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except EnvaceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
