"""The scripted-task machinery: a task's steps as run, and the script that writes one
against its real environment."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from envace_demo.context import read_context
from envace_demo.record import ToolCall
from envace_demo.tasks import Task


@dataclass
class ScriptedStep:
    thought: str
    call: ToolCall
    result: Any
    # The (read, real result) pairs the engine puts last in the rehearser's few-shot for
    # this call, read in the same world just before it (empty for a call with no reads).
    context: list[tuple[ToolCall, Any]] = field(default_factory=list)
    # A call the actor should not have made (a write its rehearsal would have seen fail):
    # kept in the conversation and the rehearser's rows, never an actor target.
    mistake: bool = False


@dataclass
class ScriptedTask:
    task: Task
    steps: list[ScriptedStep]
    answer: str
    answer_thought: str
    reads_only: bool  # the request asks for no change of state
    rehearser_only: bool = False  # a script with a deliberate mistake: no actor rows

    @property
    def calls(self) -> list[ToolCall]:
        return [s.call for s in self.steps]


@dataclass
class Script:
    """One task being written: calls run against ``env`` as they are added."""

    env_name: str
    env: Any
    name: str
    prompt: str
    steps: list[ScriptedStep] = field(default_factory=list)
    answer: str = ""
    answer_thought: str = "I have what the user asked for."
    check: dict = field(default_factory=dict)
    rehearser_only: bool = False

    def call(self, tool: str, arguments: dict, thought: str) -> Any:
        context = read_context(self.env.context_reads(tool, arguments), self.env.execute)
        result = self.env.execute(tool, arguments)
        self.steps.append(ScriptedStep(thought, ToolCall(tool, arguments), result, context))
        return result

    def mistaken(self) -> None:
        """The last call failed where another path works: the actor learns the recovery
        after it (and, shown a rehearsal that foresaw the failure, the path that works
        first), never the call itself."""
        self.steps[-1].mistake = True

    def seeded(self) -> bool:
        """Whether the script runs in the seeded world (before any call): a family leaves
        out there what a measuring set asks about the seeded world, and teaches it in
        varied worlds only, where the values differ."""
        from envace_demo.envs.registry import create

        return self.env.state() == create(self.env_name).state()

    def state(self, *path: str) -> Any:
        node = self.env.state()
        for key in path:
            node = node[key]
        return node

    def check_state(self, *path: str, exists: bool | None = None) -> None:
        cond: dict[str, Any] = {"path": list(path)}
        if exists is None:
            cond["equals"] = self.state(*path)
        else:
            cond["exists"] = exists
        self.check.setdefault("state", []).append(cond)

    def check_call(self, tool: str, arguments: dict) -> None:
        """The committed calls must include this one (each argument's one accepted value)."""
        self.check.setdefault("includes_calls", []).append({tool: {k: [v] for k, v in arguments.items()}})

    def check_answer(self, *needles: str) -> None:
        self.check.setdefault("answer_contains", []).extend(needles)


def error(result: Any) -> dict | None:
    err = result.get("error") if isinstance(result, dict) else None
    return err if isinstance(err, dict) else None


def money(x: float) -> str:
    return f"{x:.2f}"


# What a family writer is given: ``add(name, prompt)`` starts a task on a fresh
# environment; ``say(i, phrasings, **values)`` picks the wording of its request.
Add = Callable[[str, str], Script]
Say = Callable[..., str]
