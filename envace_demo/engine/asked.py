"""An answer to a question that leaves out what the real reads said of it is asked again
(``EpisodeConfig.answer_what_asked``).

Asked "Who is the author of Silent Spring?", the small actor read the book and answered
its shelf mark; asked how much an ATM withdrawal came to, it read the transactions and
told another one. The real result held the answer: the field the question names
(``author``, ``year``, ``shelf``; "who" asks for a name, "how much" for an amount), in the
result itself or in the rows holding the most words of the question ("ATM", "rent"). An
answer holding none of those values is taken back and the actor answers again, from the
same conversation with its next seed, at most ``ASK_AGAIN`` times; the last answer stands.
Where the question names a field no read returned, the first of those times makes the read
that returns it (``detail.py``).
The engine never writes the value into the answer: it only declines an answer that
misses it. Only in a question where nothing was written, and never after a failure
(``told.py`` decides what such an answer must say)."""

from __future__ import annotations

import re
from typing import Any, Generator, Iterable

from envace_demo.engine.aside import asked, stems
from envace_demo.engine.detail import Detail, closest, missing_read
from envace_demo.engine.imagined import Writes, asks_a_question
from envace_demo.events import Event, TurnUpdated
from envace_demo.grounding import number_text, values
from envace_demo.identifiers import names_identifier
from envace_demo.prompts import Conversation
from envace_demo.record import ToolCall, Turn, is_error

ASK_AGAIN = 2  # answers taken back for leaving out what was asked, per user turn

# An asking word and the words of the fields that answer it.
_ASKS_FOR = {
    "who": {"name", "owner", "author"},
    "whose": {"name", "owner"},
    "when": {"date", "year"},
    "where": {"shelf", "location"},
    "why": {"reason"},
}
_HOW = re.compile(r"\bhow (much|many)\b", re.IGNORECASE)
_HOW_FOR = {"much": {"amount", "balance", "total"}, "many": {"count", "total", "copies"}}
_NAME_WORD = re.compile(r"[A-Za-z]{4,}")


def missed(request: str, results: Iterable[tuple[ToolCall, Any]], answer: str) -> list[str]:
    """The values the question ``request`` asked for that ``results`` (real reads that went
    through) hold and ``answer`` leaves out, all of them; [] where the answer tells one, or
    nothing tells what the question asked. Where rows hold words of the question, only the
    closest rows count (``detail.closest``): the question is about them."""
    in_rows: list[Any] = []
    in_items: list[Any] = []
    for call, result in results:
        if (found := answers_in(request, call, result)) is None:
            return []
        in_rows, in_items = in_rows + found[0], in_items + found[1]
    wanted = in_rows or in_items
    if not wanted or any(tells(answer, v, request) for v in wanted):
        return []
    return list(dict.fromkeys(map(str, wanted)))


def answers_in(request: str, call: ToolCall, result: Any) -> tuple[list[Any], list[Any]] | None:
    """The values of ``result`` that answer ``request``, as (in the rows of its lists holding
    the most words of the question, in the result itself): the fields the question asks for;
    None where one of them is told in words (``_values``)."""
    if not isinstance(result, dict):
        return [], []
    # The rows of a search are about the words searched for too: the call's arguments count.
    fields, topic = asked_fields(request), asked(request, ToolCall(call.name, {}))
    in_rows: list[Any] = []
    for row in closest(topic, result):
        if (found := _values(row, fields)) is None:
            return None
        in_rows += found
    in_item = _values(result, fields)
    return None if in_item is None else (in_rows, in_item)


def asked_fields(request: str) -> set[str]:
    """The field words ``request`` asks for: its own words, and what its asking words ask for."""
    out = stems(request)
    for word, fields in _ASKS_FOR.items():
        if re.search(rf"\b{word}\b", request, re.IGNORECASE):
            out |= fields
    for m in _HOW.finditer(request):
        out |= _HOW_FOR[m.group(1).lower()]
    return out


def tells(answer: str, value: Any, request: str) -> bool:
    """Whether ``answer`` tells ``value``: the same number, the whole text, or a name's word
    the request did not already say."""
    if isinstance(value, (int, float)):
        return number_text(float(value)) in values(answer)
    text, said = str(value).lower(), answer.lower()
    if text in said:
        return True
    own = {w.lower() for w in _NAME_WORD.findall(request)}
    return any(w.lower() in said for w in _NAME_WORD.findall(str(value)) if w.lower() not in own)


def _values(item: dict, fields: set[str]) -> list[Any]:
    """The values of ``item``'s fields named by a word of ``fields`` (no identifier); None
    where one of them is a yes/no, a zero or nothing: told in words ("none available"), an
    answer is not for the engine to judge."""
    out: list[Any] = []
    for key, value in item.items():
        if names_identifier(key) or not stems(key) & fields:
            continue
        if isinstance(value, bool) or value in (0, None, ""):
            return None  # type: ignore[return-value]
        if isinstance(value, (int, float, str)):
            out.append(value)
    return out


def unanswered(conversation: Conversation, answer: str, writes: Writes) -> list[str]:
    """What ``answer`` leaves out of a question this user turn's real reads answered; [] where
    the request asks nothing, a write was made or held, or the last call failed."""
    request = conversation.user
    if not (asks_a_question(request) or "?" in request):
        return []
    reads: list[tuple[ToolCall, Any]] = []
    for turn in conversation.turns:
        if not turn.read():
            continue
        for step in turn.calls:
            if step.held or writes(step.call.name) is not False:
                return []
            reads.append((step.call, step.real))
    if not reads or reads[-1][1] is None or is_error(reads[-1][1]):
        return []
    return missed(request, [(c, r) for c, r in reads if r is not None and not is_error(r)], answer)


def ask_again(runner: Any, turn: Turn, conversation: Conversation, state: Any, where: str,
              rindex: int | None) -> Generator[Event, None, bool]:
    """Whether the answer of ``turn`` was taken back for leaving out what the question asked
    (the actor then answers again, no call on offer, with its next seed). ``runner``: the
    ``TrajectoryRunner``; ``state``: its ``RunState``."""
    if not runner.config.answer_what_asked or state.asked_again >= ASK_AGAIN:
        return False
    if not state.asked_again and (call := missing_read(runner, conversation)) is not None:
        state.asked_again += 1
        runner.repairs.refusal = Detail(call)  # made next, in the actor's place; then it answers again
        turn.withdrawn = f"the question asks for what {call.name} returns, and no read so far returned it"
        yield TurnUpdated(where, rindex, turn, None, "acted")
        return True
    left = unanswered(conversation, turn.action.content or "", runner.writes)
    if not left:
        return False
    state.asked_again += 1
    state.answer_next = True
    turn.withdrawn = f"the question asks for what the real reads hold ({', '.join(left[:3])}); it told none of it"
    yield TurnUpdated(where, rindex, turn, None, "acted")
    return True
