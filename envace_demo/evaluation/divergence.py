"""What rehearsal changed: where a run with rehearsal first parts from the run without it.

Two runs of the same task and seed, one in mode ``none`` and one in a rehearsing mode,
are walked call by committed call (``record.call_steps``; a held call counts: it was
committed, then held). The first point where they part, and why, is a ``Divergence``:

- ``failure_avoided``: the run with rehearsal held a call because its rehearsal predicted a
  failure, or the run without rehearsal made a real call that failed where the run with
  rehearsal made another call (one that did not fail) or none;
- ``different_call``: another tool, or the same tool with other arguments (or one run made
  a call where the other had stopped calling);
- ``rehearsed_value``: the same calls, and the answer with rehearsal carries values that only
  its rehearsals had (``Trajectory.ungrounded``);
- ``answer``: the same calls, different final answers;
- ``nothing``: the same calls and the same answer.

``verdict`` sets the two checks side by side: ``helped`` (only the run with rehearsal
succeeded), ``hurt`` (only the run without it), ``same`` (both, neither, or unknown).

Both a ``Trajectory`` and an eval episode row (``table.episode_record``, which carries
``call_outcomes`` for this) can be compared, so the eval summary pairs episodes from
``results.jsonl`` alone. No gradio here.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, Iterable

from envace_demo.record import Trajectory, is_error

KINDS = ("failure_avoided", "different_call", "rehearsed_value", "answer", "nothing")
VERDICTS = ("helped", "hurt", "same")
BASELINE = "none"
REHEARSING = ("parallel", "sequential")

_SHORT = 80  # characters of arguments or an answer quoted in a detail


@dataclass(frozen=True)
class Divergence:
    """Where two runs of one task and seed first part. ``step``: the index (from 0) of the
    committed call where they part; None when the calls were the same throughout."""

    kind: str
    step: int | None
    detail: str
    verdict: str

    def to_dict(self) -> dict:
        return asdict(self)


# ---- one run, as the comparison sees it ---------------------------------------------------------


def error_code(result: Any) -> str | None:
    """The code of a failure (``{"error": {"code": ...}}``, the contract's ``error_tool_call``,
    or an error given as a bare string); None when ``result`` is not a failure."""
    if not is_error(result):
        return None
    inner = result.get("error_tool_call", result.get("error"))
    if isinstance(inner, dict) and isinstance(inner.get("code"), (str, int)) and str(inner["code"]):
        return str(inner["code"])[:_SHORT]
    if isinstance(inner, str) and inner.strip():
        return inner.strip()[:_SHORT]
    return "an error"


def call_outcomes(traj: Trajectory) -> list[dict]:
    """Each committed call as the pairing needs it (JSON): ``name``, ``arguments``, ``held``,
    ``predicted_error`` (the code its rehearsal foresaw, where it foresaw a failure),
    ``ran`` (executed for real), ``real_error`` (the code of a real failure) and
    ``from_rehearsal`` (its action was the lead imagined run's, taken as it was)."""
    out = []
    for turn, step in ((t, s) for t in traj.turns for s in t.calls):
        out.append({
            "name": step.call.name,
            "arguments": step.call.arguments,
            "held": bool(step.held),
            "checked": bool(step.checked),
            "predicted_error": error_code(step.rehearsed),
            "ran": step.real is not None,
            "real_error": error_code(step.real),
            "from_rehearsal": turn.action_from is not None,
        })
    return out


@dataclass
class _Run:
    steps: list[dict]
    answer: str | None
    ungrounded: list[str]
    success: bool | None
    ended: str
    withdrawn: int


def _run(x: Trajectory | dict) -> _Run:
    if isinstance(x, Trajectory):
        return _Run(call_outcomes(x), x.final_answer, [str(v) for v in x.ungrounded], x.success, x.ended,
                    sum(1 for t in x.turns if t.withdrawn))
    if not isinstance(x, dict) or not isinstance(x.get("call_outcomes"), list):
        raise ValueError("an episode row without call_outcomes (made before divergences were recorded)")
    return _Run(x["call_outcomes"], x.get("final_answer"), [str(v) for v in x.get("ungrounded") or []],
                x.get("success"), x.get("ended") or "", int(x.get("withdrawn_answers") or 0))


# ---- the comparison -----------------------------------------------------------------------------


def _args(arguments: Any) -> str:
    text = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= _SHORT else text[: _SHORT - 1] + "…"


def _call(step: dict) -> str:
    return f"{step['name']} {_args(step['arguments'])}"


def _same_call(a: dict, b: dict) -> bool:
    return a["name"] == b["name"] and a["arguments"] == b["arguments"]


def _quote(answer: str | None, ended: str) -> str:
    if answer is None or not answer.strip():
        return f"no answer (ended: {ended or 'unknown'})"
    text = " ".join(answer.split())
    return json.dumps(text if len(text) <= _SHORT else text[: _SHORT - 1] + "…", ensure_ascii=False)


def verdict_of(without: bool | None, with_: bool | None) -> str:
    """``helped`` when only the run with rehearsal succeeded, ``hurt`` when only the one
    without did, else ``same`` (both, neither, or a success unknown)."""
    if with_ is True and without is False:
        return "helped"
    if without is True and with_ is False:
        return "hurt"
    return "same"


def _parted(i: int, x: dict | None, y: dict | None) -> tuple[str, str]:
    """(kind, detail) where the run without rehearsal made ``x`` and the one with it ``y``
    as their committed call ``i`` (None: no such call) and they are not the same."""
    at = f"at call {i + 1}"
    if y is not None and y["held"]:
        foresaw = f"{at} rehearsal foresaw {y['predicted_error'] or 'a failure'} and held {_call(y)}"
        if x is None:
            return "failure_avoided", f"{foresaw}; without rehearsal the run had stopped calling"
        if _same_call(x, y):
            if x.get("real_error"):
                return "failure_avoided", f"{foresaw}; without rehearsal that call ran and failed with {x['real_error']}"
            if x.get("ran"):
                return "failure_avoided", f"{foresaw}, a call that succeeded without rehearsal"
            return "failure_avoided", f"{foresaw}; without rehearsal that call was not executed"
        failed = f" and it failed with {x['real_error']}" if x.get("real_error") else ""
        return "failure_avoided", f"{foresaw}; without rehearsal the run made {_call(x)}{failed}"
    if x is not None and x.get("real_error") and (y is None or (not _same_call(x, y) and not y.get("real_error"))):
        instead = f"made {_call(y)} instead" if y is not None else "made no such call"
        return "failure_avoided", (
            f"{at} the run without rehearsal made {_call(x)} and it failed with {x['real_error']}; "
            f"with rehearsal the run {instead}"
        )
    if x is None or y is None:
        made = x if x is not None else y
        side, other = ("without", "with") if x is not None else ("with", "without")
        tested = y is not None and y.get("from_rehearsal") and not y.get("predicted_error")
        tested = ", the call its rehearsal had made and let through" if tested else ""
        return "different_call", (f"{at} the run {side} rehearsal made {_call(made)}{tested}; "
                                  f"the run {other} it had stopped calling")
    if x["name"] == y["name"] and x["arguments"] != y["arguments"]:
        return "different_call", (
            f"{at} both called {x['name']} with different arguments: {_args(x['arguments'])} without rehearsal, "
            f"{_args(y['arguments'])} with it"
        )
    if x["name"] != y["name"]:
        return "different_call", f"{at} the runs called different tools: {_call(x)} without rehearsal, {_call(y)} with it"
    held = "with" if y["held"] else "without"
    return "different_call", f"{at} both made {_call(x)}, but only the run {held} rehearsal held it"


def first_divergence(without: Trajectory | dict, with_: Trajectory | dict) -> Divergence:
    """Where ``with_`` (rehearsal) first parts from ``without`` (no rehearsal), two runs of
    one task and seed; each may be a ``Trajectory`` or an eval episode row. ValueError for
    a row that lacks ``call_outcomes``."""
    a, b = _run(without), _run(with_)
    verdict = verdict_of(a.success, b.success)
    for i in range(max(len(a.steps), len(b.steps))):
        x = a.steps[i] if i < len(a.steps) else None
        y = b.steps[i] if i < len(b.steps) else None
        if x is not None and y is not None and _same_call(x, y) and bool(x["held"]) == bool(y["held"]):
            continue
        if y is None and b.ended not in ("answer", "max_steps", "max_new_tokens"):
            # The run with rehearsal stopped calling because it was stopped (its time ran out,
            # a parse error): no failure was foreseen, whatever the other run did.
            made = f"made {_call(x)}" if x is not None else "went on"
            return Divergence("different_call", i, (
                f"at call {i + 1} the run with rehearsal had ended ({b.ended}) while the run without it {made}"
            ), verdict)
        kind, detail = _parted(i, x, y)
        return Divergence(kind, i, detail, verdict)
    calls = f"the same {len(a.steps)} call{'s' if len(a.steps) != 1 else ''}"
    withdrawn = "; an answer was taken back first" if b.withdrawn else ""
    same_answer = (a.answer or "").strip() == (b.answer or "").strip()
    if b.ungrounded:
        values = ", ".join(json.dumps(v, ensure_ascii=False) for v in b.ungrounded[:4])
        more = f" and {len(b.ungrounded) - 4} more" if len(b.ungrounded) > 4 else ""
        also = " (the answer without rehearsal says the same)" if same_answer else ""
        return Divergence("rehearsed_value", None, (
            f"{calls}, but the answer with rehearsal states {values}{more}, which only its rehearsals had{also}"
        ), verdict)
    if not same_answer:
        return Divergence("answer", None, (
            f"{calls}, different answers: {_quote(a.answer, a.ended)} without rehearsal, "
            f"{_quote(b.answer, b.ended)} with it{withdrawn}"
        ), verdict)
    checked = next((s for s in b.steps if s.get("checked")), None)
    also = (f"; with rehearsal {_call(checked)} was held on a foreseen failure, then run for real once no "
            "other path was found") if checked else ""
    return Divergence("nothing", None, f"{calls} and the same answer{withdrawn}{also}", verdict)


_LEADS = {"helped": "Rehearsal helped", "hurt": "Rehearsal hurt", "same": "Same outcome"}


def describe(d: Divergence) -> str:
    """One line for the UI, e.g. ``Rehearsal helped: at call 1 rehearsal foresaw
    INSUFFICIENT_FUNDS and held withdraw {...}; without rehearsal that call ran and failed
    with INSUFFICIENT_FUNDS.``"""
    lead = "No difference" if d.kind == "nothing" and d.verdict == "same" else _LEADS.get(d.verdict, "Same outcome")
    return f"{lead}: {d.detail}."


def pair_note(trajectories: Iterable[Trajectory]) -> str | None:
    """``describe`` of the first divergence when ``trajectories`` are exactly one run
    without rehearsal and one with it (a rehearsing mode); None for any other pair (base
    against trained in one mode, a side that did not finish)."""
    runs = list(trajectories)
    if len(runs) != 2:
        return None
    without = [t for t in runs if t.mode == BASELINE]
    with_ = [t for t in runs if t.mode in REHEARSING]
    if len(without) != 1 or len(with_) != 1:
        return None
    return describe(first_divergence(without[0], with_[0]))
