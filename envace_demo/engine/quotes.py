"""A final answer that quotes a real result's text, cut short, gets the rest of it
(``EpisodeConfig.whole_quotes``).

Asked when the next sync is, the small actor read the meeting notes and answered
"/notes/meeting-2025-03-10.md contains: " and then the file's first four lines, stopping
before "- Next sync: 2025-03-17"; asked about a passport on a todo list, it copied two of the
list's three lines. Where an answer ends on the opening lines of a multi-line text the actor
was shown as a real result (two lines or more, cut where a line ends), the engine writes the
remaining lines after it: only the tool's own words are added, and the actor's are kept in
``Turn.completed``."""

from __future__ import annotations

from typing import Any, Iterator

from envace_demo.engine.config import EpisodeConfig
from envace_demo.prompts import Conversation
from envace_demo.record import Turn, is_error

# The least of a text an answer must have copied for its end to be a quote of it.
MIN_QUOTED = 20


def complete_quote(turn: Turn, conversation: Conversation, config: EpisodeConfig) -> str:
    """The answer of ``turn`` as it stands: completed where it ends on a real result's text cut
    short (``Turn.completed`` then keeps the actor's words)."""
    answer = turn.action.content or ""
    if not config.whole_quotes or turn.reported or turn.added:
        return answer
    for text in _texts(m for t in conversation.turns if t.read() for _, m in conversation.results(t)):
        if (rest := rest_of(answer, text)) is not None:
            turn.completed, turn.action.content = answer, answer.rstrip() + rest
            return turn.action.content
    return answer


def rest_of(answer: str, text: str) -> str | None:
    """What follows in ``text`` where ``answer`` ends on its first lines (two at least, at
    least ``MIN_QUOTED`` characters, cut where a line ends); None otherwise."""
    body, said = text.rstrip(), answer.rstrip()
    cut = body.rfind("\n")
    while cut > 0:  # the longest quote first
        quoted = body[:cut].rstrip()
        if len(quoted) >= MIN_QUOTED and "\n" in quoted and said.endswith(quoted):
            return body[len(quoted):]
        cut = body.rfind("\n", 0, cut)
    return None


def _texts(results: Iterator[Any]) -> Iterator[str]:
    """The multi-line strings of real results that went through, the latest first."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str) and "\n" in value.strip():
            found.append(value)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    for result in results:
        if not is_error(result):
            walk(result)
    return iter(found[::-1])
