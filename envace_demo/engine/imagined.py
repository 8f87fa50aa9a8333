"""Where an imagined run stops: past its first write the world is imagined, and a read it
already made would only answer the same (``EpisodeConfig.imagined_until``); which of its
reads it fetches for real (``EpisodeConfig.imagined_reads``)."""

from __future__ import annotations

import re
from typing import Callable

from envace_demo.engine.config import EpisodeConfig
from envace_demo.fidelity import is_number, leaves
from envace_demo.grounding import values
from envace_demo.memory import seen
from envace_demo.models.base import Generation
from envace_demo.modes import ModePolicy
from envace_demo.prompts import Conversation
from envace_demo.record import CallStep, ToolCall, Turn, is_error

# Whether the offered tool of that name changes state, as the environment says (None: unknown).
Writes = Callable[[str], "bool | None"]


def ends_at(turn: Turn, writes: Writes, config: EpisodeConfig, policy: ModePolicy) -> bool:
    """Whether an imagined run ends after ``turn``: it rehearsed a write, whose predicted
    outcome is what the committed run needs to know; past it the world is imagined (a run
    with nothing to commit goes on)."""
    if config.imagined_until != "first_write" or not policy.commit:
        return False
    return any(writes(c.call.name) is not False for c in turn.calls)


def repeats_reads(before: list[Turn], calls: list[ToolCall], writes: Writes, config: EpisodeConfig,
                  policy: ModePolicy) -> bool:
    """Whether an imagined turn only repeats reads it already made, with no write since:
    in a world that has not changed they would answer the same, so the run ends there
    (in a mode that commits, where it is a rehearsal's cost; ``imagine`` goes on)."""
    if not policy.commit or config.imagined_until != "first_write":
        return False
    made = [c.call for t in before for c in t.calls]
    return all(writes(c.name) is False and c in made for c in calls)


def rereads(before: list[Turn], calls: list[ToolCall], writes: Writes) -> bool:
    """Whether every one of ``calls`` is a read that went through in ``before`` since the
    last turn that wrote (the state it read has not changed)."""
    since: list[CallStep] = []
    for t in before:
        since = [] if any(writes(c.call.name) is not False for c in t.calls) else since + t.calls
    made = [c.call for c in since if c.real is not None and not is_error(c.real)]
    return bool(calls) and all(writes(c.name) is False and c in made for c in calls)


def wrote(conversation: Conversation, turn: Turn, writes: Writes) -> bool:
    """Whether this run made (or imagined) a write before the last call of ``turn``."""
    before = [c for t in conversation.turns for c in t.calls] + turn.calls[:-1]
    return any(writes(c.call.name) is not False for c in before)


def fetches(step: CallStep, writes: Writes, config: EpisodeConfig, executes: bool) -> bool:
    """Whether an imagined run in the real world fetches ``step`` for real instead of
    rehearsing it: a valid call of a tool the environment declares read-only."""
    return config.imagined_reads == "fetch" and executes and bool(step.valid) and writes(step.call.name) is False


def short_answers(constrained: bool, policy: ModePolicy, config: EpisodeConfig) -> bool:
    """Whether an imagined answer is cut to its first character (under a grammar): in a
    mode that commits, whose actor never reads it (``imagine`` shows it as the result)."""
    return constrained and policy.commit and config.memory != "full"


def keeps(action, gen: Generation, required: bool, short: bool) -> bool:
    """Whether the lead imagined run's action may be taken by the committed actor: complete
    calls, drawn under the committed actor's grammar (a ``short`` imagined answer shifts the
    odds towards a call, unless a call was ``required`` anyway)."""
    return (required or not short) and complete(action, gen)


def complete(action, gen: Generation) -> bool:
    """Calls, parsed, and not cut by the token budget."""
    return bool(action.calls) and not action.error and gen.finish_reason == "stop"


def plans_write(action, gen: Generation, writes: Writes) -> bool:
    """Whether an action drawn under the short-answer grammar is still the plan to follow
    (``EpisodeConfig.follow_rehearsed_writes``): complete, with a write among its calls. It
    is taken only once its rehearsal let it through (``goes_through``)."""
    return complete(action, gen) and any(writes(c.name) is not False for c in action.calls)


# A sentence that opens as a question asks for information (what, which, ..., is, does, ...);
# "Could you place a hold ..." is an instruction, worded politely.
# A question word may follow its preposition: "By when am I supposed to renew it?", "On which shelf ...".
_QUESTION = re.compile(r"(?:^|[.!?]\s+)(?:(?:(?:by|in|at|on|for|from|to|since|until|with|of|about)\s+)?"
                       r"(?:what|which|who|whom|whose|where|when|why|how)|is|are|was|were|does|do|did|has|have)\b",
                       re.IGNORECASE)
# So does a question put after a clause, up to its question mark: "..., which atm was it?",
# "According to my budget, how much did I spend?", "... ACC-1001 - what's the total?".
_ASKING_CLAUSE = re.compile(r"(?:[,;:]|\s[-\u2013\u2014])\s*(?:(?:and|but|so|then)\s+)?"
                            r"((?:what|which|who|whom|whose|where|when|why|how)\b[^.!?]*\?)", re.IGNORECASE)


# And so does a sentence that asks for information as a statement: "I need the transaction ID of
# the electric bill payment for a dispute form", "tell me ...", "I'd like to know ...". "I need my
# account frozen" is an instruction: a need counts only where what is needed is a thing read.
_TELL = re.compile(r"(?:^|[.!?]\s+)(?:(?:hey|hi|hello|ok|okay|so|please|pls)[,!]?\s+)*(?:(?:can|could|would) (?:you|u)\s+)?"
                   r"(?:please\s+)?(?:tell me|let me know|show me|find out|look up|remind me"
                   r"|i(?:'d| would)? (?:need|want|like) to (?:know|find out|see)|i(?:'m| am) (?:wondering|curious)"
                   r"|i (?:need|want|would like|'d like) (?:the|my)\s+(?:[\w-]+\s+){0,3}?(?:id|number|name|balance|date"
                   r"|amount|title|author|owner|status|reason|size|year|shelf|total|limit|details|history|reference|code|month"
                   r"|day|contents?|summary|list|titles|count|address)\b(?!\s+(?:to be|be)\b))",
                   re.IGNORECASE)

# "I need the balance moved to savings": what is needed done (after what is needed) is an instruction.
_DONE = re.compile(r"\b(?:\w{3,}ed|sent|paid|withdrawn|frozen|written|made|put|held)\b", re.IGNORECASE)

# The words that set a place or a party before what they name ("to ACC-1003", "on my checking").
PREPOSITIONS = frozenset("to from into onto in on at for of by with under over about".split())
# The verbs an instruction opens with.
ORDER_VERBS = (r"(?:deposit|withdraw|transfer|move|send|pay|freeze|save|write|create|make|delete|remove|rename|put"
               r"|place|reserve|hold|copy|add|set|change|update|take)")
_ORDER = re.compile(rf"(?:(?:hey|hi|hello|ok|okay|so|please|pls)[,!]?\s+)*{ORDER_VERBS}\b", re.IGNORECASE)


def asking_clause(sentence: str) -> str:
    """The question a sentence puts after a clause ("looking at ACC-1003 - how much was his last
    payroll deposit?": "how much was ..."), else the sentence."""
    if _QUESTION.match(sentence.strip()) or (m := _ASKING_CLAUSE.search(sentence)) is None:
        return sentence
    return m.group(1)


def asks_a_question(request: str) -> bool:
    """Whether a sentence of ``request`` opens as a question, or ends in a question put after a
    clause, or asks for information as a statement (``_TELL``). Asked "i took some cash out of
    an atm on ACC-1001, which atm was it?", the small actor withdrew 1000 USD: read as an
    instruction, it was offered the write; told "I need the transaction ID of the electric bill
    payment", it transferred 1000 USD."""
    text = request.strip()
    if _QUESTION.search(text) or _ASKING_CLAUSE.search(text):
        return True
    # "Deposit $20. Tell me the new balance." asks after an instruction: the request is that instruction.
    sentences = re.split(r"(?<=[.!?])\s+", text)
    return not any(_ORDER.match(s) for s in sentences) and any(
        (m := _TELL.search(s)) and not _DONE.search(s, m.end()) for s in sentences)


def orders(request: str) -> str:
    """The sentences of ``request`` that do not ask a question (``asks_a_question``): where it
    asks for writes. "please freeze ACC-1005. Also, what balance is in it?" orders the freeze."""
    return " ".join(s for s in re.split(r"(?<=[.!?])\s+", request.strip()) if not asks_a_question(s))


def asked_for(action, request: str, writes: Writes) -> bool:
    """Whether the user's ``request`` can have asked for the writes of an imagined action
    (``EpisodeConfig.follow_rehearsed_writes``): worded as an instruction, not a question,
    and every number in the writes' arguments stated in it (``grounding.values``: an
    identifier's digits state no number). An imagined answer is cut to one
    character, so an imagined run calls where the actor would have answered: on "What is the
    balance of ACC-1003?" it deposited the balance it had read."""
    if asks_a_question(request):
        return False
    used = {v for c in action.calls if writes(c.name) is not False
            for _, leaf in leaves(c.arguments) if is_number(leaf) for v in values(repr(float(leaf)))}
    return used <= values(request)


def goes_through(turn: Turn) -> bool:
    """Whether every call of an imagined ``turn`` was valid and came back a success: real
    for a fetched read, rehearsed (not cut) for the rest."""
    return all(step.valid and not step.rehearsal_cut and (told := seen(step)) is not None and not is_error(told)
               for step in turn.calls)


def imagined_action(actions: dict[str, tuple[Generation, int, int]], prompt: str, k: int):
    """The lead imagined run's action for this committed actor ``prompt`` at turn ``k``
    (taken once: removed from ``actions``), or None."""
    taken = actions.get(prompt)
    if taken is None or taken[2] != k:
        return None
    del actions[prompt]
    return taken
