"""``run``: one episode on a built-in environment, a tool schema or MCP servers."""

from __future__ import annotations

import argparse
import json
import sys

from envace_demo import budget
from envace_demo.cli import flags
from envace_demo.cli.episodes import _manual_environment, _mcp_environment, _run_task
from envace_demo.errors import TaskError
from envace_demo.models.speed import fitted_settings
from envace_demo.policy import read_user_file
from envace_demo.schemas import load_tools
from envace_demo.tasks import Task, env_tasks, find_task


def register(sub) -> None:
    p = flags.add_command(sub, "run", cmd_run, flags.EPISODE, help="run one episode")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--env", help="a built-in environment")
    src.add_argument("--tools", help="a tool schema file (no environment: imagine, calls only, or --manual)")
    src.add_argument(
        "--mcp", action="append", metavar="COMMAND_OR_URL",
        help="an MCP server (a command line run over stdio, or a streamable-HTTP URL); repeat to combine servers",
    )
    p.add_argument("--task", help="a task of the environment (default: its first)")
    p.add_argument("--prompt", help="the user's request (overrides the task's)")
    p.add_argument(
        "--follow-up", "--follow_up", dest="follow_up", action="append", default=[], metavar="MESSAGE",
        help="a later user message of the same conversation, sent once the one before is answered; repeat in order",
    )
    p.add_argument("--manual", action="store_true", help="with --tools: you type each committed call's real response")


def cmd_run(args: argparse.Namespace) -> int:
    settings = flags.settings_from(args)
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
    if args.follow_up:
        task.follow_ups, task.check = [*task.follow_ups, *args.follow_up], None
    out = sys.stderr if args.json else sys.stdout
    shown: dict = {}
    if args.manual:
        environment = _manual_environment(task, shown, out)
    try:
        backend = flags.load_model(settings)
        # As the app does: steps, new tokens, reasoning and the limit fitted to this model here.
        settings, fitted, speed = fitted_settings(backend, settings)
        if fitted is not None:
            print(budget.describe(fitted, speed), file=sys.stderr)
            if args.n is None:  # N too, where not given (as budget.apply)
                args.n = fitted.n
        config = flags.episode_config(args, settings, backend)
        if args.manual:  # a person answers: give them the manual environment's own, longer limit
            config.tool_seconds = environment.timeout + 5
        elif args.mcp:  # ENVACE_MCP_TIMEOUT governs a server's answers (a simulated one is slow on CPU)
            config.tool_seconds = max(config.tool_seconds, settings.mcp_timeout + 5)
        traj = _run_task(backend, task, config, out=None if args.json else out, environment=environment, shown=shown)
    finally:
        if hasattr(environment, "close"):
            environment.close()
    if args.json:
        print(json.dumps(traj.to_dict(), indent=2, ensure_ascii=False))
    return 0

