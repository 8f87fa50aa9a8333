"""A question that names a field no read so far returned: the read whose tool describes that
field is made in the actor's place, on the identifier the last read found, before the actor
answers again (``EpisodeConfig.answer_what_asked``).

Asked "What shelf is Cosmos on?", the small actor searched the catalog (titles, authors,
years: no shelf) and answered with the book's id as its shelf. ``get_book`` says it returns
the "shelf mark", and takes the ``book_id`` the search found. Where exactly one row of the
last result is the one the question is about (it holds a word of the question, or it is the
only row), the engine makes that read, for real (a read changes nothing), and takes back the
answer given without it. After writes that went through, the part of the instruction that
asks ("and tell me its shelf mark") is the question, and the written identifier (the book
held) is the row. Never a write; once per user turn (``asked.ask_again``)."""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, field
from typing import Any, Generator

from envace_demo.engine.aside import asked, stems
from envace_demo.engine.condition import told
from envace_demo.engine.imagined import asks_a_question
from envace_demo.engine.instead import Instead, made_call
from envace_demo.identifiers import identifier_patterns, names_identifier
from envace_demo.models.base import Generation
from envace_demo.prompts import Conversation
from envace_demo.quoted import names_and_quotes
from envace_demo.record import ToolCall, is_error
from envace_demo.scheduler import Request

MAX_LISTED = 5  # the most identifiers of one listed field read or told for the actor
_TELL = re.compile(r"\b(?:tell|let|show|remind|give)\s+(?:me|us)\b(?:\s+know\b)?|\bsay\b", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.?!;])\s+")



def missing_read(runner: Any, conversation: Conversation) -> ToolCall | None:
    """The read-only call that returns what ``conversation``'s question names and no real
    call of this user turn returned; None where there is none, or no single entity to read."""
    found = what_is_asked(conversation, runner.writes)
    if found is None:
        return None
    question, results = found
    steps = [s for t in conversation.turns if t.read() for s in t.calls]
    if len(results) != len(steps):
        return None  # a call failed on the way: ``told.py`` decides what the answer must say
    made = {c.key() for c, _ in results}
    if (call := unread_name(runner, conversation.user, results, made)) is not None:
        return call
    named = asked(question, ToolCall("", {})) - set().union(*(_keys(r) for _, r in results))
    if named and (call := _listed_file(runner, question, results[-1], made)) is not None:
        return call
    rows = _about(question, results[-1][1])
    if not named or len(rows) != 1:
        return None
    for tool in runner.tools:
        required = list(tool.parameters.get("required") or ())
        if (runner.writes(tool.name) is not False or not required or not all(names_identifier(k) for k in required)
                or not named & stems(tool.description or "")):
            continue
        if all(k in rows[0] for k in required):
            call = ToolCall(tool.name, {k: rows[0][k] for k in required})
            if call.key() not in made:
                return call
    return None


def unread_name(runner: Any, request: str, results: list[tuple[ToolCall, Any]], made: set) -> ToolCall | None:
    """The search for the first name or quote of ``request`` (``quoted.names_and_quotes``) that
    no real result holds, with the one read-only tool whose one required argument quotes the
    user (a catalog search, as its schema declares); None where every name was read. Asked
    whether The Hobbit was on the shelf for card P-1100, the small actor read the card and the
    book it held, and answered that book's shelf."""
    seen = json.dumps([r for _, r in results], ensure_ascii=False).lower()
    unread = [n for n in names_and_quotes(request) if not all(w.lower() in seen for w in n.split())]
    for tool in runner.tools if unread else ():
        required = list(tool.parameters.get("required") or ())
        if runner.writes(tool.name) is False and len(required) == 1 and required[0] in runner.committer.quoting(tool):
            call = ToolCall(tool.name, {required[0]: unread[0]})
            return call if call.key() not in made else None
    return None


def _listed_file(runner: Any, question: str, last: tuple[ToolCall, Any], made: set) -> ToolCall | None:
    """The read of the one entry of the last result, a listing, that the question's words name
    (``Environment.read_options``): asked what timeout is set "in the system config file", the
    small actor listed /system and answered the listing; ``config.ini`` is read."""
    environment = runner.committer.environment
    if environment is None:
        return None
    words = stems(question)
    for tool in runner.tools:
        if runner.writes(tool.name) is not False:
            continue
        options = environment.read_options(tool.original_name, last[0].name, last[1])
        chosen = [o for o in options if any(words & stems(str(v).rstrip("/").rsplit("/", 1)[-1]) for v in o.values())]
        if len(chosen) == 1 and (call := ToolCall(tool.name, chosen[0])).key() not in made:
            return call
    return None


def listed_reads(runner: Any, conversation: Conversation) -> list[ToolCall]:
    """The reads of the identifiers a field the question names lists: asked which books a card
    holds, the patron's ``holds`` are book ids, and each not read yet is read with the one read
    tool whose identifier they fit (``get_book``), so the titles are in the conversation. []
    where no such field, tool or unread identifier is."""
    found = what_is_asked(conversation, runner.writes)
    if found is None:
        return []
    question, results = found
    own, made = stems(question), {c.key() for c, _ in results}
    calls: list[ToolCall] = []
    for _, result in results:
        for key, listed in (result.items() if isinstance(result, dict) else ()):
            if (not stems(key) & own or not isinstance(listed, list) or not 0 < len(listed) <= MAX_LISTED
                    or not all(isinstance(v, str) for v in listed)):
                continue
            if (reader := _reader(runner, listed)) is not None:
                calls += [c for v in listed if (c := ToolCall(reader[0], {reader[1]: v})).key() not in made]
    return list({c.key(): c for c in calls}.values())


def _reader(runner: Any, ids: list[str]) -> tuple[str, str] | None:
    """The one read-only tool, and its one required argument, whose declared identifier
    pattern every one of ``ids`` fits."""
    fits = []
    for tool in runner.tools:
        required = list(tool.parameters.get("required") or ())
        pattern = identifier_patterns(tool).get(required[0]) if len(required) == 1 else None
        if runner.writes(tool.name) is False and pattern is not None and all(pattern.fullmatch(v) for v in ids):
            fits.append((tool.name, required[0]))
    return fits[0] if len(fits) == 1 else None


def what_is_asked(conversation: Conversation, writes: Any) -> tuple[str, list[tuple[ToolCall, Any]]] | None:
    """What this user turn asks, and the real results it has to go on: a question, and its
    reads; after writes that all went through, the part of the instruction that asks ("and
    tell me its shelf mark": ``asking_part``), and every result. None where nothing is asked,
    a call was held, or the last call failed."""
    steps = [s for t in conversation.turns if t.read() for s in t.calls]
    if not steps:
        return None
    request = conversation.user
    results = [(s.call, s.real) for s in steps if s.real is not None and not is_error(s.real)]
    # "If it has a copy on the shelf, just tell me its shelf mark; if not, ...": the branch the
    # reads took asks, after a failure too ("if i've maxed out my holds, remind me which books").
    branch = told(request, results)
    if any(s.held for s in steps) or steps[-1].real is None or is_error(steps[-1].real):
        return (branch, results) if branch else None
    wrote = [s for s in steps if writes(s.call.name) is not False]
    if any(s.real is None or is_error(s.real) for s in wrote):
        return (branch, results) if branch else None  # else ``told.py`` decides what the answer must say
    question = asking_part(request) if wrote else request if asks_a_question(request) or "?" in request else branch
    return (question, results) if question else None


def asking_part(request: str) -> str | None:
    """The part of an instruction that asks something: what follows "tell me", "let me know",
    "give me" or "say", or the sentences that open as questions; None where there is none (a "Can you
    move it?" asks for the move)."""
    if (m := _TELL.search(request)) is not None:
        return request[m.end():].strip() or None
    asking = [s for s in _SENTENCE.split(request.strip()) if asks_a_question(s)]
    return " ".join(asking) or None


def _keys(result: Any) -> set[str]:
    """The words of every field name in ``result`` (its rows' too), stemmed."""
    if isinstance(result, list):
        return set().union(set(), *(_keys(r) for r in result))
    if not isinstance(result, dict):
        return set()
    out = set().union(*(stems(k) for k in result))
    return out.union(*(_keys(v) for v in result.values() if isinstance(v, (dict, list))))


def _about(request: str, result: Any) -> list[dict]:
    """The rows of ``result`` the question is about: those holding the most words of it, or the
    only one; a result that is one record is its own row."""
    if not isinstance(result, dict):
        return []
    tables = [v for v in result.values() if isinstance(v, list) and v and all(isinstance(r, dict) for r in v)]
    if not tables:
        return [result]
    rows = [r for table in tables for r in table]
    return closest(asked(request, ToolCall("", {})), result) or (rows if len(rows) == 1 else [])


def closest(topic: set[str], result: dict) -> list[dict]:
    """The rows of ``result``'s lists that hold the most words of ``topic`` (at least one): asked
    about the rent payment, the rent row ("Rent", "payment"), not every payment."""
    rows = rows_of(result)
    scored = [(len(topic & _words(r)), r) for r in rows]
    best = max((n for n, _ in scored), default=0)
    return [r for n, r in scored if n == best] if best else []


def rows_of(result: Any) -> list[dict]:
    """The rows of ``result``'s tables (its lists of records, and the CSV a text holds)."""
    values = list(result.values()) if isinstance(result, dict) else []
    return [r for v in values if isinstance(v, list) and v and all(isinstance(r, dict) for r in v) for r in v] + \
        [r for v in values if isinstance(v, str) for r in csv_rows(v)]


def csv_rows(text: str) -> list[dict]:
    """The rows of ``text`` where it is a CSV table (a header, and each line as many fields),
    numbers as numbers: a file read answers "how much in February" from its ``feb`` row."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if len(lines) < 2 or "," not in lines[0] or len({line.count(",") for line in lines}) != 1:
        return []
    table = list(csv.reader(lines))
    header = [h.strip() for h in table[0]]
    if len(set(header)) != len(header) or not all(_NAME_ONLY.fullmatch(h) for h in header):
        return []
    return [{h: _number(v.strip()) for h, v in zip(header, row)} for row in table[1:]]


_NAME_ONLY = re.compile(r"[A-Za-z][\w ]{0,30}")


def _number(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def _words(row: dict) -> set[str]:
    """The words of a row's texts, stemmed."""
    return set().union(*(stems(v) for v in row.values() if isinstance(v, str)))


@dataclass
class Detail:
    """The reads made in the actor's place for what the question named, after its answer was
    taken back (or that a write's condition needs: ``engine/condition.py``): one per step, in order."""

    calls: list[ToolCall]
    why: str = "the question asks for what it returns, and no read so far returned it"
    # The actor's calls those reads were made for, made again after them: the condition is then
    # weighed, and the write rehearsed, held or replaced like any other.
    then: list[ToolCall] = field(default_factory=list)

    def choice_left(self) -> bool:
        return bool(self.calls or self.then)

    def next_step(self, runner: Any) -> Generator[Request, Generation, tuple[Generation, str] | None]:
        yield from ()  # a step of the plan's kind (``Repairs.next_action``), though it asks no model
        if self.calls:
            call = self.calls.pop(0)
            return made_call(call), Instead(f"{call.name}: {self.why}")
        call = self.then.pop(0)
        return made_call(call), Instead(f"{call.name}: the actor's own call, after the reads its condition turns on")
