"""Things a request names that no write has touched yet, after the actor wrote for some of
them and answered (``EpisodeConfig.finish_named_items``).

Asked for holds on Foundation and on Dune, the small actor searched for Foundation, held it and
answered; told to send $600 to ACC-1001 and another $600 to ACC-1003, it made the second
transfer and answered. A request's items are what it names the way a call would pass them:
identifiers of the tools' declared shapes, paths, file names, quoted text and, where a read
searches the user's words, capitalised names ("Brave New World"). Where the last write of this
user turn went through and the actor answers, an item no write touched is still to be done
(after a refusal, the answer tells it: ``told.py``). Asked for a call with its temperature left
free, the actor repeated the call it had made, three times in three; so each draw holds one
argument to the item (``narrowings``): a write of this turn given the identifier a read of the
item found (the book a search for "Dune" found), a tool of this turn given the item where it
passed one of its kind (the account named after the same preposition, "to ACC-1001 ... to
ACC-1005"; a path), or a search given the item's words. Drawn greedily, up to ``DRAWS`` of
them; the actor writes every other argument. The answer is taken back and the first drawn call
that touches the item is made next, rehearsed and committed like any other: it is the
engine's step, so it is made past the last one too (``max_steps`` counts the actor's turns).
A call made already is never taken, nor a write of the same tool on the same identifiers and
paths as one that went through; a write touches an item only through what it acts on, never
through a memo or a label (a deposit made again to add its label would move the money twice).
Where no draw touches one, the answer stands. At most ``MAX_MORE`` times per user turn."""

from __future__ import annotations

import copy
import json
import re
import unicodedata
from dataclasses import replace
from typing import Any, Generator, Iterable

from envace_demo.engine.imagined import PREPOSITIONS
from envace_demo.engine.instead import Instead
from envace_demo.engine.offer import offered
from envace_demo.engine.told import acts_on
from envace_demo.events import Event, TurnUpdated
from envace_demo.identifiers import identifier_patterns, names_identifier, shaped
from envace_demo.models.base import Constraint, Generation
from envace_demo.prompts import Conversation, actor_prompt
from envace_demo.record import CallStep, ToolCall, Turn, is_error
from envace_demo.scheduler import Request
from envace_demo.schemas import Tool
from envace_demo.verbatim import dictated_as, parse_dictated

MAX_MORE = 4  # calls asked for, per user turn
DRAWS = 3  # the actor's draws per call asked for, each with one argument held to an item

PATH_WRITTEN = re.compile(r"(?<![\w/])/[\w.\-]+(?:/[\w.\-]+)*")
FILE_WRITTEN = re.compile(r"(?<![\w/.\-])[\w\-]+\.[A-Za-z][A-Za-z0-9]{0,4}\b")
_QUOTED = re.compile(r"(?:^|(?<=[\s:(]))(?:'([^'\n]{2,80}?)'|\"([^\"\n]{2,80}?)\"|\u201c([^\u201d\n]{2,80}?)\u201d)"
                     r"(?=[\s.,;:!?)]|$)")
# A capitalised name: capitalised words, joined by the small words a title keeps inside it.
_NAME = re.compile(r"\b[A-Z][\w'\u2019-]*(?:\s+(?:(?:of|the|in|on|a|an|to)\s+)*[A-Z][\w'\u2019-]*)*")
_SENTENCE_START = re.compile(r"(?:^|[.!?]\s+|\n)\s*$")
_POSSESSIVE = re.compile(r"['\u2019]s$")


def request_items(request: str, tools: Iterable[Tool], names: bool = True) -> list[str]:
    """What ``request`` names the way a call would pass it, in order: identifiers of the
    tools' declared shapes, paths, file names, quoted text and, where ``names``, capitalised
    names (a lone word opening a sentence is taken for the sentence's, not a name: "Please",
    "Move"; a name beside an identifier is its holder's: "Priya Nair, P-1100")."""
    patterns = [p for t in tools for p in identifier_patterns(t).values()]
    found: list[str] = []
    for word in re.split(r"[\s,;()\[\]]+", request):
        word = word.strip(".:!?\"'`")
        shapes = [v for p in patterns if word and (v := shaped(word, p)) and p.fullmatch(v)]
        if shapes:
            found.append(shapes[0])
    found += [m.group(0).rstrip(".") for m in PATH_WRITTEN.finditer(request)]
    found += [m.group(0) for m in FILE_WRITTEN.finditer(request) if not inside_path(request, m.start())]
    found += [next(g for g in m.groups() if g) for m in _QUOTED.finditer(request)]
    ids = [w for w in found if any(p.fullmatch(w) for p in patterns)]
    for m in _NAME.finditer(request) if names else ():
        named = _names(m.group(0).split(), bool(_SENTENCE_START.search(request[:m.start()])), patterns)
        found += [n for n in named if not _owner(request, n, ids)]
    return list(dict.fromkeys(i for i in found if len(i) >= 2))


def _names(words: list[str], opens: bool, patterns: list[re.Pattern]) -> list[str]:
    """The names in a run of capitalised words: split at identifiers ("Card P-1042"), the
    sentence's own first word left out ("From Alice"), possessives dropped."""
    words = words[1:] if opens and len(words) > 1 else [] if opens else words
    runs: list[list[str]] = [[]]
    for word in words:
        if any(p.fullmatch(word) for p in patterns):
            runs.append([])
        else:
            runs[-1].append(word)
    names = [_POSSESSIVE.sub("", " ".join(r).strip("'\u2019\"")) for r in runs if r]
    return [n for n in names if n not in ("I", "I'd", "I'm", "I'll") and n[0].isupper()]


def _owner(text: str, name: str, ids: list[str]) -> bool:
    """Whether ``name`` stands just before one of the request's identifiers, two words apart
    at most ("Priya Nair, P-1100", "Maya Lindqvist (card P-1042)", "Ben's ACC-1003"), or just
    after one: the identifier's holder, whom the identifier names already, not a thing to look
    for."""
    at = text.find(name)
    after, before = text[at + len(name):at + len(name) + 40], text[max(0, at - 40):at]
    return any(re.match(r"\W*(?:\w+\W+){0,2}?" + re.escape(i), after) or re.search(re.escape(i) + r"\W*$", before)
               for i in ids)


def inside_path(text: str, at: int) -> bool:
    return at > 0 and text[at - 1] == "/"


def untouched(runner: Any, conversation: Conversation) -> list[str]:
    """The request's items no write of this user turn touched, where the last write that ran
    in it went through; [] otherwise (after a refusal the answer tells it). A write touches
    what it passes and returns, and what the read that found its identifier passed (the
    search for "Toni Morrison" whose book was held); a path is touched by any call that passed
    it (a file read to be copied). Capitalised names count only where a read searches by
    the user's words: nothing else could pass them."""
    steps = _steps(conversation)
    writes = [s for s in steps if runner.writes(s.call.name) is True and (s.real is not None or s.held)]
    if not writes or ((writes[-1].held or is_error(writes[-1].real))
                      and not _its_own(writes[-1], request_items(conversation.user, runner.tools))):
        return []
    used = {str(v) for s in writes for k, v in s.call.arguments.items() if names_identifier(k)}
    led = [s for s in steps if s not in writes and used & set(_identifier_values(s.real))]
    touched = " ".join(_text(s) for s in [*writes, *led]).lower()
    passed = " ".join(json.dumps(s.call.arguments, ensure_ascii=False) for s in steps).lower()
    items = request_items(conversation.user, runner.tools, names=any(_searches(runner, t) for t in runner.tools))
    # A name any call of this turn passed or returned is done, but for one the engine looked up itself.
    seen = _folded(" ".join(_text(s) for s in steps))
    left = [i for i in items if i.lower() not in touched and not (_is_path(i) and i.lower() in passed)
            and not (_is_name(i) and i not in runner.repairs.items_sought and _words(i) & _words(seen))]
    done = {(s.call.name, k, v) for s in writes for k, v in s.call.arguments.items()}
    return list(dict.fromkeys([*left, *(v for v, (t, k) in labels(runner, conversation.user).items()
                                        if (t, k, v) not in done)]))


def labels(runner: Any, request: str) -> dict[str, tuple[str, str]]:
    """The labels ``request`` dictates for writes one by one: where it gives an optional text
    of a write two values or more by name ("$600 with memo Rent, then a separate $600 with memo
    Car payment"), each is a write of its own; label -> (tool, argument)."""
    out: dict[str, tuple[str, str]] = {}
    for tool in runner.tools:
        if runner.writes(tool.name) is not True:
            continue
        required = set(tool.parameters.get("required") or ())
        for name, schema in (tool.parameters.get("properties") or {}).items():
            if name in required or not isinstance(schema, dict) or schema.get("type") != "string" or "enum" in schema:
                continue
            if len(given := list(dict.fromkeys(dictated_as(name, request)))) > 1:
                out.update({v: (tool.name, name) for v in given})
    return out


def _its_own(step: CallStep, items: list[str]) -> bool:
    """Whether a write's failure (real, or foreseen for a held one) is its item's alone, so the
    request's other ``items`` may still go through: its message names everything the call acts
    on, or something the user did not write among what it acts on, or an item of theirs that
    is not ("patron P-1100 already has a hold on BK-005", "... on Dune"). "patron P-1077
    already has 3 holds" or "account ACC-1004 is frozen" names only what the user wrote for
    every item, and ends them."""
    failure = step.rehearsed if step.held else step.real
    error = failure.get("error") if isinstance(failure, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    acted = [str(v) for v in acts_on(step.call).values()]
    if not isinstance(message, str) or not acted:
        return False
    written = [v for v in acted if v in items]
    return (all(v in message for v in acted) or any(v in message for v in acted if v not in written)
            or any(i.lower() in message.lower() for i in items if i not in written))


def _is_name(item: str) -> bool:
    """Whether ``item`` is a name or quoted words, not an identifier or a path."""
    return item[:1].isupper() and not _is_path(item) and bool(_words(item))


def _folded(text: str) -> str:
    """``text`` lowercased, its accents dropped ("Márquez": "marquez")."""
    return "".join(c for c in unicodedata.normalize("NFKD", text.lower()) if not unicodedata.combining(c))


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]{4,}", _folded(text)))


def _searches(runner: Any, tool: Tool) -> bool:
    """Whether ``tool`` is a read that takes the user's words (the environment says it quotes them)."""
    return runner.writes(tool.name) is False and bool(runner.committer.quoting(tool))


def _identifier(item: str, tools: list[Tool]) -> bool:
    """Whether ``item`` has the declared shape of an identifier some tool takes."""
    return any(p.fullmatch(item) for t in tools for p in identifier_patterns(t).values())


def _is_path(item: str) -> bool:
    return item.startswith("/") or bool(FILE_WRITTEN.fullmatch(item))


def _steps(conversation: Conversation) -> list[CallStep]:
    return [s for turn in conversation.turns if not turn.superseded for s in turn.calls]


def _text(step: CallStep) -> str:
    return json.dumps(step.call.arguments, ensure_ascii=False) + " " + json.dumps(step.real, ensure_ascii=False, default=str)


def touches(call: ToolCall, items: list[str], steps: list[CallStep], runner: Any, request: str = "") -> str | None:
    """The item ``call`` touches, where it may be taken: it passes the item (a write, as an
    identifier or a path), or an identifier a read about the item returned; never a call made
    already, nor a write of the same tool on the same identifiers and paths as one that went
    through, unless it passes a label ``request`` dictates for a write of its own (``labels``).
    None otherwise."""
    if any(s.call.name == call.name and s.call.arguments == call.arguments for s in steps):
        return None
    # A label dictated for a write of its own: the same accounts again, under the other memo.
    given = labels(runner, request) if request else {}
    if runner.writes(call.name) is True and (label := next((v for k, v in call.arguments.items() if v in items
                                                            and given.get(v) == (call.name, k)), None)):
        return label
    where = acts_on(call)
    if runner.writes(call.name) is True and where and any(
            s.call.name == call.name and not s.held and s.real is not None and not is_error(s.real)
            and acts_on(s.call) == where for s in steps):
        return None
    # A write touches an item through what it acts on, never through free text (a memo "Ben").
    acted = where if runner.writes(call.name) is True else call.arguments
    passed = [str(v).lower() for v in acted.values() if isinstance(v, (str, int, float))]
    for item in items:
        low = item.lower()
        if any(low in v or (len(v) >= 4 and v in low) for v in passed):
            return item
        found = _ids_about(low, steps, runner)
        if any(str(v) in found for k, v in call.arguments.items() if names_identifier(k)):
            return item
    return None


def _ids_about(item: str, steps: list[CallStep], runner: Any) -> set[str]:
    """Identifiers the results of reads that passed ``item`` hold."""
    out: set[str] = set()
    for s in steps:
        if runner.writes(s.call.name) is True or s.real is None or is_error(s.real):
            continue
        if any(item in str(v).lower() for v in s.call.arguments.values()):
            out |= set(_identifier_values(s.real))
    return out


def _identifier_values(value: Any) -> Iterable[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            if names_identifier(k) and isinstance(v, str):
                yield v
            else:
                yield from _identifier_values(v)
    elif isinstance(value, list):
        for v in value:
            yield from _identifier_values(v)


class Planned:
    """A call the actor drew, made next in its place (``Repairs.next_action``)."""

    def __init__(self, gen: Generation, why: str):
        self.gen, self.why = gen, why

    def choice_left(self) -> bool:
        return False

    def next_step(self, runner: Any) -> Generator[Request, Generation, tuple[Generation, str] | None]:
        yield from ()  # drawn already
        return self.gen, Instead(self.why)


def more_items(runner: Any, turn: Turn, conversation: Conversation, where: str,
               rindex: int | None) -> Generator[Event | Request, Generation, bool]:
    """Whether the answer of ``turn`` was taken back for an item the request names that no
    write touched: then a call of the actor's that touches it is made next."""
    repairs = runner.repairs
    if not runner.config.finish_named_items or not runner.constrained or repairs.more_asked >= MAX_MORE:
        return False
    if not (items := untouched(runner, conversation)):
        return False
    repairs.more_asked += 1
    prompt = actor_prompt(runner.backend, conversation, runner.tools)
    steps = _steps(conversation)
    options = narrowings(offered(runner.tools, prompt, False, runner.config, runner.committer), items, steps,
                         runner, conversation.user)
    for tool, item in options[:DRAWS]:
        constraint = Constraint(role="actor", think_chars=0, tools=(tool,), require_call=True)
        gen = yield Request(prompt, constraint, "actor", "repair", None, temperature=0.0)
        action = parse_dictated(gen.text, runner.tool_names, runner.tools, conversation.requests(),
                                runner.config.dictated_case, require=True, cut=gen.finish_reason == "length",
                                writes=runner.writes)
        if (action.error or len(action.calls) != 1
                or touches(action.calls[0], [item], steps, runner, conversation.user) is None):
            continue
        repairs.refusal = Planned(gen, f"a call for {item}, which the request names and no write had touched")
        repairs.items_sought.add(item)
        turn.withdrawn = f"the request names {', '.join(items[:3])}, which no write has touched"
        yield TurnUpdated(where, rindex, turn, None, "acted")
        return True
    return False


def narrowings(tools: Iterable[Tool], items: list[str], steps: list[CallStep], runner: Any,
               request: str) -> list[tuple[Tool, str]]:
    """The calls that would touch an item, as tools with one argument held to it, likeliest
    first: a write of this turn given an identifier a read of the item found (the hold of the
    book the search for "Dune" found); a tool of this turn given the item where it passed one of
    its kind (an identifier of that shape, a path), the argument whose last value the request
    names after the same preposition first ("to ACC-1001 ... to ACC-1005"); a search given the item."""
    tools = list(tools)
    made = [s.call for s in steps]
    order = list(dict.fromkeys(c.name for c in reversed(made)))  # this turn's tools, the latest first
    used = sorted((t for t in tools if t.name in order), key=lambda t: order.index(t.name))
    found: list[tuple[int, Tool, str]] = []
    for item in items:
        about = sorted(_ids_about(item.lower(), steps, runner))
        for tool in used:
            last = next((c.arguments for c in reversed(made) if c.name == tool.name), {})
            fitting = {name: fits for name, schema in (tool.parameters.get("properties") or {}).items()
                       if (fits := _fitting(name, schema, about, last, item))}
            for name, fits in fitting.items():
                # The item in place of a value needs the request's word for it, the same preposition,
                # where two arguments could take it (from, to); where one identifier can ("a hold for
                # me (P-1042) and one for her - her card is P-1100"), the item's kind is enough. Not a
                # path: "if /notes/todo.txt is there, save mine as /notes/todo-2.txt" is no second write.
                if fits != [item]:
                    found.append((0, _held(tool, name, fits), item))
                elif _before(request, item) == _before(request, str(last.get(name))) != "":
                    found.append((1, _held(tool, name, fits), item))
                elif len(fitting) == 1 and names_identifier(name) and not _is_path(item):
                    found.append((2, _held(tool, name, fits), item))
        if (label := labels(runner, request).get(item)) is not None:
            found += [(0, _held(t, label[1], [item]), item) for t in used if t.name == label[0]]
        for tool in tools:  # an identifier ("P-1100") is no words to search for
            if not _is_path(item) and not _identifier(item, tools) and _searches(runner, tool):
                for name in runner.committer.quoting(tool):
                    found.append((3, _held(tool, name, [item]), item))
    return [(t, i) for _, t, i in sorted(found, key=lambda f: f[0])]


def _fitting(name: str, schema: Any, about: list[str], last: dict, item: str) -> list[str]:
    """The values argument ``name`` may be held to for ``item``: the identifiers a read of it
    found, where the argument is an identifier; the item, where the argument last took one of its kind."""
    if not isinstance(schema, dict) or schema.get("type") != "string":
        return []
    allowed = schema.get("enum")
    if names_identifier(name) and (ids := [v for v in about if allowed is None or v in allowed]):
        return ids
    previous = last.get(name)
    if not isinstance(previous, str) or previous == item:
        return []
    same_kind = (_is_path(item) and previous.startswith("/")) or (
        names_identifier(name) and allowed is not None and item in allowed)
    return [item] if same_kind else []


def _held(tool: Tool, name: str, values: list[str]) -> Tool:
    parameters = copy.deepcopy(tool.parameters)
    schema = parameters["properties"][name]
    schema.pop("pattern", None)
    schema["enum"] = list(values)
    return replace(tool, parameters=parameters)


def _before(text: str, value: str) -> str:
    """The preposition just before ``value``'s first place in ``text``, within three words of
    its clause ("to" of "to Ben's ACC-1003"); "" where there is none."""
    at = text.find(value)
    clause = re.split(r"[.;!?]", text[:at])[-1] if at > 0 else ""
    words = [w.lower() for w in re.findall(r"[A-Za-z]+", clause)][-3:]
    return next((w for w in reversed(words) if w in PREPOSITIONS), "")
