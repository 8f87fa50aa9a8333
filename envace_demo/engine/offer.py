"""What the actor's grammar offers at a turn: the tools whose identifiers the conversation can
fill, their quoted arguments held to the user's words, and in a request that asks a question,
no write it does not name."""

from __future__ import annotations

import re
from typing import Any

from envace_demo.engine.commit import Committer
from envace_demo.engine.config import EpisodeConfig
from envace_demo.engine.imagined import asks_a_question
from envace_demo.identifiers import ground
from envace_demo.quoted import quote
from envace_demo.schemas import Tool


def offered(tools: list[Tool], prompt: Any, last: bool, config: EpisodeConfig,
            committer: Committer | None = None) -> tuple[Tool, ...]:
    """The tools an actor turn's grammar may call: none past the last step; those whose
    identifiers the conversation can fill (``EpisodeConfig.grounded_ids``), their searches held to
    the user's words (``EpisodeConfig.quoted_args``); in a request that asks a question, none that
    may change or remove what is there (``EpisodeConfig.questions_keep``: a write the environment
    does not declare additive), nor an additive one it does not name (``names_write``), unless
    that leaves no tool at all."""
    if last:
        return ()
    # Quoted first: an identifier's declared pattern (ground replaces it) keeps ids out of the user's words.
    kept = quote(tools, prompt.messages, committer.quoting) if committer is not None and config.quoted_args else tools
    kept = ground(kept, prompt.messages) if config.grounded_ids else tuple(kept)
    request = latest_request(prompt.messages)
    if committer is None or not config.questions_keep or not asks_a_question(request):
        return kept
    keeps = tuple(t for t in kept if committer.writes(t) is not True
                  or (committer.additive(t) and names_write(t, request, tools, committer)))
    return keeps or kept


def names_write(tool: Tool, request: str, tools: list[Tool], committer: Committer) -> bool:
    """Whether ``request`` names what the write ``tool`` does: a word of its name or of its
    description's first sentence that no read-only tool has ("put it on hold" names
    ``place_hold``; "book" is every library tool's). Asked when a passport must be renewed, the
    actor read the todo list, then made the folder it was in."""
    reads = set().union(*(tool_words(t) for t in tools if committer.writes(t) is False))
    return bool((tool_words(tool) - reads) & words(request))


def tool_words(tool: Tool, described: bool = True) -> set[str]:
    """The words of a tool's name ("place_hold": place, hold) and, where ``described``, of its
    description's first sentence."""
    first = _SENTENCE_END.split(tool.description or "", maxsplit=1)[0] if described else ""
    return words(_CAMEL.sub(r"\1 \2", tool.name).replace("_", " ") + " " + first)


_SENTENCE_END = re.compile(r"[.!?](?:\s|$)")
_CAMEL = re.compile(r"([a-z])([A-Z])")


def words(text: str) -> set[str]:
    """Words of three letters or more, a plural as its singular ("holds": "hold"; "holding" stays)."""
    return {w.removesuffix("s") for w in re.findall(r"[a-z]{3,}", text.lower())}


def latest_request(messages: list[dict]) -> str:
    """The last user message (the request this turn answers)."""
    said = [m.get("content") for m in messages if m.get("role") == "user"]
    return said[-1] if said and isinstance(said[-1], str) else ""
