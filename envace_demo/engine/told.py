"""A committed answer tells the failure it follows (``acknowledgment.py`` reads the words):
which failure an answer must tell, and what happens when it does not: taken back once, then
the failure itself in its place (``EpisodeConfig.report_failures``)."""

from __future__ import annotations

import json
from typing import Any, Callable, Generator

from envace_demo.acknowledgment import acknowledges, failure_text, report, tells_why
from envace_demo.engine.answers import add_to_answer, ungrounded
from envace_demo.engine.asked import names_read
from envace_demo.engine.imagined import asks_a_question
from envace_demo.engine.verdict import RunState
from envace_demo.events import Event, TurnUpdated
from envace_demo.identifiers import names_identifier
from envace_demo.prompts import Conversation
from envace_demo.record import CallStep, ToolCall, Turn, error_code, is_error, rehearsal_failed
from envace_demo.schemas import Tool, find_tool

Writes = Callable[[str], "bool | None"]


def tell_failure(
    runner: Any, turn: Turn, conversation: Conversation, turns: list[Turn], state: RunState,
    memory: dict | None, where: str, rindex: int | None,
) -> Generator[Event, None, bool]:
    """Whether the answer of ``turn`` was taken back for leaving out a failure (the actor is
    then asked again, with the next seed); asked twice, the failure stands in its place
    (``Turn.reported`` keeps the actor's words). ``runner``: the ``TrajectoryRunner``."""
    config = runner.config
    missed = untold(turn.action.content, conversation, memory, runner.tools, runner.writes,
                    config.trust_certainty)
    if missed is None:
        add_why(runner, turn, conversation, turns)
        add_which(runner, turn, conversation)
        return False
    call, failure, ran = missed
    if not state.retold:
        state.retold = True
        turn.withdrawn = f"it did not tell that {call.name} failed ({error_code(failure)})"
        yield TurnUpdated(where, rindex, turn, None, "acted")
        return True
    told = report(call, failure, ran)
    if not ran and ungrounded(runner.task, config.known_results, turns, told, runner.rehearsals):
        told = report(call, failure, ran, with_message=False)  # the foreseen message's values are not real
    if last_failure(conversation) is None and earlier_failure(conversation, runner.writes) is not None:
        # Writes went through after it: what they did stays told.
        add_to_answer(turn, told)
        return False
    turn.reported, turn.action.content = turn.action.content, told
    return False


def untold(
    answer: str, conversation: Conversation, memory: dict | None, tools: list[Tool], writes: Writes,
    sure: float | None,
) -> tuple[ToolCall, Any, bool] | None:
    """The failure ``answer`` leaves out, as (call, failure, whether it ran), or None. The last
    call the actor read failed (for real, or held on a foreseen failure), or in a request to
    write, an earlier write did and others went through after it (``earlier_failure``); or, with no write
    made, the memory it was shown foresaw a write the request asked for failing (with ``sure``,
    at least that probability) and the run took another path without saying why. A question
    asks for no write: one that failed on its way need not be told; after a failed read, an
    answer from what an earlier read found stands."""
    asked_to_write = not asks_a_question(conversation.user)
    failed = last_failure(conversation) or (earlier_failure(conversation, writes) if asked_to_write else None)
    if failed is not None:
        step, failure = failed
        call, ran = step.call, not step.held
    elif asked_to_write and memory and memory.get("shown") and not made_a_write(conversation, writes):
        if (foreseen := foreseen_write_failure(memory, writes, sure)) is None:
            return None
        (call, failure), ran = foreseen, False
    else:
        return None
    write = writes(call.name) is not False
    if write and not asked_to_write:
        return None
    read = [] if write else [message for t in conversation.turns if t.read()
                             for _, message in conversation.results(t) if not is_error(message)]
    tool = find_tool(tools, call.name)
    known = [*conversation.requests(), json.dumps(tool.to_openai()) if tool else ""]
    return None if acknowledges(answer, call, failure, known, read) else (call, failure, ran)


def add_why(runner: Any, turn: Turn, conversation: Conversation, turns: list[Turn]) -> None:
    """An answer that tells a write the request asked for failed, but not why (``tells_why``):
    the failure is added after the actor's words (kept in ``Turn.added``), as the tool returned
    it, or as rehearsal foresaw it for a call held and never run, its message kept only where
    no value in it is the rehearsal's alone."""
    failed = last_failure(conversation)
    if failed is None or asks_a_question(conversation.user):
        return
    step, failure = failed
    if (not step.held and step.real is None) or runner.writes(step.call.name) is not True:
        return
    said = turn.action.content or ""
    tool = find_tool(runner.tools, step.call.name)
    # A tool's description ("at most 3 books") tells the user none of this failure's numbers.
    if not said or tells_why(said, step.call, failure, conversation.requests(),
                             [json.dumps(tool.to_openai())] if tool else []):
        return
    code, message = failure_text(failure)
    told = f"What the tools returned: {step.call.name}: {code}: {message}"
    if step.held:
        told = f"What rehearsal foresaw, not run: {step.call.name}: {code}: {message}"
        if ungrounded(runner.task, runner.config.known_results, turns, told, runner.rehearsals):
            told = f"What rehearsal foresaw, not run: {step.call.name}: {code}"
    add_to_answer(turn, told)


def add_which(runner: Any, turn: Turn, conversation: Conversation) -> None:
    """An answer that tells a write failed, where the same write was made for several things,
    and does not say which one: the name a real read gave each identifier of the failed call
    is added (asked for holds on three books, the third refused, the answer told the limit but
    not the book)."""
    failed = last_failure(conversation) or earlier_failure(conversation, runner.writes)
    if failed is None or runner.writes(failed[0].call.name) is not True:
        return
    step = failed[0]
    steps = [s for t in conversation.turns if t.read() for s in t.calls]
    if sum(1 for s in steps if s.call.name == step.call.name) < 2:
        return
    names = names_read(r for t in conversation.turns if t.read() for r in conversation.results(t))
    said = (turn.action.content or "").lower()
    which = [f"{names[v]} ({v})" for k, v in step.call.arguments.items() if names_identifier(k) and isinstance(v, str)
             and v in names and names[v].lower() not in said and v.lower() not in said]
    if which:
        add_to_answer(turn, f"The one that failed: {step.call.name} for {', '.join(which)}.")


def last_failure(conversation: Conversation) -> tuple[CallStep, Any] | None:
    """The last call the actor read in this user turn and its message, where that message
    is a failure (a real error, or a held call's foreseen one); None otherwise."""
    for turn in reversed(conversation.turns):
        if turn.calls and turn.read():
            _, message = conversation.results(turn)[-1]
            return (turn.calls[-1], message) if is_error(message) else None
    return None


def earlier_failure(conversation: Conversation, writes: Writes) -> tuple[CallStep, Any] | None:
    """The last write of this user turn that failed (for real, or held on a foreseen failure)
    where calls went through after it: asked for holds on Dune and Earthsea, Dune was held
    already and Earthsea's hold was placed; asked to reserve Dune, already held, the actor
    searched the catalog and answered "no copy is available". The answer must still tell it."""
    steps = [s for t in conversation.turns if t.read() for s in t.calls]
    for i in range(len(steps) - 1, -1, -1):
        step = steps[i]
        failure = step.rehearsed if step.held else step.real
        if writes(step.call.name) is False or not (step.held or step.real is not None) or not is_error(failure):
            continue
        went = [s for s in steps[i + 1:] if s.real is not None and not s.held and not is_error(s.real)]
        # The same write on the same things, made again and through (in a new folder, for less), made up for it.
        again = any(s.call.name == step.call.name and acts_on(s.call) == acts_on(step.call) for s in went)
        return (step, failure) if went and not again else None
    return None


def acts_on(call: ToolCall) -> dict[str, Any]:
    """What a call acts on: its identifiers and paths."""
    return {k: v for k, v in call.arguments.items() if names_identifier(k) or (isinstance(v, str) and v.startswith("/"))}


def made_a_write(conversation: Conversation, writes: Writes) -> bool:
    """Whether a write ran for real in this user turn and went through."""
    return any(step.real is not None and not is_error(step.real) and writes(step.call.name) is not False
               for t in conversation.turns if t.read() for step in t.calls)


def foreseen_write_failure(memory: dict, writes: Writes, sure: float | None) -> tuple[ToolCall, Any] | None:
    """The first write a rehearsal memory foresaw failing (with ``sure``, at least that
    probability: ``CallStep.certainty``), as (call, its foreseen failure)."""
    for attempt in memory.get("attempts", []):
        for c in attempt.get("calls", []):
            foreseen = c.get("predicted")
            if (c.get("predicted_error") and is_error(foreseen) and not rehearsal_failed(foreseen)
                    and writes(c["name"]) is not False
                    and (sure is None or (c.get("certainty") is not None and c["certainty"] >= sure))):
                return ToolCall(c["name"], c.get("arguments") or {}), foreseen
    return None
