"""The trajectory record: one JSON-native data model shared by the engine, UI,
charts, export and training.

The dataclasses below are its one description: the export format (``to_dict``),
loading (``from_dict``, ``load_trajectory``) and its JSON Schema (``record_schema``)
all follow from them through pydantic. See docs/record.md.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator

from pydantic import TypeAdapter, ValidationError

from envace_demo.errors import EnvaceError
from envace_demo.strict_json import refuse_constant

JSON = Any  # a value that json.dumps accepts


@dataclass
class ToolCall:
    """One parsed call: ``name`` is the name the model used (API-safe form)."""

    name: str
    arguments: dict[str, JSON]

    def to_dict(self) -> dict:
        return asdict(self)

    def key(self) -> str:
        """The call as one string, equal for equal calls (a held call, a rehearsal asked again)."""
        return json.dumps(self.to_dict(), sort_keys=True, default=str)


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
    # Arguments put back as the user's request spells them (``verbatim.as_dictated``).
    restored: list[str] = field(default_factory=list)


@dataclass
class CallStep:
    """One call of a turn: checked against its schema, rehearsed (where the mode
    rehearses) and executed (in a committed run with an environment).

    In a committed run ``rehearsed`` is the model's prediction and ``real`` the
    environment's response; in an imagined run only ``rehearsed`` is set, or only ``real``
    for a read fetched while its world was still the real one (``fetched``). Where the
    engine is certain (a call that failed validation, or a failure met again with nothing
    changed since: ``validation.py``) it writes ``rehearsed`` itself and
    ``rehearsal_text`` stays None."""

    call: ToolCall
    valid: bool | None = None  # arguments validate against the schema
    validation_errors: list[str] = field(default_factory=list)
    rehearsed: JSON = None
    rehearsal_text: str | None = None  # the rehearser's raw output
    # The deciding facts the engine stated as the start of that output, from the reads in
    # the rehearser's context (``facts.stated_facts``); the rest is the rehearser's own.
    stated_facts: str | None = None
    real: JSON = None
    fidelity: float | None = None
    error: str | None = None  # why the call has no (or a failed) response
    rehearse_seconds: float = 0.0
    execute_seconds: float = 0.0
    rehearse_tokens: int = 0
    rehearser_prompt: str | None = None  # the rendered prompt, when the model was asked
    # The rehearsal was cut short by the time (the rehearsals' share ran out, or a committed
    # call's rehearsal gave way to the real call): no prediction, and no fidelity.
    rehearsal_cut: bool = False
    # The committed call's prediction is the one rehearsal k made for the same call in the
    # same rehearser prompt (byte for byte): the model is not asked twice the same question.
    rehearsal_from: int | None = None
    # A committed call asked again with no real call since (after its hold): its prediction
    # is the one the same call had, in the same world, and the rehearser is not asked again.
    repeats_hold: bool = False
    # The real call went to a tool that changes state (the environment declares which);
    # None: not executed, or the environment does not say.
    write: bool | None = None
    # A write on a request that asks only to read (``writes.unrequested_write``).
    unrequested_write: bool = False
    # Held: the rehearsal predicted a failure, so the call was not executed; the actor was
    # shown the prediction instead (``real`` stays None). The same call asked again runs.
    held: bool = False
    # Its rehearsal predicted a failure less surely than ``EpisodeConfig.hold_certainty``:
    # not held, run for real at once, as it would have without rehearsal.
    unsure: bool = False
    # Its rehearsal predicted a failure whose message asks for an argument the call already
    # passes ("pass overwrite=true" where it did): a prediction at odds with its own call is
    # no failure foreseen, so the call is not held (``engine/commit.py``, ``contradicts_call``).
    self_contradicted: bool = False
    # Its rehearsal predicted a failure where the facts the engine stated from real reads
    # (``stated_facts``) show a rule the call breaks ("amount 1200 vs left today 1000.0:
    # over"): held and trusted at any certainty (``facts.breaks_rule``).
    ruled: bool = False
    # Held, then run for real: the actor answered without another path (no real write
    # since the hold), so the prediction was checked (``EpisodeConfig.check_given_up``).
    checked: bool = False
    # Held, and never run: the actor answered without another path and the rehearser was
    # sure enough of the failure to trust (``EpisodeConfig.trust_certainty``).
    trusted: bool = False
    # The probability the rehearser gave its predicted outcome where it chose it
    # (``certainty.py``); None where the model was not asked or its decoder did not say.
    certainty: float | None = None
    # An imagined run's call of a read-only tool, made while its world was still the real
    # one: fetched for real instead of rehearsed (``real`` holds it; ``EpisodeConfig.imagined_reads``).
    fetched: bool = False
    # The real reads the engine made for the rehearser before it predicted this call
    # (``Environment.context_reads``): [{"call": {name, arguments}, "result": ...}].
    context: list[dict[str, JSON]] = field(default_factory=list)
    # The fidelity's parts (``fidelity.score``): the outcome (success, or which error) right,
    # and the share of the real values right among those the rehearser's context made
    # knowable and among the rest. None where there is nothing to compare.
    outcome_right: bool | None = None
    knowable: float | None = None
    unknowable: float | None = None


@dataclass
class Turn:
    """One actor turn: its action, the generation's timing and token usage, and the
    calls it made, in order. A turn without calls is the final answer, or a turn that
    failed (``error``: the output did not parse, or the answer was cut)."""

    index: int
    action: Action
    calls: list[CallStep] = field(default_factory=list)
    user_turn: int = 0  # which of the conversation's user messages this turn answers
    error: str | None = None
    act_seconds: float = 0.0
    act_tokens: int = 0
    prompt_tokens: int = 0
    actor_prompt: str | None = None  # the rendered prompt
    # An answer taken back: it carried values only rehearsals had (``grounding.py``); the
    # actor answered again from the real results alone.
    withdrawn: str | None = None
    # An answer set aside: given while a held call had found no other path (the held calls
    # then ran for real), from the memory alone (then dropped; ``EpisodeConfig.check_given_up``),
    # or worded with the memory in view (``EpisodeConfig.answer_without_memory``); the actor
    # answered again.
    set_aside: str | None = None
    # A committed turn whose action is rehearsal k's at the same turn: the same prompt (the
    # committed actor read nothing from the rehearsals) and the seed it would have drawn,
    # so asking again would only have repeated it (``engine/acting.py``).
    action_from: int | None = None
    # A held turn left out of the actor's history from there on (``verdict.py``): a real run of
    # the same call contradicted its foreseen failure, or its writes, foreseen to fail, were
    # ones the request (a question) never asked for.
    superseded: str | None = None
    # A committed turn whose action is another path the rehearsal found for a held call
    # (``engine/repair.py``): what the plan is.
    repaired: str | None = None
    # A committed turn the engine made in the actor's place after a read refused as the wrong
    # kind of thing (``engine/instead.py``): the read that fits, or the actor's pick of a file
    # among those it listed. What it is.
    instead: str | None = None
    # A final answer that, asked twice, left out that the last call failed
    # (``acknowledgment.py``): the actor's words, kept here; the engine's report of the
    # failure stood in their place (``action.content``).
    reported: str | None = None
    # A final answer that ended on a real result's text cut short (``engine/quotes.py``): the
    # actor's words, kept here; the answer (``action.content``) has the rest of the text.
    completed: str | None = None
    # A final answer that, asked twice, still told none of what the real reads held of the
    # question (``engine/asked.py``), or told a write failed but not why (``engine/told.py``):
    # the actor's words, kept here; the answer (``action.content``) has those values, or the
    # tool's failure, added after them.
    added: str | None = None

    def read(self) -> bool:
        """Whether the actor's later turns read this turn: not an answer taken back, not a
        held turn a real result contradicted."""
        return not self.withdrawn and not self.superseded

    def tokens(self) -> int:
        """New tokens this turn generated: the action and its rehearsals."""
        return self.act_tokens + sum(c.rehearse_tokens for c in self.calls)


def call_steps(turns: list[Turn]) -> list[CallStep]:
    """Every call of ``turns``, in order."""
    return [c for t in turns for c in t.calls]


def rows(turns: list[Turn]) -> Iterator[tuple[Turn, CallStep | None]]:
    """A trajectory as it reads: one row per call, and one for a turn without calls."""
    for turn in turns:
        if not turn.calls:
            yield turn, None
        for call in turn.calls:
            yield turn, call


@dataclass
class Rehearsal:
    """One imagined trajectory: actor and rehearser only, no real calls."""

    index: int
    turns: list[Turn] = field(default_factory=list)
    final_answer: str | None = None
    ended: str = ""  # why it ended: "answer", "error", "max_steps", ...
    # Cut short when the rehearsals' share of the time ran out; what it reached still
    # feeds the memory.
    cut: bool = False
    user_turn: int = 0  # the user message it rehearsed (each is rehearsed before it is committed)


VERSION = 3


@dataclass
class Trajectory:
    """The record of one episode; ``to_dict()`` is the export format.

    ``turns`` is the committed run, ``rehearsals`` the imagined ones; then context:
    ``prompt``, ``environment``, ``task``, ``n``, ``seed``, ``sampling``, ``ended``
    (why the episode stopped), ``check_reasons``, ``fidelity`` (mean over committed
    calls). The export adds ``version`` and ``totals``.
    """

    mode: str
    model: dict[str, JSON]
    tools: list[dict[str, JSON]]
    prompt: str  # the user's first message
    follow_ups: list[str] = field(default_factory=list)  # the user's later messages, in order
    environment: str | None = None
    task: str | None = None
    n: int = 0
    seed: int | None = None
    sampling: dict[str, JSON] = field(default_factory=dict)
    rehearsals: list[Rehearsal] = field(default_factory=list)
    memory: dict[str, JSON] | None = None
    turns: list[Turn] = field(default_factory=list)
    final_answer: str | None = None
    success: bool | None = None
    check_reasons: list[str] = field(default_factory=list)
    ended: str = ""
    fidelity: float | None = None
    seconds: float = 0.0
    # Before the episode: the run's wait in the app's queue (None: it did not queue).
    queued_seconds: float | None = None
    final_state: dict[str, JSON] | None = None
    # The committed run's answer to each user message (None where a turn ended without one).
    answers: list[str | None] = field(default_factory=list)
    # Values of an answer that only rehearsals had (no real result, no request, no
    # call's arguments): a rehearsed value told to the user as if it were real.
    ungrounded: list[str] = field(default_factory=list)

    def committed_calls(self) -> list[ToolCall]:
        return [c.call for c in call_steps(self.turns)]

    def totals(self) -> dict:
        imagined = [t for r in self.rehearsals for t in r.turns]
        committed = call_steps(self.turns)
        return {
            "real_calls": sum(1 for c in committed if c.real is not None),
            "real_errors": sum(1 for c in committed if is_error(c.real)),
            "held_calls": sum(1 for c in committed if c.held),
            "checked_calls": sum(1 for c in committed if c.checked),
            "trusted_calls": sum(1 for c in committed if c.trusted),
            "unsure_calls": sum(1 for c in committed if c.unsure),
            # Committed calls that are steps of another path the rehearsal found for a held call.
            "repaired_calls": sum(len(t.calls) for t in self.turns if t.repaired),
            "context_reads": sum(len(c.context) for c in committed),
            "imagined_calls": len(call_steps(imagined)),
            "fetched_reads": sum(1 for c in call_steps(imagined) if c.fetched),
            "tokens": sum(t.tokens() for t in imagined + self.turns),
            "seconds": round(self.seconds, 3),
        }

    def to_dict(self) -> dict:
        data = _ADAPTER.dump_python(self, mode="json")
        data["seconds"] = round(self.seconds, 3)
        if self.queued_seconds is not None:
            data["queued_seconds"] = round(self.queued_seconds, 3)
        return {"version": VERSION, **data, "totals": self.totals()}

    @classmethod
    def from_dict(cls, d: dict) -> "Trajectory":
        """A record this program made (any version); outside records go through ``load_trajectory``."""
        return _ADAPTER.validate_python(upgrade(d))


def is_error(result: Any) -> bool:
    """A failure, in the environments' or the contract's form."""
    return isinstance(result, dict) and ("error" in result or "error_tool_call" in result)


def error_code(result: Any) -> str:
    """The code of a failure in the environments' or the contract's form ("error" if none)."""
    err = result.get("error", result.get("error_tool_call")) if isinstance(result, dict) else None
    code = err.get("code") if isinstance(err, dict) else None
    return str(code) if code else "error"


def rehearsal_failed(value: Any) -> bool:
    """Whether ``value`` is the engine's note that a rehearsal did not parse (cut by its
    budget, or not JSON): it predicted nothing, so it holds nothing and foresees nothing."""
    err = value.get("error") if isinstance(value, dict) else None
    return isinstance(err, dict) and err.get("code") == "REHEARSAL_FAILED"


_ADAPTER = TypeAdapter(Trajectory)


def record_schema() -> dict:
    """The JSON Schema of an exported record (version 3), derived from the dataclasses."""
    schema = _ADAPTER.json_schema(mode="serialization")
    schema["properties"] = {
        "version": {"const": VERSION},
        **schema["properties"],
        "totals": {"type": "object", "description": "derived on export; ignored on load"},
    }
    return schema


# ---- older exports ----------------------------------------------------------------------------


def upgrade(data: Any) -> Any:
    """An older record in today's shape: version 1 (one step per call, each with a copy of
    its turn's action) as turns holding their calls; versions 1 and 2 (one user message)
    as a conversation of one turn, its answer the final one. Other data is returned as is,
    for validation to judge."""
    if not isinstance(data, dict) or data.get("version", 1) not in (1, 2):
        return data
    if data.get("version", 1) == 2:
        return _one_turn(data)
    return _one_turn(_version_1(data))


def _one_turn(data: dict) -> dict:
    out = {k: v for k, v in data.items() if k != "version"}
    out.setdefault("answers", [data.get("final_answer")] if data.get("turns") else [])
    return out


def _version_1(data: dict) -> dict:
    out = {k: v for k, v in data.items() if k not in ("steps", "version")}
    out["turns"] = _turns_of(data.get("steps", []))
    rehearsals = data.get("rehearsals", [])
    if isinstance(rehearsals, list):
        out["rehearsals"] = [
            {**{k: v for k, v in r.items() if k != "steps"}, "turns": _turns_of(r.get("steps", []))}
            if isinstance(r, dict)
            else r
            for r in rehearsals
        ]
    return out


_CALL_KEYS = ("valid", "validation_errors", "rehearsed", "rehearsal_text", "real", "fidelity", "error",
              "rehearse_seconds", "execute_seconds", "rehearse_tokens")
_TURN_KEYS = ("action", "act_seconds", "act_tokens", "prompt_tokens")


def _turns_of(steps: Any) -> Any:
    if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
        return steps
    turns: list[dict] = []
    for step in steps:
        prompts = step.get("prompts") if isinstance(step.get("prompts"), dict) else {}
        if not turns or not step.get("call") or not step.get("call_index"):  # a new turn
            turn = {k: step[k] for k in _TURN_KEYS if k in step}
            turn.update(index=len(turns), calls=[], actor_prompt=prompts.get("actor"))
            turns.append(turn)
        if step.get("call"):
            call = {k: step[k] for k in _CALL_KEYS if k in step}
            call.update(call=step["call"], rehearser_prompt=prompts.get("rehearser"))
            turns[-1]["calls"].append(call)
        else:
            turns[-1]["error"] = step.get("error")
    return turns


# ---- loading a record that came from outside (a file, an upload) --------------------------


class TrajectoryError(EnvaceError):
    """A trajectory record is not one: the message names the location and the problem."""


MAX_RECORD_BYTES = 64_000_000

def load_trajectory(source: str | bytes | dict, max_bytes: int = MAX_RECORD_BYTES) -> Trajectory:
    """A ``Trajectory`` from an exported record (JSON text or its parsed dict), version 1
    or 2. Anything wrong raises ``TrajectoryError`` naming where, e.g.
    ``record.turns[0].calls[0].call.name: Input should be a valid string``. NaN and
    Infinity are refused: the export is strict JSON."""
    data: Any = source
    if isinstance(source, (str, bytes)):
        if len(source) > max_bytes:
            raise TrajectoryError(f"record: {len(source)} bytes, at most {max_bytes}")
        try:
            data = json.loads(source, parse_constant=refuse_constant)
        except (ValueError, UnicodeDecodeError) as err:
            raise TrajectoryError(f"record: not JSON ({err})") from None
        except RecursionError:
            raise TrajectoryError("record: nested too deeply") from None
    if not isinstance(data, dict):
        raise TrajectoryError(f"record: expected a JSON object, got {type(data).__name__}")
    version = data.get("version", 1)
    if type(version) is not int or version not in (1, 2, VERSION):
        raise TrajectoryError(f"record.version: {version!r} is not a version this program reads (1 to {VERSION})")
    try:
        return _ADAPTER.validate_python(upgrade(data))
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        where = "record" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
        raise TrajectoryError(f"{where}: {first['msg']}") from None
    except RecursionError:
        raise TrajectoryError("record: nested too deeply") from None
