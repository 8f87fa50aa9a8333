"""What the actor's grammar offers at a turn: the tools whose identifiers the conversation can
fill, their quoted arguments held to the user's words, their optional choices and numbers to
those the user said, a write's amounts to numbers said or shown, and in a request that asks a
question, no write it does not name."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from envace_demo.engine.commit import Committer
from envace_demo.engine.config import EpisodeConfig
from envace_demo.engine.imagined import asks_a_question, orders
from envace_demo.grounding import values
from envace_demo.identifiers import ground, names_identifier
from envace_demo.negation import wished
from envace_demo.quoted import names_and_quotes, quote
from envace_demo.schemas import Tool
from envace_demo.verbatim import spans


def offered(tools: list[Tool], prompt: Any, last: bool, config: EpisodeConfig,
            committer: Committer | None = None) -> tuple[Tool, ...]:
    """The tools an actor turn's grammar may call: none past the last step; those whose
    identifiers the conversation can fill (``EpisodeConfig.grounded_ids``), their searches held to
    the user's words (``EpisodeConfig.quoted_args``); in a request that asks a question, none that
    may change or remove what is there (``EpisodeConfig.questions_keep``: a write the environment
    does not declare additive), nor an additive one it does not name (``names_write``), unless
    a sentence of it that asks nothing names the write, or that leaves no tool at all."""
    if last:
        return ()
    # Quoted first: an identifier's declared pattern (ground replaces it) keeps ids out of the user's words.
    kept = quote(tools, prompt.messages, committer.quoting) if committer is not None and config.quoted_args else tools
    if committer is not None and config.quoted_args:  # against an environment: a benchmark's schema keeps its own
        kept = [said_options(t, user_text(prompt.messages), committer.writes(t) is False) for t in kept]
    kept = ground(kept, prompt.messages) if config.grounded_ids else tuple(kept)
    if committer is not None and config.grounded_ids:
        numbers = values("\n".join(m["content"] for m in prompt.messages
                                   if m.get("role") in ("user", "tool") and isinstance(m.get("content"), str)))
        amounted = tuple(a for t in kept if (a := said_amounts(t, numbers, committer)) is not None)
        kept = amounted or kept
    request = latest_request(prompt.messages)
    if committer is not None and config.questions_keep and (unnamed := unnamed_changes(tools, request, committer)):
        kept = tuple(t for t in kept if t.name not in unnamed) or kept
    if committer is None or not config.questions_keep or not asks_a_question(request):
        return kept
    # A write a sentence that asks nothing names stays: "I'd like $400 in cash out of ACC-1003. How much is left?"
    ordered = orders(request)
    keeps = tuple(t for t in kept if committer.writes(t) is not True
                  or (committer.additive(t) and names_write(t, request, tools, committer))
                  or (ordered and names_write(t, ordered, tools, committer)))
    return keeps or kept


def dictates(orders: str, tool: Tool) -> bool:
    """Whether ``orders`` dictate the text ``tool`` writes: a span after a colon or in quotes
    (``verbatim.spans``), said to be what it holds ("a file called pancakes.txt containing: 2
    eggs", "with the line '- call mom'"), where the tool requires a text (``content``, ``text``,
    ``body``). Told to make a folder and put a file in it "containing: ...", the small actor made
    the folder and answered."""
    properties = tool.parameters.get("properties") or {}
    takes = any(name in _TEXTS and isinstance(properties.get(name), dict) and properties[name].get("type") == "string"
                for name in tool.parameters.get("required") or ())
    return takes and bool(spans(orders)) and bool(_HOLDS.search(orders))


_TEXTS = ("content", "text", "body")  # the arguments that hold what a write writes
_HOLDS = re.compile(r"\b(?:contain(?:ing|s)?|with (?:the )?(?:lines?|text|content|words?)|that (?:says|reads)|saying)\b",
                    re.IGNORECASE)


def ordered_writes(tools: list[Tool], request: str, writes: Any) -> list[Tool]:
    """The write tools that the sentences of ``request`` asking nothing (``imagined.orders``) name
    by a word of the tool's name no other tool has (``naming``), or whose text they dictate
    (``dictates``). ``writes``: tool name -> whether it writes."""
    ordered = orders(request)
    said = words(wished(ordered))
    return [t for t in tools if writes(t.name) is True and (naming(t, tools, writes) & said or dictates(ordered, t))]


def unnamed_changes(tools: list[Tool], request: str, committer: Committer) -> set[str]:
    """The writes that change or remove what is there (not declared additive) that no sentence
    of ``request`` asking nothing names, where those sentences name another write
    (``ordered_writes``): told to add a file "with the line '...'", and to save it under another
    name if one was there, the small actor moved the file that was there."""
    by_name = {t.name: committer.writes(t) for t in tools}
    named = {t.name for t in ordered_writes(tools, request, by_name.get)}
    return {t.name for t in tools if named and by_name[t.name] is True and t.name not in named
            and not committer.additive(t)}


def names_write(tool: Tool, request: str, tools: list[Tool], committer: Committer) -> bool:
    """Whether ``request`` names what the write ``tool`` does: a word of its name or of its
    description's first sentence that no read-only tool has ("put it on hold" names
    ``place_hold``; "book" is every library tool's). Asked when a passport must be renewed, the
    actor read the todo list, then made the folder it was in."""
    reads = set().union(*(tool_words(t) for t in tools if committer.writes(t) is False))
    return bool((tool_words(tool) - reads) & words(request))


def naming(tool: Tool, tools: list[Tool], writes: Any) -> set[str]:
    """The words of ``tool``'s name that name it alone: no read-only tool's name has them, nor
    another write's name or description ("create" is ``create_directory``'s, but ``write_file``
    "Creates the file": "create a file" names no folder)."""
    others = set().union(*(tool_words(t, described=False) | words(t.description or "") for t in tools
                           if t.name != tool.name and writes(t.name) is not False))
    reads = set().union(*(tool_words(t, described=False) for t in tools if writes(t.name) is False))
    return tool_words(tool, described=False) - reads - others


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


def said_amounts(tool: Tool, numbers: set[str], committer: Committer) -> Tool | None:
    """A write ``tool`` whose required numbers (an amount) take only those the user said or a
    result shown holds (``numbers``: a balance, a limit); None where a required number has none,
    so the write waits for a read. Asked for a transaction id "for a dispute form", the small
    actor transferred 1000 USD, a number no one had written; told to withdraw "every last cent",
    it withdrew 1000. A read is never held to anything."""
    properties = tool.parameters.get("properties")
    if committer.writes(tool) is not True or not isinstance(properties, dict):
        return tool
    held = dict(properties)
    for name in tool.parameters.get("required") or ():
        schema = properties.get(name)
        if not isinstance(schema, dict) or schema.get("type") not in ("integer", "number") or "enum" in schema:
            continue
        if not (fits := said_numbers(numbers, schema, positive=True)):
            return None
        held[name] = {**schema, "enum": fits}
    return tool if held == properties else replace(tool, parameters={**tool.parameters, "properties": held})


def said_options(tool: Tool, said: str, reads: bool = False) -> Tool:
    """``tool`` whose optional arguments take only what the user's words ``said`` give, and are
    left out where they give nothing: a choice (an ``enum``) they name ("science-fiction" needs
    both words), a number they hold, a free text that is a name or a quote of theirs ("Kazuo
    Ishiguro", 'IRS refund'), and, in a read (``reads``), a yes/no filter whose name they say
    ("available" for ``available_only``: asked for the oldest book, the actor read only the
    books on the shelf). Asked for the oldest book in the science section, the small actor
    browsed ``genre: "fiction"`` up to ``year_to: 1898``, which no one said, then ``author: "Jane
    Eyre"``: every one of 30 such filters in the stored runs came with a wrong answer. A filter
    left out only widens what is read. A required argument stays the model's."""
    properties = tool.parameters.get("properties")
    if not isinstance(properties, dict):
        return tool
    required = set(tool.parameters.get("required") or ())
    named, numbers, texts = words(said), values(said), None
    kept: dict[str, Any] = {}
    for name, schema in properties.items():
        if name in required and isinstance(schema, dict) and (choices := said_choices(schema.get("enum"), said)):
            kept[name] = {**schema, "enum": choices}
        elif name in required or not isinstance(schema, dict) or "const" in schema:
            kept[name] = schema
        elif isinstance(schema.get("enum"), list) and all(isinstance(v, str) for v in schema["enum"]):
            if choices := [v for v in schema["enum"] if (w := words(v.replace("-", " ").replace("_", " "))) and w <= named]:
                kept[name] = {**schema, "enum": choices}
        elif schema.get("type") in ("integer", "number") and "enum" not in schema:
            if fits := said_numbers(numbers, schema):
                kept[name] = {**schema, "enum": fits}
        elif (schema.get("type") == "string" and not {"enum", "pattern", "format"} & set(schema)
              and not names_identifier(name)):
            texts = names_and_quotes(said) if texts is None else texts
            if fitting := [t for t in texts if len(t) <= schema.get("maxLength", len(t))]:
                kept[name] = {**schema, "enum": fitting}
        elif reads and schema.get("type") == "boolean":
            if words(name.replace("_", " ")) - _FLAG_WORDS & named:
                kept[name] = schema
        else:
            kept[name] = schema
    if kept == properties:
        return tool
    return replace(tool, parameters={**tool.parameters, "properties": kept})


def said_choices(enum: Any, said: str) -> list[str] | None:
    """A required choice held to what the user's words say: the values all of whose words they
    say outside a negated clause ("my card was stolen": ``stolen_card``), else every value but
    those a negated clause names ("Nothing was lost or stolen": neither ``lost_card`` nor
    ``stolen_card``; the small actor froze the account for a lost card). None: as declared."""
    if not isinstance(enum, list) or not enum or not all(isinstance(v, str) for v in enum):
        return None
    wanted = words(wished(said))
    unwanted = words(said) - wanted
    spelt = {v: words(v.replace("-", " ").replace("_", " ")) for v in enum}
    named = [v for v in enum if spelt[v] and spelt[v] <= wanted]
    left = named or [v for v in enum if not spelt[v] & unwanted]
    return left if left and left != enum else None


_FLAG_WORDS = {"only", "include", "has", "with", "show"}


def said_numbers(numbers: set[str], schema: dict, positive: bool = False) -> list[float | int]:
    """The numbers of ``numbers`` (``grounding.values`` texts) that ``schema`` (an integer or a
    number) allows, in order; only those above zero where ``positive`` (an amount)."""
    found = sorted(float(n) for n in numbers if _number(n))
    fits = [n for n in found if _fits(n, schema) and (n > 0 or not positive)]
    return [int(n) for n in fits] if schema.get("type") == "integer" else fits


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _fits(n: float, schema: dict) -> bool:
    """Whether ``n`` is a value ``schema`` (an integer or number) allows."""
    if schema.get("type") == "integer" and n != int(n):
        return False
    low, high = schema.get("minimum"), schema.get("maximum")
    return (not isinstance(low, (int, float)) or n >= low) and (not isinstance(high, (int, float)) or n <= high)


def user_text(messages: list[dict]) -> str:
    """Every user message, as one text."""
    return "\n".join(m["content"] for m in messages if m.get("role") == "user" and isinstance(m.get("content"), str))
