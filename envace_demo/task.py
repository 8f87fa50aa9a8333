"""A task and its verdict as plain records: no file reading, no environment lookup.

Low in the layers: :mod:`envace_demo.tasks` (reading task files, resolving a task's
environment through the registry, judging), the BFCL multi-turn benchmark and the eval
batch all build on these.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from envace_demo.schemas import Tool

__all__ = ["EvalTask", "Task", "Verdict"]


@dataclass
class Task:
    name: str
    prompt: str
    tools: list[Tool]
    env: str | None = None
    check: dict | None = None
    split: str = "train"
    source: str = ""
    # A conversation: the user's later turns, each sent once the one before is answered.
    follow_ups: list[str] = field(default_factory=list)
    # Tools that join the conversation at a user turn (index into ``user_turns``; BFCL's
    # miss_func entries hold some back until the turn that needs them).
    added_tools: dict[int, list[Tool]] = field(default_factory=dict)

    @property
    def user_turns(self) -> list[str]:
        """Every user message of the conversation, in order."""
        return [self.prompt, *self.follow_ups]

    def tools_at(self, turn: int) -> list[Tool]:
        """The tools offered at user turn ``turn``: the task's own and those added so far."""
        added = [t for k in sorted(self.added_tools) if k <= turn for t in self.added_tools[k]]
        return [*self.tools, *added]

    def to_dict(self) -> dict:
        out = {
            "name": self.name,
            "prompt": self.prompt,
            "env": self.env,
            "tools": [t.to_dict() for t in self.tools],
            "check": self.check,
            "split": self.split,
        }
        if self.follow_ups:
            out["follow_ups"] = list(self.follow_ups)
        if self.added_tools:
            out["added_tools"] = {str(k): [t.to_dict() for t in v] for k, v in self.added_tools.items()}
        return out


@dataclass
class Verdict:
    success: bool
    reasons: list[str] = field(default_factory=list)  # why it failed, one line per failed part


@dataclass
class EvalTask:
    """A task in an eval run."""

    task: Task
    task_id: str  # unique within a run: "<file stem>:<task name>"
    category: str
