"""A question's read that holds none of the question's words: the other read of the same
entity is made in the actor's place (``EpisodeConfig.read_instead``).

Asked "How much did the rent payment on ACC-1001 come to?", the small actor read the
account (owner, balance, status) and answered its balance: nothing in that result speaks
of rent or payments, while the account's transactions do. A read is free, so where a
committed read's real result shares no word with the question (the sentences that ask,
where the request says elsewhere where to look: "My checking account is ACC-1001"), the
engine makes another
read of the same identifier (the same ``*_id`` arguments, a tool the environment declares
read-only), for real. The read whose result speaks to the question stays in the actor's
history, the other leaves it (``Turn.superseded``; both stay in the record). One such switch
per read, never a write, and only where the request asks something."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Generator

from envace_demo.engine.imagined import PREPOSITIONS, asking_clause, asks_a_question
from envace_demo.engine.instead import Instead, made_call
from envace_demo.events import TurnUpdated
from envace_demo.identifiers import names_identifier
from envace_demo.models.base import Generation
from envace_demo.prompts import Conversation
from envace_demo.record import CallStep, ToolCall, Turn, is_error
from envace_demo.scheduler import Request
from envace_demo.schemas import Tool

_WORD = re.compile(r"[a-z]{3,}")
_SENTENCE = re.compile(r"(?<=[.?!])\s+")
# Words a question asks with, not about: sharing only these says nothing of what was asked.
_ASKING = frozenset(
    "the and for with from what which who whom whose where when why how does did can could would will should "
    "there their them they this that these those have has had was were are been being about into onto over "
    "please tell know want need much many any some all just right now currently current moment again also "
    "you your yours mine our ours his her hers its come came goes going get got give look find show see "
    "like yes not don doesn isn wasn hey thanks thank okay".split()
)


_MONTHS = {m[:3]: m for m in ("january february march april may june july august september october november "
                              "december").split()}


def stem(word: str) -> str:
    """One form for a word and its inflections ("holding", "holds", "hold"); a month's name
    and its short form are one ("February", "feb")."""
    if word[:3] in _MONTHS and _MONTHS[word[:3]].startswith(word):
        return word[:3]
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def stems(text: str) -> set[str]:
    """The words of ``text`` (three letters or more), stemmed."""
    return {stem(w) for w in _WORD.findall(text.lower())}


def asked(request: str, call: ToolCall) -> set[str]:
    """The words ``request`` asks about, stemmed: neither asking words, nor the call's arguments,
    nor the words that name an argument where it is written ("on my checking account ACC-1001":
    any read of the account speaks of its kind; the question asks about the grocery run)."""
    passed = set().union(*(stems(str(v)) for v in call.arguments.values()))
    naming: set[str] = set()
    for value in call.arguments.values():
        for m in re.finditer(re.escape(str(value)), request, re.IGNORECASE) if str(value).strip() else ():
            before = request[: m.start()].split()[-_NAMING_WORDS:]
            # The phrase that names it begins after its preposition: "the rent payment on ACC-1001" names none.
            plain = [w.lower().strip(",;:-?") for w in before]  # nor "which sign has ACC-1001": a verb ends it
            cut = max((i + 1 for i, w in enumerate(plain) if not w or w in PREPOSITIONS or w in _ASKING), default=0)
            naming |= stems(" ".join(before[cut:]))
    return {stem(w) for w in _WORD.findall(request.lower()) if w not in _ASKING} - passed - naming


_NAMING_WORDS = 3  # the words before an identifier that name it: "my checking account ACC-1001"


def question(request: str) -> str:
    """The sentences of ``request`` that ask: "How much did I pay in rent? My checking account
    is ACC-1001." asks about rent; the account and its kind only say where to look, and any
    account's read speaks of them; a question put after a clause is that question ("looking
    at ben okafor's checking - how much was his last payroll deposit?": the owner's name in the
    account's read says nothing of the payroll). The whole request where no sentence asks."""
    asking = [asking_clause(s) for s in _SENTENCE.split(request.strip())
              if s.rstrip().endswith("?") or asks_a_question(s)]
    return " ".join(asking) or request


def spoken(result: Any, words: set[str]) -> set[str]:
    """The ``words`` a result (its keys and values) holds."""
    text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
    return words & stems(text)


@dataclass
class Aside:
    """A committed read whose result holds none of the question's words, and the other read
    of its entity made for it."""

    turn: Turn  # the read's turn, last in the history when it ran
    conversation: Conversation  # live
    other: ToolCall  # the other read of the same identifier
    words: set[str]  # what the question asks about
    stage: int = 0  # 0: the other read is next; 1: it ran, the two are weighed next; 2: done

    def choice_left(self) -> bool:
        return self.stage == 1  # kept for the weighing, before the actor's next prompt (``weigh``)

    def next_step(self, runner: Any) -> Generator[Request | TurnUpdated, Generation, tuple[Generation, str] | None]:
        """The other read, made in the actor's place; None where the history moved on."""
        yield from ()  # a step of the plan's kind (``Repairs.next_action``), though it asks no model
        turns = self.conversation.turns
        if self.stage != 0 or not turns or turns[-1] is not self.turn:
            return None
        self.stage = 1
        read = self.turn.calls[0].call.name
        return made_call(self.other), Instead(f"{self.other.name} of the same {_key(self.other)}: "
                                              f"{read}'s result holds none of the question's words")

    def weigh(self) -> Generator[TurnUpdated, None, None]:
        """Once the other read ran: the one that speaks to the question stays in the actor's
        history, the other leaves it (where the other holds none of the words either, the
        actor's own read stays)."""
        turns, self.stage = self.conversation.turns, 2
        made = turns[-1] if turns and turns[-1].calls and turns[-1].calls[-1].call == self.other else None
        if made is None or self.turn not in turns:
            return
        step = made.calls[-1]
        found = set() if step.real is None or is_error(step.real) else spoken(step.real, self.words)
        loser, reason = ((self.turn, f"{self.other.name}'s result speaks of {', '.join(sorted(found))}")
                         if found else (made, "its result holds none of the question's words either"))
        turns.remove(loser)
        loser.superseded = reason
        yield TurnUpdated("commit", None, loser, None, "acted")


def _key(call: ToolCall) -> str:
    return ", ".join(str(v) for v in call.arguments.values())


def missed_read(runner: Any, turn: Turn, step: CallStep, conversation: Conversation) -> Aside | None:
    """The ``Aside`` of ``step``, a committed read that went through in a request that asks
    something, where its result holds none of the question's words and another read-only tool
    takes the same identifiers; None otherwise."""
    request = conversation.user
    if (len(turn.calls) != 1 or step.real is None or is_error(step.real) or runner.writes(step.call.name) is not False
            or not (asks_a_question(request) or "?" in request)):
        return None
    words = asked(question(request), step.call) or asked(request, step.call)
    if not words or spoken(step.real, words):
        return None
    for tool in runner.tools:
        if tool.name != step.call.name and runner.writes(tool.name) is False:
            if (other := same_entity(tool, step.call)) is not None:
                return Aside(turn, conversation, other, words)
    return None


def same_entity(tool: Tool, call: ToolCall) -> ToolCall | None:
    """A call of ``tool`` on the identifiers ``call`` passed, where every argument ``tool``
    requires is an identifier ``call`` passed under the same name; None otherwise."""
    required = list(tool.parameters.get("required") or ())
    if not required or not all(names_identifier(k) and k in call.arguments for k in required):
        return None
    return ToolCall(tool.name, {k: call.arguments[k] for k in required})
