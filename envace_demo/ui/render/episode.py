"""The episode view: an episode's record (and its live step) as the page shows it.

``messages_for(view)``: the rehearsals as nested chat panels (Gradio's message dicts,
``{"role", "content", "metadata"}``); ``steps_html``: the committed run in three columns;
``memory_html`` and ``outcome_html``: the rehearsal memory and the final card.
"""

from __future__ import annotations

from typing import Any

from envace_demo.certainty import OUTCOME_SAID
from envace_demo.record import CallStep, Rehearsal, Trajectory, Turn, call_steps, is_error, rows
from envace_demo.ui.render.html import (
    SHORT_JSON,
    call_text,
    call_title,
    ended_text,
    engine_written,
    esc,
    fence,
    fidelity_badge,
    fidelity_text,
    outcome_kind,
    pre,
    seconds_text,
    success_badge,
    to_json,
    validation_badge,
    write_badge,
)
from envace_demo.ui.render.live import LIVE_CHARS, LiveView, row_count


# ---- rehearsals as nested chat panels ------------------------------------------------------


def _msg(content: str, title: str, mid: str, parent: str | None = None, pending: bool = False) -> dict:
    meta: dict[str, Any] = {"title": title, "id": mid, "status": "pending" if pending else "done"}
    if parent is not None:
        meta["parent_id"] = parent
    return {"role": "assistant", "content": content, "metadata": meta}


def messages_for(view: LiveView) -> list[dict]:
    """The chat messages of what ``view`` has shown (as smolagents' ``pull_messages_from_step``
    turns a step into messages): each imagined trajectory a panel; each step a panel in it
    (its reasoning and its rehearsed response nested below the call); the answer last."""
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
                    fence(live.text[-LIVE_CHARS:] or "…"),
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
    elif s.fetched:
        out.append(_msg(fence(to_json(s.real), "json"), FETCHED_TITLE, f"{sid}reh", sid))
    elif s.rehearsal_cut:
        out.append(_msg(esc(CUT_NOTE), "not rehearsed (cut)", f"{sid}reh", sid))
    return out


def taken_note(index: int) -> str:
    return (f"the first action of rehearsal {index + 1}: the same prompt and seed (the rehearsals foresaw no "
            "failure, so the committed actor read nothing from them)")


def reused_note(index: int) -> str:
    return f"predicted in rehearsal {index + 1}: the same call in the same rehearser prompt"


REPEATED_NOTE = "the prediction this call had when it was held: asked again, nothing real had happened since"
CUT_NOTE = "cut short: the rehearsal time ran out before this call was rehearsed"
READ_NOTE = "not rehearsed: a read, safe to make for real (only writes are rehearsed before they run)"
FETCHED_TITLE = "real response (a read, fetched while the world was still the real one: not rehearsed)"
COMMIT_CUT_NOTE = "not rehearsed: its rehearsal ran long, and the time left was kept for the real call"


# ---- the rehearsal memory --------------------------------------------------------------------


def memory_html(memory: dict | None) -> str:
    if not memory:
        return ""
    rows = []
    for a in memory.get("attempts", []):
        items = []
        for c in a["calls"]:
            call = f"<code>{esc(c['name'])}</code> <code>{esc(to_json(c['arguments'], SHORT_JSON, None))}</code>"
            if c.get("cut") and c["predicted"] is None:
                items.append(f'<li>{call} → <span class="ev-badge ev-warn">not rehearsed: cut</span></li>')
                continue
            mark = ' <span class="ev-badge ev-bad">predicted error</span>' if c["predicted_error"] else ""
            items.append(f"<li>{call} → <code>{esc(to_json(c['predicted'], SHORT_JSON, None))}</code>{mark}</li>")
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
    if skipped := memory.get("others_skipped"):
        rows.append(f'<div class="ev-note">{esc(SKIPPED_NOTE.format(n=skipped, s="" if skipped == 1 else "s"))}</div>')
    if memory.get("shown") is False:
        rows.append(
            '<div class="ev-note">Not shown to the committed actor: no rehearsal foresaw a failure it was sure of, '
            "or an invalid call, so the committed run acts as one without rehearsal would (its writes are still "
            "rehearsed before they run, and one foreseen surely to fail is held).</div>"
        )
    return (
        '<div class="ev-card ev-memory"><div class="ev-card-title">Rehearsal memory</div>'
        + "".join(rows)
        + f"<details><summary>as the committed actor reads it</summary><pre>{esc(memory.get('text', ''))}</pre></details></div>"
    )


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


def _turn_html(i: int, turn: Turn) -> str:
    """Row ``i``: a turn without calls made (an answer, or calls left unmade), and its notes."""
    body = (
        f'<div class="ev-err">{esc(turn.error)}</div>' if turn.error else ""
    ) + f'<div class="ev-answer-text">{esc(turn.action.content or "")}</div>'
    if turn.superseded and turn.action.calls:  # calls not made (a read repeated): shown as written
        body = f'<div class="ev-answer-text"><code>{esc(", ".join(c.name for c in turn.action.calls))}</code></div>'
    for note, why in ((WITHDRAWN_ANSWER_NOTE, turn.withdrawn), (SET_ASIDE_NOTE, turn.set_aside),
                      (REPORTED_NOTE, turn.reported), (COMPLETED_NOTE, turn.completed), (ADDED_NOTE, turn.added),
                      (SUPERSEDED_NOTE, turn.superseded)):
        body += f'<div class="ev-note">{esc(note.format(why=why))}</div>' if why else ""
    label = ("unparsed turn" if turn.error else "answer taken back" if turn.withdrawn
             else "answer set aside" if turn.set_aside else "call not made" if turn.superseded else "answer")
    return (
        f'<div class="ev-step ev-step-answer" data-step="{i}"><div class="ev-bar">'
        f'<span class="ev-num">{i + 1}</span> {label}</div>{body}</div>'
    )


def _step_html(i: int, turn: Turn, s: CallStep | None, traj: Trajectory, condensed: bool) -> str:
    """Row ``i`` of the committed run: one call of ``turn``, or the turn itself."""
    limit = SHORT_JSON if condensed else None
    if s is None:
        return _turn_html(i, turn)
    bar = (
        f'<div class="ev-bar"><span class="ev-num">{i + 1}</span> <code>{esc(call_title(s))}</code> '
        f"{validation_badge(s)} {write_badge(s)} {fidelity_badge(s.fidelity)}"
        f'<span class="ev-time">act {seconds_text(turn.act_seconds if s is turn.calls[0] else 0.0)} · rehearse {seconds_text(s.rehearse_seconds)} · '
        f"real {seconds_text(s.execute_seconds)}</span></div>"
    )
    act = ""
    if turn.action.thinking and not condensed:
        act += f'<details class="ev-think"><summary>reasoning</summary>{pre(turn.action.thinking.strip())}</details>'
    act += pre(to_json({"name": s.call.name, "arguments": s.call.arguments}, limit), "ev-call")
    if s.validation_errors:
        act += "".join(f'<div class="ev-err">{esc(e)}</div>' for e in s.validation_errors)
    if turn.action_from is not None and s is turn.calls[0]:
        act += f'<div class="ev-note">{esc(taken_note(turn.action_from))}</div>'
    for why, note in ((turn.repaired, REPAIRED_NOTE), (turn.instead, INSTEAD_NOTE)):
        act += f'<div class="ev-note">{esc(note.format(why=why))}</div>' if why and s is turn.calls[0] else ""
    if turn.action.restored and s is turn.calls[0]:
        act += "".join(f'<div class="ev-note">{esc(RESTORED_NOTE.format(what=r))}</div>' for r in turn.action.restored)
    rehearsed = (
        pre(to_json(s.rehearsed, limit), "ev-json ev-is-error" if is_error(s.rehearsed) else "ev-json")
        if s.rehearsed is not None
        else f'<div class="ev-empty">{esc(_no_rehearsal(s, traj))}</div>'
    )
    if (why := engine_written(s)) is not None:
        rehearsed += f'<div class="ev-note">{esc(why)}</div>'
    elif s.rehearsal_from is not None:
        rehearsed += f'<div class="ev-note">{esc(reused_note(s.rehearsal_from))}</div>'
    elif s.repeats_hold:
        rehearsed += f'<div class="ev-note">{esc(REPEATED_NOTE)}</div>'
    if s.context:
        reads = "".join(pre(f"{c['call']['name']} {to_json(c['call']['arguments'], None, None)} -> "
                             f"{to_json(c['result'], SHORT_JSON, None)}", "ev-json") for c in s.context)
        rehearsed += f'<details class="ev-think"><summary>read first, for real ({len(s.context)})</summary>{reads}</details>'
    if s.stated_facts:
        rehearsed += f'<div class="ev-note">{esc(stated_note(s.stated_facts))}</div>'
    if s.held:
        real = f'<div class="ev-note">{esc(held_note(s))}</div>'
    elif s.real is not None:
        real = pre(to_json(s.real, limit), "ev-json ev-is-error" if is_error(s.real) else "ev-json")
    elif traj.environment is None:
        real = '<div class="ev-empty">no environment: not executed</div>'
    else:
        real = '<div class="ev-empty">…</div>'
    if s.unsure and s.certainty is not None:
        real += f'<div class="ev-note">{esc(UNSURE_NOTE.format(p=s.certainty))}</div>'
    if s.self_contradicted:
        real += f'<div class="ev-note">{esc(CONTRADICTED_NOTE)}</div>'
    if turn.superseded:
        real += f'<div class="ev-note">{esc(SUPERSEDED_NOTE.format(why=turn.superseded))}</div>'
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


def stated_note(facts: str) -> str:
    """What the engine stated to the rehearser, from the reads above (``facts.stated_facts``)."""
    return STATED_NOTE.format(facts=facts.strip().removesuffix(OUTCOME_SAID.strip()).rstrip(" ."))


STATED_NOTE = "stated from these reads: {facts}; the outcome and the response are the rehearser's"
HELD_NOTE = ("held: the rehearsal foresaw this failure, so the call was not executed; the actor read the "
             "prediction and chose again (the same call asked again runs for real)")
TRUSTED_NOTE = ("trusted: the rehearser gave this failure {p:.2f}, sure enough to trust, so the answer stands "
                "and the call never ran")


def held_note(s: CallStep) -> str:
    """What a held call's real column says: held (with how sure the rehearser was), or trusted."""
    if s.trusted and s.certainty is not None:
        return TRUSTED_NOTE.format(p=s.certainty)
    sure = f" (the rehearser gave it {s.certainty:.2f})" if s.certainty is not None else ""
    return HELD_NOTE.replace("foresaw this failure", f"foresaw this failure{sure}", 1)


UNSURE_NOTE = ("not held: the rehearser gave this failure only {p:.2f}, below EpisodeConfig.hold_certainty, so the "
               "call ran for real at once, as it would have without rehearsal")
SKIPPED_NOTE = ("{n} other imagined run{s} never started: the lead run foresaw nothing, so the memory stays unread "
                "and they could change nothing in the committed run (EpisodeConfig.imagined_others)")
SUPERSEDED_NOTE = "left out of the actor's history: {why}"
REPAIRED_NOTE = "another path the rehearsal found: {why}"
INSTEAD_NOTE = "made in the actor's place: {why}"
CONTRADICTED_NOTE = ("not held: the foreseen failure asks for an argument this call already passes, so it "
                     "foresees nothing")
WITHDRAWN_ANSWER_NOTE = "taken back: {why}; the actor answered again from the real results alone"
SET_ASIDE_NOTE = "set aside: {why}"
REPORTED_NOTE = ("asked twice, the actor left out that the last call failed (it said: {why}); the failure as "
                 "the tool returned it is the answer")
COMPLETED_NOTE = ("the actor's answer ended on a tool's text cut short (it said: {why}); the rest of that text, as "
                  "the tool returned it, is added")
ADDED_NOTE = ("the actor's answer left out what the tools returned of the question, or why a write failed "
              "(it said: {why}); that, as the tools returned it, is added")
RESTORED_NOTE = "the user's words, as the user wrote them: {what}"
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
    if s.real is not None and s.write is False:
        return READ_NOTE
    return "…"


def _live_step_html(view: LiveView, condensed: bool) -> str:
    live = view.live_for("commit", None)
    if live is None or view.trajectory is None:
        return ""
    text = pre(live.text[-LIVE_CHARS:] or "…", "ev-live")
    if live.role == "actor":
        label = f"step {row_count(view.trajectory.turns) + 1}: actor is writing…"
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
        ("checked calls", t["checked_calls"]),
        ("trusted calls", t["trusted_calls"]),
        ("failures foreseen unsure", t["unsure_calls"]),
        ("calls of another path the rehearsal found", t["repaired_calls"]),
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
