"""The bundled environments by name, and their example tasks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from envace_demo.bfcl_multi import ENV_PREFIX, open_entry
from envace_demo.envs._common import EXAMPLES_DIR, tool_specs
from envace_demo.envs.bank import BankEnvironment
from envace_demo.envs.base import Environment
from envace_demo.envs.files import FilesEnvironment
from envace_demo.envs.library import LibraryEnvironment
from envace_demo.errors import ConfigError, EnvironmentNotFound, TaskError

ENVIRONMENTS: dict[str, type[Environment]] = {
    env.name: env for env in (BankEnvironment, FilesEnvironment, LibraryEnvironment)
}

SPLITS = ("train", "heldout")
_TASK_KEYS = {"name", "prompt", "check", "split"}


def _lookup(name: str) -> type[Environment]:
    try:
        return ENVIRONMENTS[name]
    except (KeyError, TypeError):
        raise EnvironmentNotFound(
            f"no environment named {name!r}; available: {', '.join(sorted(ENVIRONMENTS))}"
        ) from None


def create(name: str) -> Environment:
    """A fresh instance (its own state) of the environment called ``name``."""
    return _lookup(name)()


def builtin_patterns() -> frozenset[str]:
    """Every regular expression the built-in environments' schemas declare: the operator's
    own, trusted where visitors' patterns are refused."""
    found: set[str] = set()
    stack: list = [tool_specs(name) for name in ENVIRONMENTS]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("pattern"), str):
                found.add(node["pattern"])
            if isinstance(node.get("patternProperties"), dict):
                found.update(node["patternProperties"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return frozenset(found)


MCP_PREFIX = "mcp:"  # "mcp:<label>": the operator's MCP server of that label
BFCL_MULTI_TURN_PREFIX = ENV_PREFIX  # "bfcl-multi-turn:<entry id>" (envace_demo.bfcl_multi)


def open_environment(
    spec: str | None, mcp_servers: Mapping[str, str] | None = None, mcp_timeout: float = 30.0
) -> Environment | None:
    """A fresh environment for ``spec``: None for no environment, a built-in by name,
    ``bfcl-multi-turn:<entry id>`` (that BFCL v4 multi-turn entry's backends), or
    ``mcp:<label>``, a connection to the server the operator configured under that label
    (never a command or address taken from the spec itself). Close it when done."""
    if not spec:
        return None
    if spec.startswith(BFCL_MULTI_TURN_PREFIX):  # one BFCL v4 multi-turn entry's backends
        return open_entry(spec)
    if spec.startswith(MCP_PREFIX):
        from envace_demo.envs.mcp import MCPEnvironment

        label = spec[len(MCP_PREFIX) :]
        servers = dict(mcp_servers or {})
        if label not in servers:
            raise ConfigError(f"environment: no MCP server {label!r} was configured at launch")
        return MCPEnvironment(servers[label], call_timeout=mcp_timeout)
    return create(spec)


def list_environments() -> list[type[Environment]]:
    return list(ENVIRONMENTS.values())


def parse_tasks(text: str, source: str) -> list[dict[str, Any]]:
    """Task records from JSONL ``text``; errors are located as ``source:line``.

    A record is ``{"name", "prompt", "check", "split"}``: a unique name, a
    non-empty prompt, a non-empty check object, and a split of train or heldout;
    other keys pass through untouched. Blank lines are skipped.
    """
    tasks: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{source}:{lineno}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise TaskError(f"{where}: invalid JSON ({err.msg} at column {err.colno})") from None
        if not isinstance(record, dict):
            raise TaskError(f"{where}: expected a JSON object, got {type(record).__name__}")
        missing = _TASK_KEYS - set(record)
        if missing:
            raise TaskError(f"{where}: missing key(s) {sorted(missing)}")
        name, prompt, check, split = (record[k] for k in ("name", "prompt", "check", "split"))
        if not isinstance(name, str) or not name.strip():
            raise TaskError(f"{where}: 'name' must be a non-empty string")
        if name in seen:
            raise TaskError(f"{where}: duplicate task name {name!r} (first on line {seen[name]})")
        if not isinstance(prompt, str) or not prompt.strip():
            raise TaskError(f"{where}: 'prompt' must be a non-empty string")
        if not isinstance(check, dict) or not check:
            raise TaskError(f"{where}: 'check' must be a non-empty object")
        if split not in SPLITS:
            raise TaskError(f"{where}: 'split' must be one of {list(SPLITS)}, got {split!r}")
        seen[name] = lineno
        tasks.append(record)
    return tasks


def tasks_path(env_name: str) -> Path:
    _lookup(env_name)
    return EXAMPLES_DIR / env_name / "tasks.jsonl"


def load_tasks(env_name: str) -> list[dict[str, Any]]:
    """The example tasks of environment ``env_name`` (examples/<env>/tasks.jsonl)."""
    path = tasks_path(env_name)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise TaskError(f"{path}: cannot read ({err.strerror})") from None
    return parse_tasks(text, str(path))
