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
that returns it (``detail.py``); where the field it names lists identifiers (a patron's
``holds``), each is read, and the titles those reads give are what the answer must tell.
Asked twice, an answer that still tells none of it keeps the actor's words
(``Turn.added``), and the values the real reads hold are added after them with the tool, row
and field each came from: a real value, never a rehearsed one, and nothing the actor said
is taken out. Where the question's own words name a field ("transfer" in
``daily_transfer_limit``), that field is what it asks for; what an asking word asks for
("how much": an amount, a balance) counts only where none does. Only in a question where
nothing was written, and never after a failure (``told.py`` decides what such an answer
must say)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Generator, Iterable

from envace_demo.engine.answers import add_to_answer
from envace_demo.engine.aside import asked, stem, stems
from envace_demo.engine.detail import (MAX_LISTED, Detail, closest, listed_reads, missing_read, rows_of,
                                       what_is_asked)
from envace_demo.engine.imagined import Writes
from envace_demo.events import Event, TurnUpdated
from envace_demo.grounding import number_text, values
from envace_demo.identifiers import names_identifier
from envace_demo.prompts import Conversation
from envace_demo.record import ToolCall, Turn

ASK_AGAIN = 2  # answers taken back for leaving out what was asked, per user turn

# An asking word and the words of the fields that answer it.
_ASKS_FOR = {
    "who": {"name", "owner", "author", "description"},  # a payment's payee is in what describes it
    "whose": {"name", "owner"},
    "when": {"date", "year"},
    "where": {"shelf", "location"},
    "why": {"reason"},
    "which": {"title", "name", "description"},  # which one: what it is called or described as
    "bytes?": {"size"},  # a unit asks for the field measured in it
    # "can money be moved out of it right now?": whether it may be used is its status.
    r"(?:can|could|whether)\b[^?.]{0,30}\b(?:move|moved|use|used|withdrawn?|transfer(?:red)?|spend|borrow(?:ed)?)":
        {"status", "available"},
}
_HOW = re.compile(r"\bhow (much|many|large|big|old)\b", re.IGNORECASE)
_HOW_FOR = {"much": {"amount", "balance", "total"}, "many": {"count", "total", "copies"},
            "large": {"size"}, "big": {"size"}, "old": {"year"}}
_NAME_WORD = re.compile(r"[A-Za-z]{4,}")
_NAMES = {"title", "name", "description"}  # what a row is called or described as
_TIME, _SIZE = {"year", "date"}, {"amount", "size"}
_SUPERLATIVES = [
    (re.compile(r"\b(?:oldest|earliest)\b", re.I), (_TIME, False)),
    (re.compile(r"\b(?:newest|latest|most recent(?:ly)?)\b", re.I), (_TIME, True)),
    (re.compile(r"\b(?:biggest|largest|highest|most expensive)\b", re.I), (_SIZE, True)),
    (re.compile(r"\b(?:smallest|lowest|cheapest|least expensive)\b", re.I), (_SIZE, False)),
    # "which month did I spend the least in": the least, not "at least $20"; the most, not the most recent.
    (re.compile(r"\b(?:(?<!at\s)least|fewest)\b", re.I), (_SIZE, False)),
    (re.compile(r"\bthe most\b(?!\s+recent)", re.I), (_SIZE, True)),
]
# A question that asks for an identifier by name; its mark among the question's words.
_ID_ASKED, _ID = re.compile(r"\b(?:id|ids|identifier|reference)\b", re.IGNORECASE), "\0id"
_ID_KIND = re.compile(r"\b([a-z]{3,})\s+(?:id|ids|identifier|reference|number)\b", re.IGNORECASE)
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ][\d:.]+Z?)?")
_IDENTIFIER = re.compile(r"\b[A-Z]{1,5}-\d{2,}\b")  # "ACC-1003", "P-1042", "BK-001"
_PARTS = re.compile(r"\s+[-\u2013\u2014:|]\s+|,\s+")
# A question that asks what a listing holds: every entry is the answer, not one of them.
_CONTENTS = re.compile(r"\bwhat(?:'s|s| is| are)\s+(?:in|inside)\b|\bwhat\s+(?:files|folders|books|titles)\b|"
                       r"\blist\s+(?:the|all|every|what)\b|\bcontents?\b", re.IGNORECASE)


@dataclass(frozen=True)
class Found:
    """A value a real read holds of what the question asks: where it came from, and whether a
    word of the question itself names its field (``own``) or only an asking word does."""

    tool: str
    row: str | None  # the identifier of the row it is in, None for the result itself
    key: str
    value: Any
    own: bool

    def text(self) -> str:
        if isinstance(self.value, tuple):
            return ", ".join(map(str, self.value))
        return self.value if isinstance(self.value, str) else json.dumps(self.value)


@dataclass(frozen=True)
class Named:
    """An identifier a listed field holds (a patron's ``holds``), with the title or name a real
    read of it gave, where one did: asked which books are held, the titles answer, not the ids."""

    id: str
    name: str | None = None

    def __str__(self) -> str:
        return f"{self.id} ({self.name})" if self.name else self.id


def missed(request: str, results: Iterable[tuple[ToolCall, Any]], answer: str) -> list[str]:
    """The values the question ``request`` asked for that ``results`` (real reads that went
    through) hold and ``answer`` leaves out, all of them; [] where the answer tells one, or
    nothing tells what the question asked (``wanted``)."""
    return list(dict.fromkeys(f.text() for f in untold(request, results, answer)))


def untold(request: str, results: Iterable[tuple[ToolCall, Any]], answer: str) -> list[Found]:
    """``missed``, with where each value came from. A question in parts ("How much was it and
    which ATM?") is answered only where each part is: an amount told alone leaves the ATM."""
    found = wanted(request, results)
    groups = [g for fields in asked_parts(request) if (g := [f for f in found if stems(f.key) & fields])]
    groups = groups if len(groups) > 1 else [found]
    return [f for g in groups if not any(tells(answer, x.value, request) for x in g) for f in g]


def asked_parts(request: str) -> list[set[str]]:
    """The fields each asking word of ``request`` asks for, one set a word, in order."""
    parts = [fields for word, fields in _ASKS_FOR.items() if re.search(rf"\b{word}\b", request, re.IGNORECASE)]
    parts += [_HOW_FOR[m.group(1).lower()] for m in _HOW.finditer(request)]
    return [{stem(w) for w in p} for p in parts]


def wanted(request: str, results: Iterable[tuple[ToolCall, Any]]) -> list[Found]:
    """What ``results`` hold of what ``request`` asks. Where rows hold words of the question,
    only the closest rows count (``detail.closest``): the question is about them; among the
    values, those whose field a word of the question names, where there are any."""
    in_rows: list[Found] = []
    in_items: list[Found] = []
    results = list(results)
    for call, result in about_named(request, results):
        if (found := answers_in(request, call, result)) is None:
            return []
        in_rows, in_items = in_rows + found[0], in_items + found[1]
    # Asked what a listing holds, its entries answer, all of them; of listings read one after
    # another, the last, which the question came to.
    shown = [f for f in in_items if f.key == "entries" and f.row is None]
    found = shown[-1:] or in_rows or in_items
    found = [f for f in found if f.own] or found
    names = names_read(results)
    found = [Found(f.tool, f.row, f.key, tuple(Named(v, names.get(v)) for v in f.value), f.own)
             if isinstance(f.value, list) else f for f in found]
    # The records of listed items (each held book's own queue) are about them, not the answer.
    listed = {n.id for f in found if isinstance(f.value, tuple) for n in f.value}
    return [f for f in found if f.row not in listed]


def about_named(request: str, results: list[tuple[ToolCall, Any]]) -> list[tuple[ToolCall, Any]]:
    """``results`` less the reads of an identifier of a kind the question names, that it does
    not name: asked the balance of ACC-1003, the read of ACC-1005 (the transfer's other side)
    does not answer; a book read for a patron's holds still does."""
    named = set(_IDENTIFIER.findall(request))
    kinds = {i.split("-")[0] for i in named}

    def other(call: ToolCall) -> bool:
        ids = {v for v in call.arguments.values() if isinstance(v, str) and _IDENTIFIER.fullmatch(v)}
        return bool(ids) and not ids & named and any(i.split("-")[0] in kinds for i in ids)
    return [(c, r) for c, r in results if not other(c)]


def names_read(results: Iterable[tuple[ToolCall, Any]]) -> dict[str, str]:
    """Identifier -> the title or name the real record holding it gave (a book read by id)."""
    names: dict[str, str] = {}
    for _, result in results:
        for row in ([result] if isinstance(result, dict) else []) + rows_of(result):
            name = next((row[k] for k in ("title", "name") if isinstance(row.get(k), str)), None)
            for key, value in row.items():
                if name and names_identifier(key) and isinstance(value, str):
                    names.setdefault(value, name)
    return names


def answers_in(request: str, call: ToolCall, result: Any) -> tuple[list[Found], list[Found]] | None:
    """The values of ``result`` that answer ``request``, as (in the rows of its lists holding
    the most words of the question, in the result itself): the fields the question asks for;
    None where one of them is told in words (``_values``)."""
    if not isinstance(result, dict):
        return [], []
    # The rows of a search are about the words searched for too: the call's arguments count.
    topic = asked(request, ToolCall(call.name, {}))
    fields = stems(request) | id_words(request), implied_fields(request)
    in_rows: list[Found] = []
    rows = closest(topic, result)
    if (most := superlative(request)) is not None and whole(result):
        # "the oldest", "the biggest payment": the row at that end, told by what it is called.
        rows = extreme(rows or rows_of(result), *most)
        fields = fields[0], fields[1] | _NAMES
    for row in rows:
        if (found := _values(call.name, row, fields)) is None:
            return None
        in_rows += found
    in_item = _values(call.name, result, fields)
    if in_item is not None and (entries := contents(request, result)) is not None:
        in_item = in_item + [Found(call.name, None, "entries", entries, True)]
    return None if in_item is None else (in_rows, in_item)


def contents(request: str, result: Any) -> tuple[Named, ...] | None:
    """The names of every row of ``result`` where ``request`` asks what a listing holds ("what's
    in the website folder?") and the result shows them all, at most ``MAX_LISTED``; else None."""
    if not _CONTENTS.search(request) or not whole(result):
        return None
    rows = rows_of(result)
    names = [next((r[k] for k in ("name", "title") if isinstance(r.get(k), str)), None) for r in rows]
    if not rows or len(rows) > MAX_LISTED or None in names:
        return None
    return tuple(Named(n) for n in names)


def id_words(request: str) -> set[str]:
    """The marks a question that asks for an identifier puts among its words: ``_ID``, and
    ``_ID:word`` for the word that says which ("the transaction ID": not the account's)."""
    if not _ID_ASKED.search(request):
        return set()
    return {_ID} | {f"{_ID}:{stem(m.group(1))}" for m in _ID_KIND.finditer(request)}


def superlative(request: str) -> tuple[set[str], bool] | None:
    """The fields a superlative of ``request`` ranks by, and whether it asks for the most (the
    newest, the biggest) or the least; None where it has none. "last" and "first" are left out:
    "his last paycheck" is the last of one kind of row, not the newest row."""
    for pattern, ranked in _SUPERLATIVES:
        if pattern.search(request):
            return ranked
    return None


def whole(result: Any) -> bool:
    """Whether ``result`` shows every row it found: no ``truncated`` flag, no ``total`` above
    the rows shown (the oldest of ten shown is not the oldest in the catalog)."""
    if not isinstance(result, dict) or result.get("truncated") is True:
        return False
    shown = len(rows_of(result))
    return not any(k == "total" and isinstance(v, int) and v > shown for k, v in result.items())


def extreme(rows: list[dict], ranked: set[str], most: bool) -> list[dict]:
    """The rows with the highest (``most``) or lowest value of the first field of ``ranked`` they
    all hold (a number, or an ISO date); ``rows`` where none is."""
    for key in sorted({k for r in rows for k in r if stems(k) & ranked}):
        marks = [r.get(key) for r in rows]
        numbers = all(isinstance(m, (int, float)) and not isinstance(m, bool) for m in marks)
        if rows and (numbers or all(isinstance(m, str) and _ISO_DATE.fullmatch(m) for m in marks)):
            end = max(marks) if most else min(marks)
            return [r for r, m in zip(rows, marks) if m == end]
    return rows


def implied_fields(request: str) -> set[str]:
    """The field words the asking words of ``request`` ask for ("who": a name, an owner)."""
    out: set[str] = set()
    for word, fields in _ASKS_FOR.items():
        if re.search(rf"\b{word}\b", request, re.IGNORECASE):
            out |= fields
    for m in _HOW.finditer(request):
        out |= _HOW_FOR[m.group(1).lower()]
    return {stem(w) for w in out}  # as a key's words are read ("status": "statu")


def tells(answer: str, value: Any, request: str) -> bool:
    """Whether ``answer`` tells ``value``: the same number, the whole text, or a name's word
    the request did not already say; for listed identifiers, each of them (by name, where a read
    gave one)."""
    if isinstance(value, tuple):  # by name where a read gave one: the id alone does not say which book
        return all(tells(answer, n.id if n.name is None else n.name, request) for n in value)
    if isinstance(value, (int, float)):
        return number_text(float(value)) in values(answer)
    text, said = str(value).lower(), answer.lower()
    if text in said:
        return True
    # A part of a text in parts ("ATM withdrawal - 5th Ave"), told whole, that the request did not say.
    parts = _PARTS.split(text)
    if len(parts) > 1 and any(len(p) >= 5 and p in said and p not in request.lower() for p in parts):
        return True
    own = {w.lower() for w in _NAME_WORD.findall(request)}
    return any(w.lower() in said for w in _NAME_WORD.findall(str(value)) if w.lower() not in own)


def _values(tool: str, item: dict, fields: tuple[set[str], set[str]]) -> list[Found] | None:
    """The values of ``item``'s fields named by a word of the request or by what its asking
    words ask for (``fields``: those two, stemmed; an identifier only where the question asks
    for one, ``_ID``); None where one of those that
    count (``wanted``) is a yes/no, a zero or nothing: told in words ("none available"), an
    answer is not for the engine to judge."""
    own_words, implied = fields
    row = next((str(v) for k, v in item.items() if names_identifier(k) and isinstance(v, str)), None)
    out: list[Found] = []
    for key, value in item.items():
        words = stems(key)
        if names_identifier(key):  # only where the question asks for it: "the transaction ID of ..."
            kinds = {w[len(_ID) + 1:] for w in own_words if w.startswith(_ID + ":")}
            if _ID in own_words and (words & kinds if kinds else words & own_words or key.lower() == "id"):
                out.append(Found(tool, row, key, value, True))
            continue
        if not words & (own_words | implied):
            continue
        out.append(Found(tool, row, key, value, bool(words & own_words)))
    out = [f for f in out if f.own] or out
    # A field the question names whole ("holds") before one it names in part ("hold_limit").
    out = [f for f in out if f.own and stems(f.key) <= own_words] or out
    if any(isinstance(f.value, bool) or f.value in (0, None, "") or f.value == [] for f in out):
        return None
    return [f for f in out if isinstance(f.value, (int, float, str)) or _listed(f.value)]


def _listed(value: Any) -> bool:
    """A short list of identifiers or names (a patron's holds)."""
    return isinstance(value, list) and 0 < len(value) <= MAX_LISTED and all(isinstance(v, str) for v in value)


def unanswered(conversation: Conversation, answer: str, writes: Writes) -> list[Found]:
    """What ``answer`` leaves out of what this user turn asks and its real results answer
    (``detail.what_is_asked``): a question's reads, or, after writes that went through, the
    part of the instruction that asks; [] where nothing is asked, a call was held, or the last
    call failed."""
    found = what_is_asked(conversation, writes)
    return [] if found is None else untold(found[0], found[1], answer)


def ask_again(runner: Any, turn: Turn, conversation: Conversation, state: Any, where: str,
              rindex: int | None) -> Generator[Event, None, bool]:
    """Whether the answer of ``turn`` was taken back for leaving out what the question asked
    (the actor then answers again, no call on offer, with its next seed). ``runner``: the
    ``TrajectoryRunner``; ``state``: its ``RunState``."""
    if not runner.config.answer_what_asked:
        return False
    if state.asked_again >= ASK_AGAIN:
        add_what_asked(turn, unanswered(conversation, turn.action.content or "", runner.writes))
        return False
    if not state.asked_again and (call := missing_read(runner, conversation)) is not None:
        state.asked_again += 1
        runner.repairs.refusal = Detail([call])  # made next, in the actor's place; then it answers again
        turn.withdrawn = f"the question asks for what {call.name} returns, and no read so far returned it"
        yield TurnUpdated(where, rindex, turn, None, "acted")
        return True
    if calls := listed_reads(runner, conversation):  # at any ask: the titles are what the answer must tell
        state.asked_again += 1
        runner.repairs.refusal = Detail(calls)  # each identifier read, then it answers again
        turn.withdrawn = (f"the question asks for {calls[0].name.replace('_', ' ')} records a read listed "
                          "by identifier only, and it told none of them")
        yield TurnUpdated(where, rindex, turn, None, "acted")
        return True
    left = list(dict.fromkeys(f.text() for f in unanswered(conversation, turn.action.content or "", runner.writes)))
    if not left:
        return False
    state.asked_again += 1
    state.answer_next = True
    turn.withdrawn = f"the question asks for what the real reads hold ({', '.join(left[:3])}); it told none of it"
    yield TurnUpdated(where, rindex, turn, None, "acted")
    return True


def add_what_asked(turn: Turn, found: list[Found]) -> None:
    """The last answer, asked for twice, still tells none of ``found``: the values are added
    after the actor's words (kept in ``Turn.added``), each with the read and row it came from."""
    if found:
        add_to_answer(turn, f"What the tools returned: {what_was_found(found)}.")


def what_was_found(found: list[Found]) -> str:
    """``found`` in words, grouped by read and row: "get_book BK-027: year 1818"."""
    groups: dict[tuple[str, str | None], list[str]] = {}
    for f in found:
        groups.setdefault((f.tool, f.row), []).append(f"{f.key} {f.text()}")
    return "; ".join(f"{tool}{' ' + row if row else ''}: {', '.join(dict.fromkeys(v))}"
                     for (tool, row), v in groups.items())
