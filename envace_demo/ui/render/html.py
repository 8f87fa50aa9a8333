"""HTML helpers: one format per kind of value, escaping, badges, status lines, cards.

Model text is always escaped: it may contain anything, ``<tool_call>`` tags included.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

from envace_demo.errors import SchemaError
from envace_demo.record import CallStep, Trajectory, is_error
from envace_demo.schemas import Tool
from envace_demo.validation import decided_by

SHORT_JSON = 220  # condensed views cut JSON here


def seconds_text(seconds: float) -> str:
    """Seconds, one format everywhere: "12.3 s"."""
    return f"{seconds:.1f} s"


def fidelity_text(value: float | None) -> str:
    """Fidelity, one format everywhere: two decimals, "—" when there is nothing to compare."""
    return "—" if value is None else f"{value:.2f}"


def yes_no(value: bool | None) -> str:
    return "—" if value is None else "yes" if value else "no"


_BROKEN = ("time_limit", "cancelled", "environment_error", "model_error")
_NEUTRAL = ("answer", "no_environment", "first_write", "repeated_read")


# Codes whose plain word says more than the code.
_ENDED_WORDS = {
    "rehearsal_time": "cut: the rehearsal time ran out",
    "first_write": "its first write rehearsed (the committed run needs no more of it)",
    "repeated_read": "it repeated a read in an unchanged world (it would answer the same)",
}


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


def placeholder_card(title: str, text: str) -> str:
    return f'<div class="ev-card ev-placeholder"><div class="ev-card-title">{esc(title)}</div><div class="ev-empty">{esc(text)}</div></div>'


def pre(text: str, cls: str = "") -> str:
    return f'<pre class="{cls}">{esc(text)}</pre>'
