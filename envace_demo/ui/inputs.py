"""What the user typed, turned into a Task and an EpisodeConfig (no gradio here).

The UI callbacks and the API endpoints both go through ``resolve``: a ``RunRequest``
(the controls' values, or an API call's arguments) and the model in, the task and the
episode config out, in one call; so the browser and ``gradio_client`` get the same
checks and the same caps. A follow-up goes through it too: the conversation's own
request, its record so far and the next user message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from envace_demo.engine import MODES, EpisodeConfig
from envace_demo.envs.registry import ENVIRONMENTS, MCP_PREFIX, tasks_path
from envace_demo.errors import ConfigError, EnvaceError, TaskError
from envace_demo.evaluation.batch import EvalTask, load_eval_tasks
from envace_demo.models.base import Backend, Sampling
from envace_demo.policy import DEFAULT_POLICY, InputPolicy
from envace_demo.record import Trajectory, call_steps
from envace_demo.schemas import load_tools
from envace_demo.settings import Settings, default_of
from envace_demo.tasks import Task, env_tasks
from envace_demo.ui import bfcl_entries
from envace_demo.ui.options import UIOptions

NO_ENVIRONMENT = "none"  # the picker's "none: imagine only": calls are never executed
BASELINE = "none"  # Compare's run without rehearsal
REHEARSAL_MODES = ("parallel", "sequential")  # what Compare may put beside it


# Picker values of the operator's MCP servers are "mcp:<label>" (envs.registry.MCP_PREFIX).
# A Playground run before the budget is fitted: the settings' default, as every run's.
APP_MAX_NEW_TOKENS = default_of(Settings, "max_new_tokens")
MANUAL = "manual"  # the picker's "you type each real response" (not in public mode)
SEED_MAX = 2**32 - 1  # what every sampler takes (numpy's bound; torch takes more)
# User messages one conversation may hold in public mode (the first and its follow-ups):
# each follow-up's prompt holds the whole conversation, so a visitor cannot grow it forever.
PUBLIC_USER_TURNS = 4


def max_user_turns(options: UIOptions) -> int | None:
    """The user messages a conversation may hold: capped in public mode, not otherwise."""
    return PUBLIC_USER_TURNS if options.public else None


def environment_choices(options: UIOptions | None = None) -> list[tuple[str, str]]:
    """(label, value) pairs for the environment picker: the built-ins, the MCP servers
    configured at launch, the BFCL multi-turn entries offered (fewer in public mode), and none."""
    mcp = [
        (f"mcp: {label} (configured at launch; its tools come from the server)", MCP_PREFIX + label)
        for label, _ in (options.mcp_servers if options else ())
    ]
    manual = [(f"{MANUAL}: you type the real response of each call", MANUAL)]
    if options is not None and not options.allow_manual:
        manual = []
    public = options is not None and options.public
    entries = bfcl_entries.choices(public, max_user_turns(options) if options is not None else None)
    return [(f"{name}: {cls.description}", name) for name, cls in ENVIRONMENTS.items()] + mcp + manual + entries + [
        ("none: imagine only (nothing real behind the schema)", NO_ENVIRONMENT)
    ]


def gallery() -> dict[str, str]:
    """Example name -> its tools.json text, for the schema gallery."""
    return {name: example_tools(name) for name in ENVIRONMENTS}


@lru_cache(maxsize=None)
def example_tools(env: str) -> str:
    """The tools.json text of a built-in environment, or a BFCL entry's function docs."""
    if bfcl_entries.is_entry(env):
        return bfcl_entries.tools_text(env)
    path = tasks_path(env).parent / "tools.json"  # examples/<env>/tools.json
    try:
        return path.read_text(encoding="utf-8")
    except OSError as err:
        raise TaskError(f"{path}: cannot read ({err.strerror})") from None


@lru_cache(maxsize=None)
def _env_tasks(env: str) -> tuple[Task, ...]:
    return tuple(env_tasks(env))


def example_tasks(env: str) -> list[Task]:
    """The example tasks of a built-in environment, the whole conversation of a BFCL entry;
    none for 'none' or an MCP server."""
    if bfcl_entries.is_entry(env):
        return [bfcl_entries.entry_task(env)]
    return list(_env_tasks(env)) if env in ENVIRONMENTS else []


def task_choices(env: str) -> list[tuple[str, str]]:
    """(label, name) of ``env``'s example tasks, for a task picker."""
    return [(f"{t.name}: {t.prompt}", t.name) for t in example_tasks(env)]


def find_example(env: str, name: str) -> Task:
    for task in example_tasks(env):
        if task.name == name:
            return task
    raise TaskError(f"no example task {name!r} in environment {env!r}")


@dataclass
class RunRequest:
    """One run as the user asked for it; ``check()`` refuses what the app does not allow."""

    tools: str
    environment: str
    message: str
    # The engine's and the sampler's own defaults; only the token budget is the app's.
    mode: str = default_of(EpisodeConfig, "mode")
    n: int = default_of(EpisodeConfig, "n")
    temperature: float = default_of(Sampling, "temperature")
    top_p: float = default_of(Sampling, "top_p")
    top_k: int = default_of(Sampling, "top_k")
    max_new_tokens: int = APP_MAX_NEW_TOKENS
    seed: int | None = 0
    constrained: bool = default_of(EpisodeConfig, "constrained")
    max_steps: int = default_of(EpisodeConfig, "max_steps")
    # The user's later messages, each sent once the one before is answered (a conversation).
    follow_ups: list[str] = field(default_factory=list)
    # Set by check() from the app's caps; build_task loads the schema under them.
    policy: InputPolicy = field(default=DEFAULT_POLICY, repr=False)
    redact: Callable[[str], str] | None = field(default=None, repr=False)

    @classmethod
    def from_controls(
        cls,
        tools,
        environment,
        message,
        mode,
        n,
        temperature,
        top_p,
        top_k,
        max_new_tokens,
        seed,
        constrained,
        max_steps,
    ) -> "RunRequest":
        """From UI control values: sliders give floats, an empty number box None."""
        return cls(
            tools=tools or "",
            environment=environment or NO_ENVIRONMENT,
            message=message or "",
            mode=mode,
            n=int(n),
            temperature=float(temperature),
            top_p=float(top_p),
            top_k=int(top_k),
            max_new_tokens=int(max_new_tokens),
            seed=None if seed is None else _whole("seed", seed),
            constrained=bool(constrained),
            max_steps=int(max_steps),
        )

    def check(self, options: UIOptions) -> "RunRequest":
        if self.mode not in MODES:
            raise ConfigError(f"mode: expected one of {', '.join(MODES)}, got {self.mode!r}")
        allowed = [value for _, value in environment_choices(options)]
        if self.environment not in allowed:
            choices = ", ".join(allowed)
            raise ConfigError(f"environment: expected one of {choices}, got {self.environment!r}")
        _in_range("n", self.n, 1, options.max_n)
        _in_range("max_new_tokens", self.max_new_tokens, 16, options.max_new_tokens)
        _in_range("max_steps", self.max_steps, 1, options.max_steps)
        _in_range("top_k", self.top_k, 0, 1000)
        if self.seed is not None:
            _in_range("seed", self.seed, 0, SEED_MAX)
        if not 0.0 <= self.temperature <= 2.0:
            raise ConfigError(f"temperature: expected 0 to 2, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ConfigError(f"top_p: expected more than 0 and at most 1, got {self.top_p}")
        if not isinstance(self.tools, str) or not isinstance(self.message, str):
            raise ConfigError("tools and message: expected text")
        _check_message("user message", self.message, options)
        self.follow_ups = _checked_follow_ups(self.follow_ups, options)
        # The schema's size, tool count and regexes are the loader's own checks, located like its other errors.
        self.policy = options.input_policy
        self.redact = options.redact if options.public else None
        return self


def _check_message(where: str, text: str, options: UIOptions) -> None:
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > options.max_message_bytes:
        raise ConfigError(f"{where}: {size:,} bytes, at most {options.max_message_bytes:,}")


def _checked_follow_ups(follow_ups: Any, options: UIOptions) -> list[str]:
    """The later user messages, each text within the message cap, their number within the
    conversation cap (public mode)."""
    if follow_ups is None:
        return []
    if not isinstance(follow_ups, (list, tuple)) or not all(isinstance(m, str) for m in follow_ups):
        raise ConfigError("follow_ups: expected a list of texts, the user's later messages in order")
    cap = max_user_turns(options)
    if cap is not None and 1 + len(follow_ups) > cap:
        raise ConfigError(
            f"conversation: {1 + len(follow_ups)} user messages, at most {cap} per conversation in this "
            "public demo; start a new one"
        )
    for k, text in enumerate(follow_ups):
        if not text.strip():
            raise ConfigError(f"follow-up {k + 1}: empty; say what the agent should do next")
        _check_message(f"follow-up {k + 1}", text, options)
    return [text.strip() for text in follow_ups]


def _whole(name: str, value: float) -> int | float:
    """A number box's value as an integer; one that is not a whole number is left for the range check."""
    try:
        return int(value) if float(value).is_integer() else value
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{name}: expected an integer, got {value!r}") from None


def _in_range(name: str, value: int, low: int, high: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ConfigError(f"{name}: expected an integer from {low} to {high}, got {value!r}")


def build_task(req: RunRequest) -> Task:
    """The task for a request; SchemaError (located) for a bad schema, TaskError otherwise.

    When the message is one of the chosen environment's example tasks, over that
    environment's own tools, the task keeps its success check (which judges that one
    message: a conversation that goes on past it has none). Its follow-ups are the
    request's. A BFCL multi-turn entry's task is the entry's, as far as the request's user
    messages go (each must be the entry's own turn).
    """
    if bfcl_entries.is_entry(req.environment):
        tools = load_tools(req.tools, req.policy)
        return bfcl_entries.task_for(req.environment, [req.message, *req.follow_ups], tools)
    task = _task(req)
    if req.follow_ups:
        return replace(task, follow_ups=list(req.follow_ups), check=None)
    return task


def _task(req: RunRequest) -> Task:
    prompt = (req.message or "").strip()
    if req.environment.startswith(MCP_PREFIX):
        # The server's own tools apply; the runner imports them when it connects.
        if not prompt:
            raise TaskError("user message: empty; say what the agent should do")
        return Task(name="mcp", prompt=prompt, tools=[], env=req.environment)
    tools = load_tools(req.tools, req.policy)
    if not prompt:
        raise TaskError("user message: empty; say what the agent should do")
    if req.environment == NO_ENVIRONMENT:
        return Task(name="custom", prompt=prompt, tools=tools)
    if req.environment == MANUAL:
        return Task(name="custom", prompt=prompt, tools=tools, env=MANUAL)
    foreign_tools(tools, req.environment, raise_error=True)
    names = sorted(t.name for t in tools)
    for example in example_tasks(req.environment):
        if example.prompt == prompt and sorted(t.name for t in example.tools) == names:
            return Task(
                name=example.name, prompt=prompt, tools=tools, env=req.environment, check=example.check
            )
    return Task(name="custom", prompt=prompt, tools=tools, env=req.environment)


def foreign_tools(tools: list, environment: str, raise_error: bool = False) -> list[str]:
    """The pasted tools an example environment does not have (it could only answer them
    with an unknown-tool error); with ``raise_error``, a TaskError that says so and what
    to pick instead. Other environments (none, manual, an MCP server) take any tools."""
    if environment not in ENVIRONMENTS:
        return []
    own = own_tool_names(environment)
    foreign = [t.name for t in tools if t.name not in own]
    if foreign and raise_error:
        raise TaskError(foreign_tools_text(foreign, environment, sorted(own)))
    return foreign


@lru_cache(maxsize=None)
def own_tool_names(environment: str) -> frozenset[str]:
    """The tools of a built-in environment (its tools.json, read once)."""
    return frozenset(t.name for t in load_tools(example_tools(environment)))


def foreign_tools_text(foreign: list[str], environment: str, own: list[str]) -> str:
    return (
        f"environment: the tools pasted are not all {environment}'s ({', '.join(foreign)} "
        f"{'is' if len(foreign) == 1 else 'are'} not among {', '.join(own)}); pick environment 'none' "
        "to rehearse them without committing, or 'manual' to answer each real call yourself"
    )


def check_prompts(tasks: list[Task], policy: InputPolicy, backend: Backend) -> None:
    """Each task's prompt (and each of its follow-ups) within the policy's caps in the loaded
    model's tokens (its bytes were checked as it was read): InputError naming the task otherwise."""
    for task in tasks:
        policy.check_prompt(task.prompt, f"task {task.name!r}: prompt", backend.count_tokens)
        for k, text in enumerate(task.follow_ups):
            policy.check_prompt(text, f"task {task.name!r}: follow-up {k + 1}", backend.count_tokens)


def resolve(
    req: RunRequest,
    options: UIOptions,
    settings: Settings,
    backend: Backend,
    *,
    known: Mapping[str, list] | None = None,
    previous: Trajectory | None = None,
    follow_up: str | None = None,
    refuses: Callable[[str], str | None] | None = None,
) -> tuple[Task, EpisodeConfig]:
    """What a request runs: (task, episode config), checked under the app's caps, in one call.

    ``req``: the controls' values or an API call's arguments. ``settings``: the settings a
    run goes by (fitted to the model's speed). ``known``: environment -> this visitor's
    earlier real reads there, the rehearser's few-shot (``Session.known``). ``previous`` and
    ``follow_up``: a follow-up, ``req`` being the request its conversation began with: the
    task is that conversation with one more user message, under the same mode and settings.
    ``refuses``: why the caller does not run an environment (None: it does); a queue's
    handler runs the environments of its queue only.
    """
    if previous is not None:
        req = replace(req, follow_ups=[*previous.follow_ups, follow_up or ""])
        _check_continues(previous, follow_up)
    req.check(options)
    why = refuses(req.environment) if refuses is not None else None
    if why:
        raise ConfigError(f"environment {req.environment}: {why}")
    task = build_task(req)
    check_prompts([task], req.policy, backend)
    config = build_config(req, settings, backend)
    if known and task.env in known and (previous is None or not _wrote(previous)):
        # Reads made before any write: they hold in the state this episode starts from.
        config = replace(config, known_results=tuple(known[task.env]))
    return task, config


def _check_continues(previous: Trajectory, follow_up: str | None) -> None:
    """A follow-up goes on from a conversation whose every user message was answered for real."""
    if not (follow_up or "").strip():
        raise TaskError("follow-up: empty; say what the agent should do next")
    if previous.mode == "imagine":
        raise ConfigError(
            "follow-up: imagine mode commits nothing to go on from; press Run for a new conversation"
        )
    if len(previous.answers) < 1 + len(previous.follow_ups):
        raise ConfigError(
            f"follow-up: the last message was not answered (ended: {previous.ended or 'unknown'}); "
            "press Run for a new conversation"
        )


def _wrote(traj: Trajectory) -> bool:
    """Whether the conversation changed its environment's state (or may have)."""
    return any(step.write is not False and step.real is not None for step in call_steps(traj.turns))


def can_follow_up(traj: Trajectory | None, options: UIOptions) -> str | None:
    """Why the conversation of ``traj`` cannot take a follow-up (None: it can): it ran on a
    built-in environment or a BFCL entry that has turns left, committed, answered every
    message, and is under the turn cap."""
    if traj is None:
        return "press Run first"
    entry = bfcl_entries.is_entry(traj.environment)
    if traj.environment not in ENVIRONMENTS and not entry:
        return "a follow-up goes on in a built-in environment (bank, files, library) or a BFCL entry only"
    try:
        _check_continues(traj, "next")
    except EnvaceError as err:
        return str(err).removeprefix("follow-up: ")
    if entry and bfcl_entries.next_turn(traj) is None:
        return "the entry's user turns are all answered and BFCL's checker has judged it: press Run for a new conversation"
    cap = max_user_turns(options)
    if cap is not None and 1 + len(traj.follow_ups) >= cap:
        return (
            f"this conversation has its {cap} user messages, the most one may hold in this public demo: "
            "press Run for a new one"
        )
    return None


# The Playground shows every step's rehearsal beside its real response, reads too; eval and
# the CLI fetch an imagined run's reads (EpisodeConfig's default, faster).
PLAYGROUND_IMAGINED_READS = "rehearse"


def build_config(
    req: RunRequest, settings: Settings, backend: Backend, mode: str | None = None
) -> EpisodeConfig:
    """The episode config; ``mode`` overrides the request's (Compare runs both ways)."""
    return EpisodeConfig.for_backend(
        backend,
        constrained=req.constrained,
        mode=mode or req.mode,
        n=req.n,
        sampling=Sampling.taken_from(req, think_tokens=reasoning_budget(settings.think_tokens, req.max_new_tokens)),
        max_steps=req.max_steps,
        episode_seconds=settings.episode_seconds,
        think_chars=settings.think_chars,
        response_schema=settings.response_schema,
        redact=req.redact,
        imagined_reads=PLAYGROUND_IMAGINED_READS,
    )


def reasoning_budget(think_tokens: int | None, max_new_tokens: int) -> int | None:
    """The reasoning budget a run gets: the planned one, or half its new tokens where the
    visitor chose fewer tokens than the plan thinks (the answer keeps the rest)."""
    if think_tokens is None:
        return None
    return min(think_tokens, max_new_tokens // 2) or None


def compare_modes(rehearsal_mode: str) -> tuple[str, str]:
    """The two modes Compare runs: the baseline, then ``rehearsal_mode``."""
    if rehearsal_mode not in REHEARSAL_MODES:
        raise ConfigError(
            f"rehearsal mode: expected one of {', '.join(REHEARSAL_MODES)}, got {rehearsal_mode!r}"
        )
    return BASELINE, rehearsal_mode


def suite_tasks(source: str, env: str, upload: str | None, limit: int, policy: InputPolicy) -> list[EvalTask]:
    """The suite, as ``eval`` reads it (ids and categories): the example tasks of ``env``
    (source "env"), or an uploaded JSONL's ("upload"), read under the app's input policy."""
    if source == "upload":
        if not upload:
            raise TaskError("suite: upload a JSONL file of tasks first (the project's format or BFCL records)")
        return load_eval_tasks([Path(upload)], limit, policy=policy)
    if source != "env":
        raise ConfigError(f"suite source: expected env or upload, got {source!r}")
    tasks = example_tasks(env)[:limit]
    if not tasks:
        raise TaskError("suite: no tasks to run")
    return [EvalTask(t, f"{env}:{t.name}", env) for t in tasks]
