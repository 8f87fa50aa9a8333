"""Answer grounding: the values of an answer that only rehearsals had (``grounding.py``),
read against everything real the episode saw."""

from __future__ import annotations

from typing import Any, Iterable

from envace_demo import grounding
from envace_demo.record import Rehearsal, ToolCall, Turn, call_steps
from envace_demo.task import Task


def ungrounded(
    task: Task,
    known_results: Iterable[tuple[ToolCall, Any]],
    turns: list[Turn],
    answer: str | None,
    rehearsals: Iterable[Rehearsal] = (),
) -> list[str]:
    """The values of ``answer`` that only rehearsals had: the committed calls' rehearsed
    responses and the imagined runs are the predictions; the user's turns, the tools, the
    real responses and reads, every call's arguments and ``known_results`` are real."""
    rehearsals = list(rehearsals)
    committed = call_steps(turns)
    imagined = [c for r in rehearsals for c in call_steps(r.turns)]
    rehearsed = [c.rehearsed for c in [*committed, *imagined]]
    rehearsed += [r.final_answer for r in rehearsals]
    real: list[Any] = [*task.user_turns, *(t.to_openai() for t in task.tools_at(len(task.user_turns)))]
    for c in committed:
        real += [c.call.arguments, c.real, *(x.get("result") for x in c.context)]
    for c in imagined:
        real.append(c.call.arguments)  # an argument is the actor's, not a prediction
    real += [r for _, r in known_results]
    return grounding.ungrounded(answer, rehearsed, real)


def add_to_answer(turn: Turn, told: str) -> None:
    """``told`` (what the tools returned, or a failure) after the actor's answer, whose own
    words ``Turn.added`` keeps."""
    said = turn.action.content or ""
    turn.added, turn.action.content = said, f"{said.rstrip()}\n\n{told}"
