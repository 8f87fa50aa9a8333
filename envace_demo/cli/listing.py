"""``envs`` and ``schema``: what the demo offers, without a model."""

from __future__ import annotations

import argparse
import json
import sys

from envace_demo.cli.flags import add_command
from envace_demo.policy import DEFAULT_POLICY, InputPolicy, decode_text, read_user_file
from envace_demo.schemas import load_tools
from envace_demo.tasks import env_tasks


def register(sub) -> None:
    p = add_command(sub, "envs", cmd_envs, help="list environments and their tasks")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p = add_command(sub, "schema", cmd_schema, help="normalize tool schemas (a file, or - for stdin)")
    p.add_argument("file")
    p.add_argument(
        "--public",
        action="store_true",
        help="load under the app's public-mode input policy (ENVACE_PUBLIC / a Space), as a visitor's schema is",
    )


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


def _policy(public: bool) -> InputPolicy:
    """The policy the app applies: its public one for ``--public`` or in public mode."""
    from envace_demo.settings import Settings
    from envace_demo.ui.options import UIOptions

    settings = Settings.from_env(public=True if public else None)
    return UIOptions.from_settings(settings).input_policy if settings.public else DEFAULT_POLICY


def cmd_schema(args: argparse.Namespace) -> int:
    if args.file == "-":  # bytes, so that bad input is refused here as it is from a file
        text = decode_text(sys.stdin.buffer.read(), "stdin")
    else:
        text = read_user_file(args.file, where=args.file)
    tools = load_tools(text, _policy(args.public))
    print(json.dumps([t.to_dict() for t in tools], indent=2, ensure_ascii=False))
    return 0

