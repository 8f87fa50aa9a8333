"""A write the request names by name, not made when the actor answers: the answer is taken
back once and the actor asked for that call (``EpisodeConfig.named_writes``).

Told "Please hold Anna Karenina for P-1100", the small actor looked the book up and answered
its shelf; nothing was held. Where the request names a write tool by a word of its name that no other tool has ("hold"
names ``place_hold``; "move" names no tool of the bank, "create" no folder where writing a file
"creates" it), no call of that tool was made in this user turn, the actor answered (nothing
held or failed), and the request sets no condition ("if", "unless", ...: the actor's reads may
have found it unmet) and names it outside a question ("What daily transfer limit is set?" names
a transfer as a thing), the answer is taken back (``Turn.withdrawn``) and the next action is a
call of those tools, required, its identifiers held to the conversation's, drawn greedily. The
call is rehearsed and committed like any other; once per user turn. After a write that went
through, a named write of another tool is asked for too: told to move money, then freeze the
account, the actor had moved it and answered "now frozen". (A first version asked after writes
when "create a file" still named ``create_directory``; ``naming`` no longer lets it.)"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Generator

from envace_demo.engine.condition import demanded, outside, real_results
from envace_demo.engine.instead import Instead
from envace_demo.engine.offer import offered, ordered_writes
from envace_demo.models.base import Constraint, Generation
from envace_demo.prompts import Conversation, actor_prompt
from envace_demo.record import is_error
from envace_demo.scheduler import Request
from envace_demo.schemas import Tool

_CONDITION = re.compile(r"\b(?:if|unless|whether|in case|only when|provided)\b", re.IGNORECASE)


def unmade(runner: Any, conversation: Conversation) -> list[Tool]:
    """The write tools ``conversation``'s request names (``naming``) and no call of this user
    turn made, where the actor answers: nothing held or failed in this user turn, and a
    sentence that is not a question names them, outside the clauses of a condition, or in a
    branch the real reads took (``condition.demanded``); [] otherwise."""
    request = conversation.user
    steps = [step for turn in conversation.turns for step in turn.calls]
    if any(s.held or s.real is None or is_error(s.real) for s in steps):
        return []
    called = {s.call.name for s in steps}
    if _CONDITION.search(request):
        # Asked under a condition: the writes of the branches the real reads took (condition.py).
        if not runner.config.weigh_conditions:
            return []
        taken = demanded(request, runner.tools, runner.writes, real_results(conversation.turns))
        # And what it orders outside every branch, whatever the reads say.
        return [t for t in taken if t.name not in called] + [
            t for t in _named(runner, outside(request), called) if t not in taken]
    # A question names a write as a thing, not a wish: "What daily transfer limit is set?". Only
    # the sentences that are not questions ask for writes: "please freeze ACC-1005. Also, what
    # balance is in it?" asks for the freeze.
    return _named(runner, request, called)


def _named(runner: Any, request: str, called: set[str]) -> list[Tool]:
    """The write tools the sentences of ``request`` that are not questions name, or whose text
    they dictate (``offer.ordered_writes``), and no call in ``called`` made."""
    return [t for t in ordered_writes(runner.tools, request, runner.writes) if t.name not in called]


@dataclass
class Unmade:
    """The call of a write the request named, asked of the actor after its answer was taken back."""

    conversation: Conversation  # live
    tools: list[Tool]  # the writes named and not made

    def choice_left(self) -> bool:
        return False

    def next_step(self, runner: Any) -> Generator[Request, Generation, tuple[Generation, str] | None]:
        """The actor's call of one of ``tools``, required, its identifiers the conversation's
        (``offer.offered``); None where none is on offer (no identifier for it yet)."""
        prompt = actor_prompt(runner.backend, self.conversation, runner.tools)
        names = {t.name for t in self.tools}
        tools = tuple(t for t in offered(runner.tools, prompt, False, runner.config, runner.committer)
                      if t.name in names)
        if not runner.constrained or not tools:
            return None
        constraint = Constraint(role="actor", think_chars=0, tools=tools, require_call=True)
        gen = yield Request(prompt, constraint, "actor", "repair", None, temperature=0.0)
        return gen, Instead(f"the {' or '.join(sorted(names))} the request asked for, not made before the answer")
