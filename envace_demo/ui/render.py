"""Engine events and trajectory records -> what the page shows. Pure functions, no gradio.

Chatbot messages are plain ``{"role", "content", "metadata"}`` dicts (Gradio 6's
message format); everything else is HTML. Model text is always escaped: it may
contain anything, ``<tool_call>`` tags included.
"""

from __future__ import annotations

import html
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from envace_demo.budget import Speed
from envace_demo.errors import SchemaError
from envace_demo.events import (
    EpisodeFinished,
    EpisodeStarted,
    Event,
    Generating,
    MemoryReady,
    RehearsalFinished,
    TurnUpdated,
    UserTurnStarted,
)
from envace_demo.record import CallStep, Rehearsal, Trajectory, Turn, call_steps, is_error, rows
from envace_demo.schemas import Tool
from envace_demo.validation import decided_by

_LIVE_CHARS = 1200  # streaming text shown: the tail, enough to follow along
_SHORT_JSON = 220  # condensed views cut JSON here


# ---- accumulating events ---------------------------------------------------------


@dataclass
class LiveView:
    """What an episode has shown so far, built from its events alone.

    It does not rely on the engine mutating shared objects, so it works as well when
    the events were pickled across processes (ZeroGPU).
    """

    trajectory: Trajectory | None = None
    # (where, rehearsal index) -> latest streaming text.
    live: dict[tuple[str, int | None], Generating] = field(default_factory=dict)
    finished: bool = False
    started: float = 0.0  # time.monotonic() at EpisodeStarted
    user_turn: int = 0  # the user message being answered (UserTurnStarted)
    # A follow-up's conversation so far: shown from the start (its episode's first record
    # holds none of it where the events were pickled).
    before: Trajectory | None = None

    def apply(self, event: Event) -> None:
        if isinstance(event, EpisodeStarted):
            self.trajectory = event.trajectory
            self.started = time.monotonic()
            if self.before is not None and not self.trajectory.turns:
                earlier = Trajectory.from_dict(self.before.to_dict())
                self.trajectory.turns, self.trajectory.rehearsals = earlier.turns, earlier.rehearsals
                self.trajectory.answers = earlier.answers
        elif isinstance(event, UserTurnStarted):
            self.user_turn = event.index
        elif isinstance(event, EpisodeFinished):
            self.trajectory, self.finished = event.trajectory, True
            self.live.clear()
        elif self.trajectory is None:
            raise ValueError(f"{type(event).__name__} before EpisodeStarted")
        elif isinstance(event, Generating):
            target = None if event.where == "commit" else (event.rehearsal or 0)
            self.live[(event.where, target)] = event
        elif isinstance(event, TurnUpdated):
            turns = (
                self.trajectory.turns
                if event.where == "commit"
                else self._rehearsal(event.rehearsal or 0).turns
            )
            _place(turns, event.turn.index, event.turn)
            self.live.clear()
        elif isinstance(event, RehearsalFinished):
            _place(self.trajectory.rehearsals, event.rehearsal.index, event.rehearsal)
            self.live.clear()
        elif isinstance(event, MemoryReady):
            self.trajectory.memory = event.memory
            self.live.clear()

    def _rehearsal(self, index: int) -> Rehearsal:
        assert self.trajectory is not None
        while len(self.trajectory.rehearsals) <= index:
            self.trajectory.rehearsals.append(Rehearsal(index=len(self.trajectory.rehearsals)))
        return self.trajectory.rehearsals[index]

    def live_for(self, where: str, rehearsal: int | None) -> Generating | None:
        return self.live.get((where, rehearsal))

    def tokens(self) -> int:
        """New tokens of every finished generation so far (imagined and committed)."""
        traj = self.trajectory
        if traj is None:
            return 0
        return sum(t.tokens() for t in [*traj.turns, *(t for r in traj.rehearsals for t in r.turns)])

    def tokens_per_second(self, now: float | None = None) -> float | None:
        """Tokens generated per second of the episode so far; None before the first one."""
        elapsed = (time.monotonic() if now is None else now) - self.started
        tokens = self.tokens()
        return tokens / elapsed if tokens and elapsed > 0 else None


def _place(items: list, index: int, item: Any) -> None:
    if index < len(items):
        items[index] = item
    else:
        items.append(item)


def progress_text(view: LiveView, now: float | None = None) -> str:
    """One line saying what the episode is doing now, with its time and live speed."""
    traj = view.trajectory
    if traj is None:
        return "starting…"
    if view.finished:
        return f"finished: {ended_text(traj.ended)} in {seconds_text(traj.seconds)}"
    elapsed = (time.monotonic() if now is None else now) - view.started
    speed = view.tokens_per_second(now)
    clock = f" · {seconds_text(elapsed)}" + (f" · {speed:.1f} tokens/s" if speed is not None else "")
    return _doing(view, traj) + clock


def _doing(view: LiveView, traj: Trajectory) -> str:
    if view.live:
        (where, target), gen = next(iter(view.live.items()))
        who = "actor is choosing a call" if gen.role == "actor" else "rehearser is predicting the response"
        if where == "commit":
            return f"committed run, step {_row_count(traj.turns) + (gen.role == 'actor')}: {who}…"
        many = f" (all {len(view.live)} at once)" if len(view.live) > 1 else ""
        k = (target or 0) % traj.n if traj.n else target or 0  # counted within the user message
        return f"rehearsal {k + 1} of {traj.n}{many}: {who}…"
    if traj.memory is not None or traj.mode == "none":
        return "committed run: executing…"
    return "rehearsing…"


def _row_count(turns: list[Turn]) -> int:
    """The steps shown so far: one per call, and one per turn without calls."""
    return sum(1 for _ in rows(turns))


def seconds_text(seconds: float) -> str:
    """Seconds, one format everywhere: "12.3 s"."""
    return f"{seconds:.1f} s"


def fidelity_text(value: float | None) -> str:
    """Fidelity, one format everywhere: two decimals, "—" when there is nothing to compare."""
    return "—" if value is None else f"{value:.2f}"


def yes_no(value: bool | None) -> str:
    return "—" if value is None else "yes" if value else "no"


_BROKEN = ("time_limit", "cancelled", "environment_error", "model_error")
_NEUTRAL = ("answer", "no_environment")


# Codes whose plain word says more than the code.
_ENDED_WORDS = {"rehearsal_time": "cut: the rehearsal time ran out"}


def ended_text(ended: str | None) -> str:
    """Why a run ended: the engine's code ("time_limit", "model_error: …"), or its words."""
    return _ENDED_WORDS.get(ended or "", ended or "done")


def outcome_kind(traj: Trajectory) -> str:
    """The status colour of a finished run. Red ("error") for a time limit, Stop or an
    error (whatever the check said) and for a failed check; green ("ok") only for a
    passed check; otherwise neutral ("info") for an unjudged run that answered, amber
    ("warn") for one cut short."""
    if traj.success is False or (traj.ended or "").startswith(_BROKEN):
        return "error"
    if traj.success is True:
        return "ok"
    return "info" if traj.ended in _NEUTRAL else "warn"


# ---- small pieces ------------------------------------------------------------------------


def esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def to_json(value: Any, limit: int | None = None, indent: int | None = 2) -> str:
    text = json.dumps(value, ensure_ascii=False, indent=indent)
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


def fence(text: str, lang: str = "") -> str:
    """A markdown code block that no backtick run inside ``text`` can close."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{text}\n{ticks}"


def call_text(step: CallStep) -> str:
    return to_json({"name": step.call.name, "arguments": step.call.arguments})


def call_title(step: CallStep, limit: int = 90) -> str:
    """The call as a title: ``get_account(account_id="ACC-1003")``, cut at ``limit``."""
    args = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in step.call.arguments.items())
    text = f"{step.call.name}({args})"
    return text if len(text) <= limit else text[: limit - 2] + "…)"


def pending_rehearsal(view: LiveView, name: str, arguments: dict) -> Any:
    """The rehearsed response of the committed call ``name(arguments)`` still waiting for
    its real one (the manual environment starts the typed response from it), or None."""
    traj = view.trajectory
    for step in reversed(call_steps(traj.turns) if traj else []):
        if step.real is None and step.call.name == name and step.call.arguments == arguments:
            return step.rehearsed
    return None


def manual_call_html(name: str, arguments: dict) -> str:
    return (
        '<div class="ev-card ev-manual"><div class="ev-card-title">A committed call waits for its real response</div>'
        f'<pre class="ev-call">{esc(to_json({"name": name, "arguments": arguments}))}</pre>'
        "Type what the tool really returns (a JSON object or array; a bare value becomes "
        '<code>{"result": value}</code>), then send. Stop ends the run.</div>'
    )


_ENGINE_WRITTEN = {
    "validation": "written by the engine: the call failed its validation",
    "repeated_failure": "written by the engine: the same call failed for real, and nothing has succeeded since",
}


def engine_written(step: CallStep) -> str | None:
    """Why a rehearsed response came from the engine rather than the model; None if it did not."""
    return _ENGINE_WRITTEN.get(decided_by(step) or "")


def fidelity_badge(value: float | None) -> str:
    if value is None:
        return '<span class="ev-badge ev-muted" title="no rehearsed and real response to compare">fidelity —</span>'
    level = "ev-good" if value >= 0.8 else "ev-warn" if value >= 0.5 else "ev-bad"
    return f'<span class="ev-badge {level}" title="rehearsed vs real: structure and values">fidelity {fidelity_text(value)}</span>'


def validation_badge(step: CallStep) -> str:
    if step.valid is None:
        return ""
    if step.valid:
        return '<span class="ev-badge ev-good">arguments valid</span>'
    reasons = "; ".join(step.validation_errors) or "no such tool"
    return f'<span class="ev-badge ev-bad" title="{esc(reasons)}">arguments invalid</span>'


def write_badge(step: CallStep) -> str:
    """A real call that changes state says so; one the request did not ask for says that
    louder (``writes.unrequested_write``). Nothing for a read, or where nobody knows."""
    if not step.write:
        return ""
    refused = is_error(step.real)
    if step.unrequested_write:
        what = "write attempted, refused" if refused else "write"
        return (
            f'<span class="ev-badge ev-bad" title="the request asks only to read, and this call went to a tool '
            f'that changes state">{what}: not asked for</span>'
        )
    if refused:
        return (
            '<span class="ev-badge ev-muted" title="a tool that changes state refused the call: nothing changed">'
            "write refused</span>"
        )
    return '<span class="ev-badge ev-warn" title="this real call changed the environment\'s state">write</span>'


def success_badge(success: bool | None) -> str:
    if success is True:
        return '<span class="ev-badge ev-good ev-big">✓ task succeeded</span>'
    if success is False:
        return '<span class="ev-badge ev-bad ev-big">✗ task failed</span>'
    return '<span class="ev-badge ev-muted ev-big" title="a custom request has no success check">not judged</span>'


def status_html(text: str, kind: str = "info") -> str:
    """A one-line status banner; kind: info, busy, ok (success only), warn, error."""
    spinner = '<span class="ev-spinner"></span>' if kind == "busy" else ""
    return f'<div class="ev-status ev-status-{esc(kind)}">{spinner}{esc(text)}</div>'


def model_status_html(
    state: str,
    model: str,
    seconds: float,
    error: str | None,
    info: dict | None,
    note: str | None = None,
    speed: Speed | None = None,
) -> str:
    """The model banner. ``note``: a switch that failed (the working model stayed)."""
    if state == "loading":
        return status_html(f"loading model {model}… ({seconds:.0f} s)", "busy")
    if state == "failed":
        return status_html(f"model failed to load: {error}", "error")
    assert info is not None
    extra = f", {info['memory_mb']:.0f} MB" if info.get("memory_mb") else ""
    rate = f", {speed.decode:.0f} tokens/s" if speed is not None else ""
    text = f"model ready: {info['model_id']} on {info['device']} ({info['dtype']}{extra}{rate}), loaded in {seconds:.1f} s"
    if not trained(info):
        text += f". {UNTRAINED}"
    if note:
        return status_html(f"model switch failed: {note}. {text}", "warn")
    return status_html(text, "info")  # green is for a passed check only


UNTRAINED = "Untrained: a base model never trained to act, rehearse and commit; expect weak calls and rehearsals"


def trained(info: dict) -> bool:
    """Whether the model was trained for world rehearsal: an EnvACE release, or a base
    model with a fine-tuned adapter applied."""
    return bool(info.get("adapter")) or "envace" in str(info.get("model_id", "")).lower()


def header_model_html(state: str, model: str, info: dict | None, adapter: str | None) -> str:
    """The header's line naming the model that runs, and the adapter applied to it."""
    if state == "ready" and info is not None:
        name = f"<code>{esc(info['model_id'])}</code>"
    elif state == "loading":
        name = f"loading <code>{esc(model)}</code>…"
    else:
        name = "none (it failed to load: see below)"
    if adapter is None and info and info.get("adapter"):  # loaded with one (the embedded model's default)
        adapter = str(info["adapter"]).rstrip("/").rsplit("/", 1)[-1]
    on = f' · adapter: <code>{esc(adapter)}</code> <span class="ev-badge ev-warn">fine-tuned</span>' if adapter else " · no adapter"
    return f'<div class="ev-header-model">Model: {name}{on if state == "ready" else ""}</div>'


# ---- schema editor ---------------------------------------------------------------------


def schema_ok_html(tools: list[Tool]) -> str:
    names = ", ".join(f"<code>{esc(t.original_name)}</code>" for t in tools)
    return f'<div class="ev-schema ev-schema-ok">✓ {len(tools)} tool{"s" if len(tools) != 1 else ""}: {names}</div>'


def schema_error_html(err: SchemaError) -> str:
    where = f'<code class="ev-loc">{esc(err.location)}</code>' if err.location else ""
    return (
        '<div class="ev-schema ev-schema-error" role="alert"><b>Invalid schema</b> '
        f"{where}<div>{esc(err.problem)}</div></div>"
    )


def error_html(message: str) -> str:
    return f'<div class="ev-schema ev-schema-error" role="alert">{esc(message)}</div>'


# ---- rehearsals as nested chat panels ------------------------------------------------------


def _msg(content: str, title: str, mid: str, parent: str | None = None, pending: bool = False) -> dict:
    meta: dict[str, Any] = {"title": title, "id": mid, "status": "pending" if pending else "done"}
    if parent is not None:
        meta["parent_id"] = parent
    return {"role": "assistant", "content": content, "metadata": meta}


def rehearsal_messages(view: LiveView) -> list[dict]:
    """Each imagined trajectory a panel; each step a panel in it (its reasoning and its
    rehearsed response nested below the call); the answer last."""
    traj = view.trajectory
    if traj is None or traj.mode == "none":
        return []
    rehearsals = {r.index: r for r in traj.rehearsals}
    streaming = {t for (w, t) in view.live if w == "rehearsal" and t is not None}
    out: list[dict] = []
    for k in sorted(set(rehearsals) | streaming):
        r = rehearsals.get(k) or Rehearsal(index=k)
        rid = f"r{k}"
        done = bool(r.ended)
        calls = len(call_steps(r.turns))
        summary = f"{calls} imagined call{'' if calls == 1 else 's'}" + (
            f", ended: {ended_text(r.ended)}" if done else ""
        )
        # The summary sits in the title: a finished panel shows collapsed.
        title = f"Rehearsal {k + 1} · {summary}"
        if traj.follow_ups:  # a conversation: which user message it rehearsed
            title += f" · message {r.user_turn + 1}"
        out.append(_msg("" if done else "rehearsing…", title, rid, pending=not done))
        for i, (turn, call) in enumerate(rows(r.turns)):
            out.extend(_imagined_step(i, turn, call, rid))
        live = view.live_for("rehearsal", k)
        if live is not None:
            who = "actor" if live.role == "actor" else "rehearser"
            out.append(
                _msg(
                    fence(live.text[-_LIVE_CHARS:] or "…"),
                    f"{who} is writing…",
                    f"{rid}live",
                    rid,
                    pending=True,
                )
            )
        if r.final_answer:
            out.append(_msg(esc(r.final_answer), "answer reached", f"{rid}ans", rid))
    return out


def _imagined_step(i: int, turn: Turn, s: CallStep | None, rid: str) -> list[dict]:
    """Row ``i`` of an imagined trajectory: one call of ``turn``, or the turn itself."""
    sid = f"{rid}s{i}"
    out: list[dict] = []
    if s is None:
        if turn.error:
            out.append(_msg(fence(turn.error), f"step {i + 1}: error", sid, rid))
        return out  # a plain answer is shown once, as "answer reached"
    valid = "" if s.valid else " (arguments invalid)"
    out.append(_msg(fence(call_text(s), "json"), f"step {i + 1}: {call_title(s)}{valid}", sid, rid))
    if turn.action.thinking and s is turn.calls[0]:  # the turn's reasoning, under its first call
        out.append(_msg(esc(turn.action.thinking.strip()), "reasoning", f"{sid}think", sid))
    if s.rehearsed is not None:
        title = "rehearsed response (error)" if is_error(s.rehearsed) else "rehearsed response"
        out.append(_msg(fence(to_json(s.rehearsed), "json"), title, f"{sid}reh", sid))
    elif s.rehearsal_cut:
        out.append(_msg(esc(CUT_NOTE), "not rehearsed (cut)", f"{sid}reh", sid))
    return out


def reused_note(index: int) -> str:
    return f"predicted in rehearsal {index + 1}: the same call in the same rehearser prompt"


CUT_NOTE = "cut short: the rehearsal time ran out before this call was rehearsed"
COMMIT_CUT_NOTE = "not rehearsed: its rehearsal ran long, and the time left was kept for the real call"


# ---- the rehearsal memory --------------------------------------------------------------------


def memory_html(memory: dict | None) -> str:
    if not memory:
        return ""
    rows = []
    for a in memory.get("attempts", []):
        items = []
        for c in a["calls"]:
            call = f"<code>{esc(c['name'])}</code> <code>{esc(to_json(c['arguments'], _SHORT_JSON, None))}</code>"
            if c.get("cut") and c["predicted"] is None:
                items.append(f'<li>{call} → <span class="ev-badge ev-warn">not rehearsed: cut</span></li>')
                continue
            mark = ' <span class="ev-badge ev-bad">predicted error</span>' if c["predicted_error"] else ""
            items.append(f"<li>{call} → <code>{esc(to_json(c['predicted'], _SHORT_JSON, None))}</code>{mark}</li>")
        if not a["calls"]:
            items.append("<li><i>no tool call</i></li>")
        items += [f'<li class="ev-err">error: {esc(e)}</li>' for e in a["errors"]]
        if a["answer"]:
            items.append(f"<li>answer: {esc(a['answer'][:300])}</li>")
        cut = ' <span class="ev-badge ev-warn">cut short</span>' if a.get("cut") else ""
        rows.append(
            f"<div><b>Rehearsal {a['index'] + 1}</b>{cut} <small>(ended: {esc(ended_text(a['ended']))})</small>"
            f"<ul>{''.join(items)}</ul></div>"
        )
    if mark := memory.get("withdrawn"):
        rows.append(
            f'<div class="ev-note"><span class="ev-badge ev-warn">withdrawn</span> after the committed '
            f"<code>{esc(mark['call'])}</code> of turn {mark['turn'] + 1}: {esc(mark['why'])}. The actor read "
            "the real results alone from then on.</div>"
        )
    return (
        '<div class="ev-card ev-memory"><div class="ev-card-title">Rehearsal memory</div>'
        + "".join(rows)
        + f"<details><summary>as the committed actor reads it</summary><pre>{esc(memory.get('text', ''))}</pre></details></div>"
    )


def placeholder_card(title: str, text: str) -> str:
    return f'<div class="ev-card ev-placeholder"><div class="ev-card-title">{esc(title)}</div><div class="ev-empty">{esc(text)}</div></div>'


# ---- the committed run: three columns ----------------------------------------------------------


def steps_html(view: LiveView, condensed: bool = False) -> str:
    """The committed steps: action | rehearsed | real, with badges; the live step last."""
    traj = view.trajectory
    if traj is None:
        return ""
    parts: list[str] = []
    if not condensed:
        parts.append(
            '<div class="ev-cols ev-head"><div>Action</div><div>Rehearsed response</div><div>Real response</div></div>'
        )
    talk = bool(traj.follow_ups)  # a conversation: each user message heads its steps
    shown = -1  # the last user message headed
    for i, (turn, call) in enumerate(rows(traj.turns)):
        if talk and turn.user_turn > shown:
            parts += [user_turn_html(traj, k) for k in range(shown + 1, turn.user_turn + 1)]
            shown = turn.user_turn
        parts.append(_step_html(i, turn, call, traj, condensed))
    asked = view.user_turn if talk and not view.finished else shown
    parts += [user_turn_html(traj, k) for k in range(shown + 1, asked + 1)]
    live_html = _live_step_html(view, condensed)
    if live_html:
        parts.append(live_html)
    if (not traj.turns or asked > shown) and not live_html:
        waiting = "no committed step" if view.finished else "rehearsing first…" if traj.mode != "none" else "acting…"
        parts.append(f'<div class="ev-empty">{esc(waiting)}</div>')
    cls = "ev-steps ev-condensed" if condensed else "ev-steps"
    return f'<div class="{cls}">{"".join(parts)}</div>'


def user_turn_html(traj: Trajectory, k: int) -> str:
    """The header row of user message ``k`` of a conversation, above the steps that answer it."""
    said = [traj.prompt, *traj.follow_ups]
    text = said[k] if k < len(said) else ""
    return (
        f'<div class="ev-user-turn" data-user-turn="{k}" style="margin:10px 0 4px;padding:6px 10px;'
        f'border-left:3px solid var(--color-accent);background:var(--block-background-fill)">'
        f"<b>User:</b> {esc(text)}</div>"
    )


def steps_placeholder() -> str:
    return (
        '<div class="ev-steps"><div class="ev-cols ev-head"><div>Action</div><div>Rehearsed response</div>'
        '<div>Real response</div></div><div class="ev-empty">Press Run: each committed call appears here with '
        "the actor's call, the response it rehearsed and the real one.</div></div>"
    )


def _pre(text: str, cls: str = "") -> str:
    return f'<pre class="{cls}">{esc(text)}</pre>'


def _step_html(i: int, turn: Turn, s: CallStep | None, traj: Trajectory, condensed: bool) -> str:
    """Row ``i`` of the committed run: one call of ``turn``, or the turn itself."""
    limit = _SHORT_JSON if condensed else None
    if s is None:
        body = (
            f'<div class="ev-err">{esc(turn.error)}</div>' if turn.error else ""
        ) + f'<div class="ev-answer-text">{esc(turn.action.content or "")}</div>'
        if turn.withdrawn:
            body += f'<div class="ev-note">{esc(WITHDRAWN_ANSWER_NOTE.format(why=turn.withdrawn))}</div>'
        label = "unparsed turn" if turn.error else "answer taken back" if turn.withdrawn else "answer"
        return (
            f'<div class="ev-step ev-step-answer" data-step="{i}"><div class="ev-bar">'
            f'<span class="ev-num">{i + 1}</span> {label}</div>{body}</div>'
        )
    bar = (
        f'<div class="ev-bar"><span class="ev-num">{i + 1}</span> <code>{esc(call_title(s))}</code> '
        f"{validation_badge(s)} {write_badge(s)} {fidelity_badge(s.fidelity)}"
        f'<span class="ev-time">act {seconds_text(turn.act_seconds if s is turn.calls[0] else 0.0)} · rehearse {seconds_text(s.rehearse_seconds)} · '
        f"real {seconds_text(s.execute_seconds)}</span></div>"
    )
    act = ""
    if turn.action.thinking and not condensed:
        act += f'<details class="ev-think"><summary>reasoning</summary>{_pre(turn.action.thinking.strip())}</details>'
    act += _pre(to_json({"name": s.call.name, "arguments": s.call.arguments}, limit), "ev-call")
    if s.validation_errors:
        act += "".join(f'<div class="ev-err">{esc(e)}</div>' for e in s.validation_errors)
    rehearsed = (
        _pre(to_json(s.rehearsed, limit), "ev-json ev-is-error" if is_error(s.rehearsed) else "ev-json")
        if s.rehearsed is not None
        else f'<div class="ev-empty">{esc(_no_rehearsal(s, traj))}</div>'
    )
    if (why := engine_written(s)) is not None:
        rehearsed += f'<div class="ev-note">{esc(why)}</div>'
    elif s.rehearsal_from is not None:
        rehearsed += f'<div class="ev-note">{esc(reused_note(s.rehearsal_from))}</div>'
    if s.context:
        reads = "".join(_pre(f"{c['call']['name']} {to_json(c['call']['arguments'], None, None)} -> "
                             f"{to_json(c['result'], _SHORT_JSON, None)}", "ev-json") for c in s.context)
        rehearsed += f'<details class="ev-think"><summary>read first, for real ({len(s.context)})</summary>{reads}</details>'
    if s.held:
        real = f'<div class="ev-note">{esc(HELD_NOTE)}</div>'
    elif s.real is not None:
        real = _pre(to_json(s.real, limit), "ev-json ev-is-error" if is_error(s.real) else "ev-json")
    elif traj.environment is None:
        real = '<div class="ev-empty">no environment: not executed</div>'
    else:
        real = '<div class="ev-empty">…</div>'
    if withdrawn_here(traj, turn, s):
        real += f'<div class="ev-note">{esc(WITHDRAWN_NOTE.format(why=traj.memory["withdrawn"]["why"]))}</div>'
    err = f'<div class="ev-err">{esc(s.error)}</div>' if s.error else ""
    if condensed:
        return (
            f'<div class="ev-step" data-step="{i}">{bar}<div class="ev-col ev-act">{act}</div>'
            f'<div class="ev-mini"><b>rehearsed</b>{rehearsed}</div><div class="ev-mini"><b>real</b>{real}</div>{err}</div>'
        )
    return (
        f'<div class="ev-step" data-step="{i}">{bar}<div class="ev-cols">'
        f'<div class="ev-col ev-act">{act}</div><div class="ev-col ev-rehearsed">{rehearsed}</div>'
        f'<div class="ev-col ev-real">{real}</div></div>{err}</div>'
    )


HELD_NOTE = ("held: the rehearsal foresaw this failure, so the call was not executed; the actor read the "
             "prediction and chose again (the same call asked again runs for real)")
WITHDRAWN_ANSWER_NOTE = "taken back: {why}; the actor answered again from the real results alone"
WITHDRAWN_NOTE = "the rehearsal memory was withdrawn here: {why}; the next turns read the real results alone"


def withdrawn_here(traj: Trajectory, turn: Turn, s: CallStep) -> bool:
    """Whether the engine withdrew the rehearsal memory after this committed call."""
    mark = (traj.memory or {}).get("withdrawn")
    if not mark or mark["turn"] != turn.index:
        return False
    k = mark["position"]
    return 0 <= k < len(turn.calls) and turn.calls[k] is s


def _no_rehearsal(s: CallStep, traj: Trajectory) -> str:
    if traj.mode == "none":
        return "not rehearsed (mode none)"
    if s.rehearsal_cut:
        return COMMIT_CUT_NOTE
    return "…"


def _live_step_html(view: LiveView, condensed: bool) -> str:
    live = view.live_for("commit", None)
    if live is None or view.trajectory is None:
        return ""
    text = _pre(live.text[-_LIVE_CHARS:] or "…", "ev-live")
    if live.role == "actor":
        label = f"step {_row_count(view.trajectory.turns) + 1}: actor is writing…"
        cols = f'<div class="ev-col ev-act">{text}</div><div class="ev-col"></div><div class="ev-col"></div>'
    else:
        label = "rehearser is predicting the response…"
        cols = f'<div class="ev-col"></div><div class="ev-col ev-rehearsed">{text}</div><div class="ev-col"></div>'
    if condensed:
        cols = f'<div class="ev-col">{text}</div>'
    return (
        f'<div class="ev-step ev-pending"><div class="ev-bar"><span class="ev-spinner"></span>{esc(label)}</div>'
        f'<div class="{"" if condensed else "ev-cols"}">{cols}</div></div>'
    )


# ---- the outcome ----------------------------------------------------------------------------


def outcome_html(traj: Trajectory | None) -> str:
    if traj is None:
        return ""
    t = traj.totals()
    reasons = "".join(f"<li>{esc(r)}</li>" for r in traj.check_reasons)
    writes = write_metrics(traj)
    chips = [
        ("real calls", t["real_calls"]),
        ("real errors", t["real_errors"]),
        ("held calls", t["held_calls"]),
        ("real writes", writes["real_writes"]),
        ("imagined calls", t["imagined_calls"]),
        ("tokens", t["tokens"]),
        ("wall time", seconds_text(t["seconds"])),
        ("mean fidelity", fidelity_text(traj.fidelity)),
    ]
    if traj.queued_seconds:  # the visitor waited that too: the wall time they saw, the wait apart
        total = seconds_text(t["seconds"] + traj.queued_seconds)
        chips = [("wall time", f"{total} ({seconds_text(traj.queued_seconds)} queued)") if k == "wall time" else (k, v)
                 for k, v in chips]
    chip_html = "".join(f'<span class="ev-chip"><b>{esc(v)}</b> {esc(k)}</span>' for k, v in chips)
    if traj.ungrounded:
        chip_html += (
            f'<span class="ev-badge ev-bad">answer holds {esc(", ".join(traj.ungrounded))}: '
            "only rehearsals had it</span>"
        )
    if writes["unrequested_writes"]:
        chip_html += (
            f'<span class="ev-badge ev-bad">{writes["unrequested_writes"]} write'
            f'{"" if writes["unrequested_writes"] == 1 else "s"} not asked for</span>'
        )
    kind = outcome_kind(traj)
    level = {"ok": "ev-good", "error": "ev-bad", "warn": "ev-warn"}.get(kind, "ev-muted")
    ended = f'<span class="ev-badge {level}">ended: {esc(ended_text(traj.ended))}</span>'
    if traj.mode == "imagine":
        verdict = '<span class="ev-badge ev-muted ev-big">imagine only</span>'
        answer = traj.final_answer or "(no final answer)"
        note = (
            '<div class="ev-note">Imagine mode commits nothing: no call was executed, every response '
            "above was rehearsed. The rehearsal memory card sums them up.</div>"
        )
    else:
        verdict, answer, note = success_badge(traj.success), traj.final_answer or "(no final answer)", ""
    return (
        f'<div class="ev-card ev-outcome ev-outcome-{kind}" data-kind="{kind}">'
        f'<div class="ev-card-title">Final answer {verdict} {ended}</div>'
        f'<div class="ev-answer-text">{esc(answer)}</div>'
        + note
        + (f'<ul class="ev-reasons">{reasons}</ul>' if reasons else "")
        + f'<div class="ev-chips">{chip_html}</div></div>'
    )


def write_metrics(traj: Trajectory) -> dict[str, int]:
    """Committed calls to tools that change state, and those the request did not ask for."""
    steps = call_steps(traj.turns)
    return {
        "real_writes": sum(1 for c in steps if c.write and c.real is not None),
        "unrequested_writes": sum(1 for c in steps if c.unrequested_write),
    }


# ---- before a run: the recorded showcase, the time estimate ---------------------------------


def showcase_view(traj: Trajectory) -> LiveView:
    """A finished record as a view, rendered like a run that just ended."""
    return LiveView(trajectory=traj, finished=True)


def showcase_html(model: str, command: str, budget: dict | None) -> str:
    made = ""
    if budget:
        made = f" (N={budget.get('n')}, {budget.get('max_steps')} steps, {budget.get('max_new_tokens')} new tokens)"
    return (
        '<div class="ev-showcase"><b>Recorded showcase</b>: a parallel-rehearsal run of this example made by '
        f"<code>{esc(model)}</code>{esc(made)} with <code>{esc(command)}</code>. Nothing has run yet: "
        "press Run to run it live on the loaded model.</div>"
    )


def estimate_html(
    speed: Speed | None,
    mode: str,
    n: int,
    max_steps: int,
    max_new_tokens: int,
    limit_seconds: float,
    reasoning: bool = True,
    think_tokens: int | None = None,
    executed: bool = True,
) -> str:
    """The time a run with these controls should take on the loaded model, and the reasoning
    budget within its new tokens; ``executed`` False: no environment runs the committed
    calls, which the line says first."""
    from envace_demo.budget import estimate_seconds

    note = ""
    if not executed and mode in ("parallel", "sequential"):
        note = f'<div class="ev-note">{esc(NOTHING_COMMITTED)}</div>'
    if speed is None:
        return f'<div class="ev-estimate">Estimate: known once the model has loaded and been timed.{note}</div>'
    seconds = estimate_seconds(speed, mode, n, max_steps, max_new_tokens, reasoning)
    over = " (longer than the limit: it will be cut)" if seconds > limit_seconds else ""
    budget = (
        f"; each generation thinks at most {think_tokens} of its {max_new_tokens} new tokens"
        if think_tokens
        else ""
    )
    return (
        f'<div class="ev-estimate" data-seconds="{seconds:.0f}">Estimate: about {seconds:.0f} s at '
        f"{speed.decode:.0f} tokens/s (time limit {limit_seconds:.0f} s){esc(over)}{esc(budget)}{note}</div>"
    )


NOTHING_COMMITTED = (
    "No environment: nothing will be committed. The N rehearsals run first and take their time, then the "
    "committed run's calls are only checked against the schema, never executed. Imagine shows the rehearsals "
    "alone; pick an environment (or manual) to commit for real."
)


# ---- prompt inspector ---------------------------------------------------------------------------


def inspector_choices(traj: Trajectory | None) -> list[tuple[str, str]]:
    """(label, key) for every step that has prompts: committed first, then imagined."""
    if traj is None:
        return []
    out = [
        (f"committed step {i + 1}: {_step_label(turn, call)}", f"c:{i}")
        for i, (turn, call) in enumerate(rows(traj.turns))
        if turn.actor_prompt
    ]
    for r in traj.rehearsals:
        out += [
            (f"rehearsal {r.index + 1}, step {i + 1}: {_step_label(turn, call)}", f"r:{r.index}:{i}")
            for i, (turn, call) in enumerate(rows(r.turns))
            if turn.actor_prompt
        ]
    return out


def _step_label(turn: Turn, call: CallStep | None) -> str:
    return call.call.name if call else ("error" if turn.error else "answer")


def inspector_prompts(traj: Trajectory | None, key: str | None) -> tuple[str, str]:
    """The rendered actor and rehearser prompts of the step ``key`` names."""
    if traj is None or not key:
        return "", ""
    kind, *idx = key.split(":")
    try:
        turns = traj.turns if kind == "c" else traj.rehearsals[int(idx[0])].turns
        turn, call = list(rows(turns))[int(idx[-1])]
    except (IndexError, ValueError):
        return "", ""
    rehearser = (call.rehearser_prompt if call else None) or (
        "(no rehearser prompt: this step was not rehearsed)"
        if call
        else "(no call, nothing to rehearse)"
    )
    return turn.actor_prompt or "", rehearser


# ---- Compare ----------------------------------------------------------------------------------

METRIC_ROWS = (
    ("success", "success"),
    ("real_calls", "real tool calls"),
    ("real_errors", "real errors hit"),
    ("real_writes", "real writes"),
    ("unrequested_writes", "writes not asked for"),
    ("tokens", "tokens"),
    ("seconds", "wall time (s)"),
    ("fidelity", "mean fidelity"),
    ("ended", "ended"),
)


def metrics_table(by_side: dict[str, dict]) -> tuple[list[str], list[list[Any]]]:
    """Headers and rows for the Compare table: one row per metric, one column per side."""
    sides = list(by_side)
    rows = []
    for key, label in METRIC_ROWS:
        row: list[Any] = [label]
        for side in sides:
            row.append(_cell(key, by_side[side].get(key)))
        rows.append(row)
    return ["metric", *sides], rows


def _cell(key: str, value: Any) -> Any:
    """One format per kind of value across tables: yes/no, fidelity 0.00, seconds 0.0."""
    if isinstance(value, bool) or (value is None and key == "success"):
        return yes_no(value)
    if key == "fidelity":
        return fidelity_text(value)
    if key == "seconds" and isinstance(value, (int, float)):
        return round(float(value), 1)
    return "—" if value is None else value
