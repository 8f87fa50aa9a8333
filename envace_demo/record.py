"""The trajectory record: one JSON-native data model shared by the engine, UI,
charts, export and training.

Every dataclass here converts with ``to_dict()`` / ``from_dict()``; the dict form
is the documented export format (see README, "Trajectory record").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

JSON = Any  # a value that json.dumps accepts


@dataclass
class ToolCall:
    """One parsed call: ``name`` is the name the model used (API-safe form)."""

    name: str
    arguments: dict[str, JSON]

    def to_dict(self) -> dict:
        return {"name": self.name, "arguments": self.arguments}

    @classmethod
    def from_dict(cls, d: dict) -> "ToolCall":
        return cls(name=d["name"], arguments=dict(d.get("arguments") or {}))


@dataclass
class Action:
    """What the actor produced in one turn.

    ``text`` is the raw output (reasoning included), ``thinking`` the reasoning
    alone, ``content`` the visible text outside reasoning and call blocks,
    ``calls`` the parsed calls. ``error`` is a contract error code (method doc §2)
    with ``error_message``, when parsing failed.
    """

    text: str
    thinking: str = ""
    content: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    error: str | None = None
    error_message: str | None = None

    def to_dict(self) -> dict:
        return {
            "text": self.text,
            "thinking": self.thinking,
            "content": self.content,
            "calls": [c.to_dict() for c in self.calls],
            "error": self.error,
            "error_message": self.error_message,
        }

    @classmethod
    def from_dict(cls, d: dict) -> "Action":
        return cls(
            text=d.get("text", ""),
            thinking=d.get("thinking", ""),
            content=d.get("content", ""),
            calls=[ToolCall.from_dict(c) for c in d.get("calls", [])],
            error=d.get("error"),
            error_message=d.get("error_message"),
        )


def _plain(cls, d: dict):
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in d.items() if k in names})


@dataclass
class Step:
    """One tool call of a trajectory, or the final answer (``call`` is None).

    In a committed run ``rehearsed`` is the model's prediction and ``real`` the
    environment's response; in an imagined run only ``rehearsed`` is set.
    ``action`` is the actor turn this call came from: several calls of one turn
    share one action (``call_index`` tells which one).
    """

    index: int
    action: Action
    call: ToolCall | None = None
    call_index: int = 0
    valid: bool | None = None  # arguments validate against the schema
    validation_errors: list[str] = field(default_factory=list)
    rehearsed: JSON = None
    rehearsal_text: str | None = None  # the rehearser's raw output
    real: JSON = None
    fidelity: float | None = None
    error: str | None = None
    act_seconds: float = 0.0
    rehearse_seconds: float = 0.0
    execute_seconds: float = 0.0
    act_tokens: int = 0
    rehearse_tokens: int = 0
    prompt_tokens: int = 0
    prompts: dict[str, str] = field(default_factory=dict)  # role -> rendered prompt

    def to_dict(self) -> dict:
        d = asdict(self)
        d["action"] = self.action.to_dict()
        d["call"] = self.call.to_dict() if self.call else None
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Step":
        step = _plain(cls, d)
        step.action = Action.from_dict(d["action"])
        step.call = ToolCall.from_dict(d["call"]) if d.get("call") else None
        return step


@dataclass
class Rehearsal:
    """One imagined trajectory: actor and rehearser only, no real calls."""

    index: int
    steps: list[Step] = field(default_factory=list)
    final_answer: str | None = None
    ended: str = ""  # why it ended: "answer", "error", "max_steps", ...

    def to_dict(self) -> dict:
        return {
            "index": self.index,
            "steps": [s.to_dict() for s in self.steps],
            "final_answer": self.final_answer,
            "ended": self.ended,
        }

    @classmethod
    def from_dict(cls, d: dict) -> "Rehearsal":
        return cls(
            index=d["index"],
            steps=[Step.from_dict(s) for s in d.get("steps", [])],
            final_answer=d.get("final_answer"),
            ended=d.get("ended", ""),
        )


@dataclass
class Trajectory:
    """The record of one episode; ``to_dict()`` is the export format.

    Top-level keys: ``mode``, ``model``, ``tools``, ``rehearsals``, ``memory``,
    ``steps`` (the committed steps), ``final_answer``, ``success``, then context:
    ``prompt``, ``environment``, ``task``, ``n``, ``seed``, ``sampling``,
    ``ended`` (why the episode stopped), ``check_reasons``, ``fidelity`` (mean over
    committed steps), ``totals`` and ``version``.
    """

    mode: str
    model: dict
    tools: list[dict]
    prompt: str
    environment: str | None = None
    task: str | None = None
    n: int = 0
    seed: int | None = None
    sampling: dict = field(default_factory=dict)
    rehearsals: list[Rehearsal] = field(default_factory=list)
    memory: dict | None = None
    steps: list[Step] = field(default_factory=list)
    final_answer: str | None = None
    success: bool | None = None
    check_reasons: list[str] = field(default_factory=list)
    ended: str = ""
    fidelity: float | None = None
    seconds: float = 0.0
    final_state: dict | None = None

    def committed_calls(self) -> list[ToolCall]:
        return [s.call for s in self.steps if s.call is not None]

    def totals(self) -> dict:
        imagined = [s for r in self.rehearsals for s in r.steps]
        every = imagined + self.steps
        tokens = 0
        counted: set[int] = set()
        for s in every:  # calls of one turn share an action: count its tokens once
            if id(s.action) not in counted:
                counted.add(id(s.action))
                tokens += s.act_tokens
            tokens += s.rehearse_tokens
        real_errors = sum(1 for s in self.steps if s.call and _is_error(s.real))
        return {
            "real_calls": sum(1 for s in self.steps if s.call and s.real is not None),
            "real_errors": real_errors,
            "imagined_calls": sum(1 for s in imagined if s.call),
            "tokens": tokens,
            "seconds": round(self.seconds, 3),
        }

    def to_dict(self) -> dict:
        return {
            "version": 1,
            "mode": self.mode,
            "model": self.model,
            "tools": self.tools,
            "rehearsals": [r.to_dict() for r in self.rehearsals],
            "memory": self.memory,
            "steps": [s.to_dict() for s in self.steps],
            "final_answer": self.final_answer,
            "success": self.success,
            "check_reasons": self.check_reasons,
            "prompt": self.prompt,
            "environment": self.environment,
            "task": self.task,
            "n": self.n,
            "seed": self.seed,
            "sampling": self.sampling,
            "ended": self.ended,
            "fidelity": self.fidelity,
            "seconds": round(self.seconds, 3),
            "final_state": self.final_state,
            "totals": self.totals(),
        }

    @classmethod
    def from_dict(cls, d: dict) -> "Trajectory":
        traj = _plain(cls, {k: v for k, v in d.items() if k not in ("rehearsals", "steps")})
        traj.rehearsals = [Rehearsal.from_dict(r) for r in d.get("rehearsals", [])]
        traj.steps = [Step.from_dict(s) for s in d.get("steps", [])]
        return traj


def _is_error(result: Any) -> bool:
    return isinstance(result, dict) and ("error" in result or "error_tool_call" in result)
