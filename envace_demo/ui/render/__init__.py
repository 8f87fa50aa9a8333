"""Engine events and trajectory records -> what the page shows. Pure functions, no gradio.

One concern a module: ``live`` (the view rebuilt from events), ``episode`` (that view as
chat messages, ``messages_for``, and as HTML: steps, memory, outcome), ``html`` (formats,
escaping, badges, status lines), ``banners`` (model, header, showcase, estimate),
``inspector`` (a step's rendered prompts) and ``metrics`` (Compare's table). Chatbot
messages are plain ``{"role", "content", "metadata"}`` dicts (Gradio 6's message format);
everything else is HTML.
"""

from envace_demo.ui.render.banners import (
    NOTHING_COMMITTED,
    UNTRAINED,
    estimate_html,
    header_model_html,
    model_status_html,
    showcase_html,
    trained,
)
from envace_demo.ui.render.episode import (
    COMMIT_CUT_NOTE,
    CUT_NOTE,
    HELD_NOTE,
    WITHDRAWN_ANSWER_NOTE,
    WITHDRAWN_NOTE,
    memory_html,
    messages_for,
    outcome_html,
    reused_note,
    steps_html,
    steps_placeholder,
    user_turn_html,
    withdrawn_here,
    write_metrics,
)
from envace_demo.ui.render.html import (
    call_text,
    call_title,
    ended_text,
    engine_written,
    error_html,
    esc,
    fence,
    fidelity_badge,
    fidelity_text,
    manual_call_html,
    outcome_kind,
    placeholder_card,
    schema_error_html,
    schema_ok_html,
    seconds_text,
    status_html,
    success_badge,
    to_json,
    validation_badge,
    write_badge,
    yes_no,
)
from envace_demo.ui.render.inspector import inspector_choices, inspector_prompts
from envace_demo.ui.render.live import LiveView, pending_rehearsal, progress_text, showcase_view
from envace_demo.ui.render.metrics import METRIC_ROWS, metrics_table

__all__ = [
    "COMMIT_CUT_NOTE", "CUT_NOTE", "HELD_NOTE", "METRIC_ROWS", "NOTHING_COMMITTED", "UNTRAINED",
    "WITHDRAWN_ANSWER_NOTE", "WITHDRAWN_NOTE", "LiveView", "call_text", "call_title", "ended_text",
    "engine_written", "error_html", "esc", "estimate_html", "fence", "fidelity_badge", "fidelity_text",
    "header_model_html", "inspector_choices", "inspector_prompts", "manual_call_html", "memory_html",
    "messages_for", "metrics_table", "model_status_html", "outcome_html", "outcome_kind",
    "pending_rehearsal", "placeholder_card", "progress_text", "reused_note", "schema_error_html",
    "schema_ok_html", "seconds_text", "showcase_html", "showcase_view", "status_html", "steps_html",
    "steps_placeholder", "success_badge", "to_json", "trained", "user_turn_html", "validation_badge",
    "withdrawn_here", "write_badge", "write_metrics", "yes_no",
]
