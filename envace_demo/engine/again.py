"""A search that found nothing is made again with other words of the user's
(``EpisodeConfig.search_again``).

Asked whether The Murder of Roger Ackroyd is on the shelf, the small actor searched the catalog
for "the shelf"; asked for anything by Richard Dawkins, for "the title". Both found nothing,
and the answers said the library has no such book. Where a committed read of an argument the
environment says quotes the user (``Environment.quoting``: the catalog's query) went through
and found nothing (every list in its result empty), the actor's next action is the same
search, required, its quoted argument held to the other runs of the user's words
(``quoted.runs``): never the words that found nothing, nor a run holding them, since a search
that must match every word finds no more with more words. Drawn greedily: the actor still
chooses the words. Once per search the actor made, at most ``MAX_AGAIN`` times per user turn.
Only decoding changes; the search runs for real like any other."""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Any, Generator

from envace_demo.engine.instead import Instead
from envace_demo.models.base import Constraint, Generation
from envace_demo.prompts import Conversation, actor_prompt
from envace_demo.quoted import quote
from envace_demo.record import CallStep, Turn, is_error
from envace_demo.scheduler import Request
from envace_demo.schemas import Tool, find_tool

MAX_AGAIN = 2  # searches made again, per user turn


def found_nothing(result: Any) -> bool:
    """Whether a read's result lists nothing: an empty list, or a record whose lists are all
    empty (``{"total": 0, "results": []}``)."""
    if isinstance(result, list):
        return not result
    lists = [v for v in result.values() if isinstance(v, list)] if isinstance(result, dict) else []
    return bool(lists) and not any(lists)


@dataclass
class Again:
    """The search to make again, and the words that found nothing."""

    conversation: Conversation  # live
    tool: Tool
    tried: dict[str, list[str]]  # quoted argument -> values that found nothing in this user turn

    def choice_left(self) -> bool:
        return False

    def next_step(self, runner: Any) -> Generator[Request, Generation, tuple[Generation, str] | None]:
        """The actor's search with other words, or None where the user's words hold no other run."""
        prompt = actor_prompt(runner.backend, self.conversation, runner.tools)
        # Quoted among all the tools, so every identifier shape is kept out of the runs ("P-1100").
        quoted = next(t for t in quote(runner.tools, prompt.messages, runner.committer.quoting) if t.name == self.tool.name)
        parameters = copy.deepcopy(quoted.parameters)
        for name, tried in self.tried.items():
            schema = parameters["properties"][name]
            left = [v for v in schema.get("enum", []) if not any(t.lower() in v.lower() for t in tried)]
            if not left:
                return None
            schema["enum"] = left
        constraint = Constraint(role="actor", think_chars=0, tools=(replace(quoted, parameters=parameters),),
                                require_call=True)
        gen = yield Request(prompt, constraint, "actor", "repair", None, temperature=0.0)
        said = ", ".join(f'"{v}"' for values in self.tried.values() for v in values)
        return gen, Instead(f"{self.tool.name} again with other words of the user's: {said} found nothing")


def empty_search(runner: Any, turn: Turn, step: CallStep, conversation: Conversation) -> Again | None:
    """The search of ``step`` to make again, where it is a committed read of a quoting
    argument that went through and found nothing (``Again``); None otherwise."""
    repairs = runner.repairs
    tool = find_tool(runner.tools, step.call.name)
    if (not runner.config.search_again or not runner.constrained or tool is None or repairs.searched_again >= MAX_AGAIN
            or runner.writes(step.call.name) is not False or step.real is None or is_error(step.real)
            or not found_nothing(step.real)):
        return None
    names = [n for n in runner.committer.quoting(tool) if isinstance(step.call.arguments.get(n), str)]
    if not names:
        return None
    steps = [s for t in [*conversation.turns, turn] for s in t.calls
             if s.call.name == step.call.name and s.real is not None and not is_error(s.real) and found_nothing(s.real)]
    repairs.searched_again += 1
    return Again(conversation, tool, {n: list(dict.fromkeys(v for s in steps if (v := s.call.arguments.get(n)))) for n in names})
