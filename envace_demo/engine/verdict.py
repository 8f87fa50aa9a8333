"""A prediction changes the plan, never the verdict (``EpisodeConfig.check_given_up``).

A held call (its rehearsal foresaw a failure) gives the actor the chance of another path.
If it answers instead, with no real write gone through since the hold, its answer is set
aside and the held call runs for real: a wrong prediction of failure costs time, not the task. An answer
resting on the memory alone (a failure an imagined run foresaw, no real write, the foreseen
tool never tried) is set aside once and asked again without the memory.

A failure the rehearser was sure of (``EpisodeConfig.trust_certainty``: the probability it
gave the failure where it chose it, ``certainty.py``) is trusted instead: the answer stands
and the failing write never runs. That is where rehearsal saves a real error.

A held call asked again runs for real. Where its real result contradicts the foreseen
failure (another outcome, or another error), the held turn leaves the actor's history: the
actor answers from what the call really did, not from a failure that never happened."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Generator

from envace_demo import memory as memory_mod
from envace_demo.context import shots
from envace_demo.engine.commit import Committer
from envace_demo.engine.rehearsal import score_call
from envace_demo.grounding import codes
from envace_demo.events import Event, MemoryReady, TurnUpdated
from envace_demo.prompts import Conversation
from envace_demo.record import CallStep, ToolCall, Turn, error_code, is_error, rehearsal_failed
from envace_demo.schemas import Tool, find_tool


@dataclass
class Held:
    """A held call of the committed run: where it is, and how many real results came before."""

    turn: Turn
    at: int
    step: CallStep
    known: int


@dataclass
class RunState:
    """What one trajectory remembers between its turns."""

    check_given_up: bool
    trust_certainty: float | None = None
    held_keys: set[str] = field(default_factory=set)  # calls held once (asked again, they run)
    withdrawn: bool = False  # an answer taken back once for values only rehearsals had
    retold: bool = False  # an answer taken back once for leaving out the last call's failure
    asked_again: int = 0  # answers taken back for leaving out what the question asked (asked.py)
    condition_read: bool = False  # the reads a write's condition needed were made first (condition.py)
    # The next turn answers (no call on offer, no imagined action taken): an answer worded
    # again without the memory, or one after writes nobody asked for were dropped.
    answer_next: bool = False
    pending: list[Held] = field(default_factory=list)  # held calls still looking for another path

    def executed(self, step: CallStep) -> None:
        """A real call ran: a write that went through is another path, and the held calls are
        moot. One that failed found no path: the other holds stay pending, to be checked
        before an answer stands (its own hold, asked again, is resolved)."""
        if step.write and step.error is None and not is_error(step.real):
            self.pending.clear()
        else:
            self.pending = [h for h in self.pending if h.step.call != step.call]

    def trusts(self, certainty: float | None) -> bool:
        """Whether a foreseen failure of this ``certainty`` stands without being run."""
        if not self.check_given_up:
            return True
        return self.trust_certainty is not None and certainty is not None and certainty >= self.trust_certainty

    def stands(self, step: CallStep) -> bool:
        """Whether a held call's foreseen failure stands without being run: sure enough, or one
        the facts stated from real reads rule (``CallStep.ruled``); and, where it is checked,
        one whose message tells nothing only the rehearsal had (``foreseen_unread``)."""
        if not self.check_given_up:
            return True
        return (self.trusts(step.certainty) or step.ruled) and not foreseen_unread(step)

    def set_aside(self, conversation: Conversation, memory: dict | None) -> str | None:
        """Why an answer given now is set aside, or None: then it stands, and the held calls
        still pending are trusted (``CallStep.trusted``)."""
        doubted = [h for h in self.pending if not self.stands(h.step)]
        if doubted:
            names = ", ".join(h.step.call.name for h in doubted)
            return (f"it answered while the held {names} had found no other path; the foresight is checked for "
                    "real before the actor answers again")
        if self.check_given_up and answered_from_memory(conversation, memory, self.trusts):
            return ("it answered from a failure only an imagined run foresaw, trying no write; the foresight is "
                    "checked for real: asked again without the memory")
        for held in self.pending:
            held.step.trusted = True
        return None

    def take(self) -> list[Held]:
        """The held calls to run for real now: those not trusted (the trusted ones stay
        pending, to stand with the next answer)."""
        stands = [self.stands(h.step) for h in self.pending]
        out = [h for h, ok in zip(self.pending, stands) if not ok]
        self.pending = [h for h, ok in zip(self.pending, stands) if ok]
        return out


def foreseen_unread(step: CallStep) -> list[str]:
    """The codes of a held call's foreseen failure message (``grounding.codes``) that neither
    its arguments nor the real reads made for it hold: "account ACC-1004 is frozen (stolen_card)"
    where no read says why it is frozen. Told as the reason, they would be the rehearsal's (its
    numbers are ``grounding.ungrounded``'s to catch in the answer)."""
    error = step.rehearsed.get("error") if isinstance(step.rehearsed, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    if not isinstance(message, str):
        return []
    real = [step.call.arguments, *(c.get("result") for c in step.context or [] if isinstance(c, dict))]
    return sorted(codes(message) - codes(json.dumps(real)))


def answered_from_memory(conversation: Conversation, memory: dict | None,
                         trusts: Callable[[float | None], bool] = lambda _: False) -> bool:
    """Whether an answer rests on the memory's foreseen failures alone (those not
    ``trusts``-ed by their certainty): shown them, the actor made no real write in this
    user turn and tried no tool foreseen to fail."""
    if not conversation.memory or not memory:
        return False
    # A fetched read's error is real, not foreseen; an unparsed rehearsal foresaw nothing; a
    # sure foresight is trusted.
    foreseen = {c["name"] for a in memory.get("attempts", []) for c in a.get("calls", [])
                if c.get("predicted_error") and not c.get("fetched") and not rehearsal_failed(c.get("predicted"))
                and not trusts(c.get("certainty"))}
    made = [c for t in conversation.turns for c in t.calls]
    return bool(foreseen) and not any(c.write for c in made) and not foreseen & {c.call.name for c in made}


def check(
    held: Held,
    tool: Tool | None,
    committer: Committer,
    deadline: float,
    known_results: list,
    conversation: Conversation,
    real_results: list[tuple[ToolCall, Any]],
) -> None:
    """Run a held call for real after all, scored against what its rehearser was shown
    (the conversation before its turn, the real results then, its context reads)."""
    step = held.step
    committer.execute(step, tool, deadline)
    before = replace(conversation, turns=conversation.turns[: conversation.turns.index(held.turn)])
    context = [(ToolCall(c["call"]["name"], c["call"]["arguments"]), c["result"]) for c in step.context]
    score_call(step, tool, shots(known_results, real_results[: held.known], context), before)
    step.held, step.checked = False, True
    if step.error is None:
        real_results.append((step.call, step.real))


def run_checked(
    checked: list[Held], tools: list[Tool], committer: Committer, deadline: float, config, conversation: Conversation,
    real_results: list[tuple[ToolCall, Any]], memory: dict | None, check_limits: Callable[[], None],
) -> Generator[Event, None, None]:
    """Run each held call in ``checked`` for real after all (``check``), shown in place of its
    prediction; a contradicted memory is dropped as after any real call."""
    for held in checked:
        check(held, find_tool(tools, held.step.call.name), committer, deadline, config.known_results, conversation,
              real_results)
        yield TurnUpdated("commit", None, held.turn, held.at, "executed")
        yield from drop_contradicted(held.turn, held.step, conversation, memory, config.memory_fidelity_floor, held.at)
        check_limits()


def drop_contradicted(
    turn: Turn, step: CallStep, conversation: Conversation, memory: dict | None, floor: float | None,
    at: int | None = None,
) -> Generator[Event, None, None]:
    """Once a real response contradicts its rehearsal, the next turns read the real
    results alone (``EpisodeConfig.memory_fidelity_floor``); the memory record says where."""
    why = memory_mod.contradiction(step, floor) if conversation.memory else None
    if not why:
        return
    conversation.memory = None
    if memory is not None:
        at = len(turn.calls) - 1 if at is None else at
        memory["withdrawn"] = {"turn": turn.index, "position": at, "call": step.call.name, "why": why}
        yield MemoryReady(memory)


def drop_unasked(turn: Turn, state: RunState) -> bool:
    """Whether ``turn`` (in a request that asks a question) made only writes foreseen to fail:
    nobody asked for them, so they never run, trusted, and leave the actor's history; the
    actor answers from the real results next, no call on offer."""
    if not turn.calls or not all(c.held for c in turn.calls):
        return False
    for step in turn.calls:
        step.trusted = True
    state.pending = [h for h in state.pending if h.turn is not turn]
    turn.superseded = "a write the request did not ask for (it asks a question), foreseen to fail: not made"
    state.answer_next = True
    return True


def supersede(step: CallStep, conversation: Conversation) -> Turn | None:
    """The held turn of ``conversation`` that the real ``step`` contradicts, taken out of
    the actor's history (``Turn.superseded``), or None: a turn of held calls only, one of
    them this very call, its foreseen error not the real outcome."""
    if step.real is None:
        return None
    real = error_code(step.real) if is_error(step.real) else None
    for turn in conversation.turns:
        if not turn.calls or not all(c.held for c in turn.calls):
            continue
        for held in turn.calls:
            foreseen = error_code(held.rehearsed)
            if held.call == step.call and foreseen != real:
                conversation.turns.remove(turn)
                turn.superseded = (f"{step.call.name} ran for real and "
                                   f"{'failed with ' + real if real else 'succeeded'}, not {foreseen} as foreseen")
                return turn
    return None
