"""The trajectory record: one JSON-native data model shared by the engine, UI,
charts, export and training.

Every dataclass here converts with ``to_dict()`` / ``from_dict()``; the dict form
is the documented export format (see README, "Trajectory record").
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from functools import lru_cache
from typing import Any

from envace_demo.errors import EnvaceError

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


# ---- loading a record that came from outside (a file, an upload) --------------------------


class TrajectoryError(EnvaceError):
    """A trajectory record is not one: the message names the location and the problem."""


MAX_RECORD_BYTES = 64_000_000

_STR, _INT, _NUM, _BOOL = {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}


def _opt(schema: dict) -> dict:
    return {"anyOf": [{"type": "null"}, schema]}


def _record_schema() -> dict:
    """What ``from_dict`` relies on: every field it reads, typed; other keys pass."""
    call = {
        "type": "object",
        "required": ["name"],
        "properties": {"name": _STR, "arguments": _opt({"type": "object"})},
    }
    action = {
        "type": "object",
        "properties": {
            "text": _STR,
            "thinking": _STR,
            "content": _STR,
            "calls": {"type": "array", "items": call},
            "error": _opt(_STR),
            "error_message": _opt(_STR),
        },
    }
    counts = {k: _INT for k in ("index", "call_index", "act_tokens", "rehearse_tokens", "prompt_tokens")}
    timings = {k: _NUM for k in ("act_seconds", "rehearse_seconds", "execute_seconds")}
    step = {
        "type": "object",
        "required": ["index", "action"],
        "properties": {
            **counts,
            **timings,
            "action": action,
            "call": _opt(call),
            "valid": _opt(_BOOL),
            "validation_errors": {"type": "array", "items": _STR},
            "rehearsal_text": _opt(_STR),
            "fidelity": _opt(_NUM),
            "error": _opt(_STR),
            "prompts": {"type": "object", "additionalProperties": _STR},
        },
    }
    steps = {"type": "array", "items": step}
    rehearsal = {
        "type": "object",
        "required": ["index"],
        "properties": {"index": _INT, "steps": steps, "final_answer": _opt(_STR), "ended": _STR},
    }
    return {
        "type": "object",
        "required": ["mode", "model", "tools", "prompt"],
        "properties": {
            "version": {"const": 1},
            "mode": _STR,
            "model": {"type": "object"},
            "tools": {"type": "array", "items": {"type": "object"}},
            "prompt": _STR,
            "environment": _opt(_STR),
            "task": _opt(_STR),
            "n": _INT,
            "seed": _opt(_INT),
            "sampling": {"type": "object"},
            "rehearsals": {"type": "array", "items": rehearsal},
            "memory": _opt({"type": "object"}),
            "steps": steps,
            "final_answer": _opt(_STR),
            "success": _opt(_BOOL),
            "check_reasons": {"type": "array", "items": _STR},
            "ended": _STR,
            "fidelity": _opt(_NUM),
            "seconds": _NUM,
            "final_state": _opt({"type": "object"}),
        },
    }


@lru_cache(maxsize=1)
def _record_validator():
    from jsonschema import Draft202012Validator

    return Draft202012Validator(_record_schema())


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def load_trajectory(source: str | bytes | dict, max_bytes: int = MAX_RECORD_BYTES) -> Trajectory:
    """A ``Trajectory`` from an exported record (JSON text or its parsed dict).

    Unlike ``Trajectory.from_dict`` (for records this program just made), anything
    wrong raises ``TrajectoryError`` naming where, e.g. ``record.steps[0].call.name:
    3 is not of type 'string'``. NaN and Infinity are refused: the export is strict JSON.
    """
    from jsonschema.exceptions import best_match

    data: Any = source
    if isinstance(source, (str, bytes)):
        if len(source) > max_bytes:
            raise TrajectoryError(f"record: {len(source)} bytes, at most {max_bytes}")
        try:
            data = json.loads(source, parse_constant=_no_constant)
        except (ValueError, UnicodeDecodeError) as err:
            raise TrajectoryError(f"record: not JSON ({err})") from None
        except RecursionError:
            raise TrajectoryError("record: nested too deeply") from None
    elif not isinstance(source, dict):
        raise TrajectoryError(f"record: expected JSON text or an object, got {type(source).__name__}")
    try:
        error = best_match(_record_validator().iter_errors(data))
    except RecursionError:
        raise TrajectoryError("record: nested too deeply") from None
    if error is not None:
        where = "record" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
        raise TrajectoryError(f"{where}: {error.message}")
    return Trajectory.from_dict(data)
