"""Arguments that quote the user: a catalog search's words are the user's own, and an
optional free text is a name or a quote of theirs (``names_and_quotes``).

Asked for a hold on "A Brief History of Time", the small actor searched the catalog for
"In P-1042"; asked for books by Kazuo Ishiguro, for "The library has no book on Kazuo
Ishiguro's name". Where an environment declares that an argument quotes the user
(``Environment.quoting``: the library's ``search_catalog.query``), the actor's grammar holds
it to a run of words of the user's messages (at most ``MAX_WORDS`` in a row, within one
sentence, no identifier among them: a card number is not a title; a possessive's "'s" left
out, since a search must match every word), and not one that opens with
a question's or a request's framing word or ends on a word that only links ("Does the library
have anything by" for "anything by Toni Morrison": every word of a search must match, so
those find nothing). Only decoding changes; the prompt shows every tool as the model was
trained (``EpisodeConfig.quoted_args``)."""

from __future__ import annotations

import copy
import re
from dataclasses import replace
from typing import Callable, Iterable

from envace_demo.identifiers import identifier_patterns
from envace_demo.schemas.tools import Tool

MAX_WORDS = 6
MAX_VALUES = 256  # the most runs one argument may take in a grammar: the latest message's first
_EDGE = "\"'`.,;:!?()[]{}<>\u201c\u201d\u2018\u2019"
_ENDS = ".!?"
_POSSESSIVE = re.compile(r"['\u2019]s$", re.IGNORECASE)
# Words a search run may not open with (a question's or a request's frame) or end on (a link).
_LINKS = frozenset("by of the a an for to in on and or with at from about any anything some something have has had "
                   "is are was were do does did be my your his her their our me you".split())
# A title may open with an article or a link ("The Road", "Of Mice and Men", "And Then There Were None").
_OPENERS = frozenset("what which who whom whose when where why how can could would will should please put place "
                     "hold reserve find get show tell give check".split()) | (_LINKS - {"the", "a", "an", "of", "in", "and"})


def runs(messages: Iterable[dict], identifiers: Iterable[re.Pattern] = ()) -> list[str]:
    """Runs of up to ``MAX_WORDS`` words of the user's messages, the latest message first,
    none across a sentence's end, none with a word an identifier pattern matches."""
    patterns = list(identifiers)
    said = [m["content"] for m in messages if m.get("role") == "user" and isinstance(m.get("content"), str)]
    out: list[str] = []
    for text in reversed(said):
        sentences: list[list[str]] = [[]]
        for raw in text.split():
            # A possessive is the name itself: "Nelson Mandela's" finds no author, "Nelson Mandela" does.
            word = _POSSESSIVE.sub("", raw.strip(_EDGE))
            if word and not any(p.fullmatch(word) for p in patterns):
                sentences[-1].append(word)
            elif word:
                sentences.append([])  # an identifier breaks the run
            if raw.rstrip("\"')\u201d\u2019").endswith(tuple(_ENDS)):
                sentences.append([])
        for words in sentences:
            for size in range(MAX_WORDS, 0, -1):
                out += [" ".join(run) for i in range(len(words) - size + 1) if _framed(run := words[i:i + size])]
    return list(dict.fromkeys(out))[:MAX_VALUES]


def _framed(run: list[str]) -> bool:
    """Whether ``run`` may be a search: it neither opens with a framing word nor ends on a link."""
    return run[0].lower() not in _OPENERS and run[-1].lower() not in _LINKS


def quote(tools: Iterable[Tool], messages: list[dict], quoting: Callable[[Tool], Iterable[str]]) -> tuple[Tool, ...]:
    """``tools`` with each argument ``quoting`` names for a tool held to runs of the user's
    words (``runs``). A tool left with no run to pass is left as it was."""
    tools = tuple(tools)
    found: list[str] | None = None  # drawn once, and only where a tool quotes: most turns have none
    out = []
    for tool in tools:
        names = [n for n in quoting(tool) if _free_string(tool, n)]
        if not names:
            out.append(tool)
            continue
        if found is None:
            found = runs(messages, [p for t in tools for p in identifier_patterns(t).values()])
        parameters = copy.deepcopy(tool.parameters)
        for name in names:
            schema = parameters["properties"][name]
            if values := [v for v in found if _fits(schema, v)]:
                schema["enum"] = values
        out.append(replace(tool, parameters=parameters))
    return tuple(out)


def _fits(schema: dict, value: str) -> bool:
    """Whether ``value`` meets the string's declared bounds (the grammar keeps them)."""
    if not schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", len(value)):
        return False
    try:
        return "pattern" not in schema or re.search(schema["pattern"], value) is not None
    except re.error:
        return True


def _free_string(tool: Tool, name: str) -> bool:
    schema = (tool.parameters.get("properties") or {}).get(name)
    return isinstance(schema, dict) and schema.get("type") == "string" and "enum" not in schema and "const" not in schema


_QUOTED = re.compile(r"""['"\u2018\u201c]([^'"\u2019\u201d]{2,60})['"\u2019\u201d](?!\w)""")
_NAME_RUN = re.compile(r"(?<![\w'\u2019])[A-Z][\w.'\u2019-]*(?:\s+(?:[A-Z][\w.'\u2019-]*|(?:de|van|von|le|la|du)\b))*")
# Capitalized for opening a sentence or a greeting, not for naming anyone.
_NOT_NAMES = frozenset("what what's which who whom whose when where why how is are was were do does did can could "
                       "would will should please put place hold reserve find get show tell give check hi hey hello "
                       "thanks i i'd i'm i've my the a an any anything some and or but if".split())


def names_and_quotes(said: str) -> list[str]:
    """The texts the user quoted ('IRS refund') and the runs of capitalized words that name
    someone or something ("Kazuo Ishiguro", "Ishiguro"): not a word capitalized only for
    opening a sentence ("Transfer $450 ...", "What's ..."), nor an identifier ("ACC-1001")."""
    out = [m.group(1).strip() for m in _QUOTED.finditer(said)]
    runs: list[list[str]] = []
    for m in _NAME_RUN.finditer(said):
        opens = m.start() == 0 or said[:m.start()].rstrip().endswith((".", "!", "?", "\n", ":"))
        runs.append([])
        for w in m.group(0).replace("\u2019", "'").split():
            if opens:
                opens = False  # a sentence's first word is capitalized for opening it ("Pay Ben Okafor")
            else:
                runs[-1].append(w)
            if len(w) > 2 and w.endswith((".", "!", "?")):  # a sentence ends here ("K." is an initial)
                runs.append([])
                opens = True
    for run in runs:
        run = [_POSSESSIVE.sub("", w.rstrip(",;:!?")) for w in run if not re.search(r"\d", w)]  # no id, no year
        if run:
            run[-1] = run[-1].rstrip(".")
        while run and run[0].lower() in _NOT_NAMES:
            run = run[1:]
        if run:
            out += [" ".join(run), *(w for w in run if len(run) > 1 and len(w) > 2)]
    return list(dict.fromkeys(t for t in out if t))
