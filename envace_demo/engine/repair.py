"""Another path for a held call, found by rehearsal before anything runs
(``EpisodeConfig.repair_candidates``).

A committed write whose rehearsal foresaw a failure is held. Shown the foreseen failure,
the small actor mostly reports it, even where the request can still be met (a file that
needs ``overwrite``, a folder to create first). So before it acts again, it is asked for a
few other calls (sampled, a write required). Each is rehearsed, and the first plan that
makes the user's own call go through is committed:

- a *variant*: the held call with every argument kept and one more given (``overwrite``),
  foreseen to succeed. It is the same request, only made so it works;
- a *prerequisite*: a call of a tool the environment declares additive (it only creates:
  ``"x-destructive": false``, MCP's ``destructiveHint``), whose every argument is a
  proper part of one of the held call's (the folder of a file's path), foreseen to
  succeed; then the held call itself, rehearsed after it, foreseen to succeed. Both run, in
  that order.

Every value the user gave stays (no other amount, path or content), and nothing is
removed or overwritten beyond what the held call itself asked. With no such plan the
actor acts as it would have: its own seed is untouched, the candidates draw from another
stream (``Request.where`` "repair")."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any, Generator

from envace_demo.engine.commit import asked, contradicts_call
from envace_demo.engine.aside import Aside, missed_read
from envace_demo.engine.again import Again, empty_search
from envace_demo.engine.detail import Detail
from envace_demo.engine.fallback import amount_calls, fallback_calls, rest_calls
from envace_demo.engine.items import Planned
from envace_demo.engine.offer import unnamed_changes
from envace_demo.engine.instead import Refusal, made_call, refused_read
from envace_demo.engine.unmade import Unmade, unmade
from envace_demo.events import TurnUpdated
from envace_demo.models.base import Constraint, Generation
from envace_demo.negation import wished
from envace_demo.prompts import Conversation, actor_prompt
from envace_demo.record import Action, CallStep, ToolCall, Turn, is_error, rehearsal_failed
from envace_demo.scheduler import Request
from envace_demo.schemas import Tool, find_tool
from envace_demo.validation import check_arguments
from envace_demo.verbatim import parse_dictated

# The candidates are drawn hotter than the actor acts: the point is calls it would rarely make.
CANDIDATE_TEMPERATURE = 1.0
# How sure a rehearsal must be that a write on what the request itself gives (its fallback, what it
# names) goes through: more likely than not. The values are the user's, not the actor's draw; the
# rehearser foresaw renaming the todo list to the name the user gave at 0.85.
LIKELY = 0.5
# The most calls a foreseen failure's named parts may chain before the held call (a folder, its parent...).
MAX_NAMED = 3


@dataclass
class Pending:
    """A held committed call waiting for the actor's next turn, and where it stands."""

    turn: Turn
    step: CallStep
    conversation: Conversation  # live: the held turn is its last
    real_results: list[tuple[ToolCall, Any]]  # live


def is_variant(held: ToolCall, other: ToolCall) -> bool:
    """``other`` is ``held`` with every argument kept and at least one more given."""
    kept = all(k in other.arguments and other.arguments[k] == v for k, v in held.arguments.items())
    return other.name == held.name and kept and len(other.arguments) > len(held.arguments)


def is_prerequisite(held: ToolCall, other: ToolCall, additive: bool) -> bool:
    """``other`` may be made first: an additive tool, every argument a proper part (a
    leading part) of a string ``held`` passes."""
    given = [v for v in held.arguments.values() if isinstance(v, str)]
    return (additive and other.name != held.name and bool(other.arguments)
            and all(isinstance(v, str) and v and any(g != v and g.startswith(v) for g in given)
                    for v in other.arguments.values()))


class Repairs:
    """The search for another path, at the committed actor's turn after a hold."""

    def __init__(self, runner: Any):
        self.runner = runner  # the committed run's TrajectoryRunner: its tools, rehearser and committer
        self.pending: Pending | None = None
        # The plan found, step by step: (the action, what the step is, for its turn's record).
        self.plan: list[tuple[Generation, str]] = []
        self.ran: tuple[list, int] = ([], 0)  # the real results, and how many there were when the plan was found
        # A committed read refused as the wrong kind, or one that missed the question, and the read made for it.
        self.refusal: Refusal | Aside | Unmade | Detail | Planned | Again | None = None
        self.named_asked = False  # a write the request named was asked for once (``engine/unmade.py``)
        self.searched_again = 0  # searches that found nothing, made again (``engine/again.py``)
        # Calls asked for items the request names that no write touched, and those items (``engine/items.py``).
        self.more_asked, self.items_sought = 0, set()

    def held(self, turn: Turn, step: CallStep, conversation: Conversation, real_results: list) -> None:
        """A committed call was held, surely: its other paths are looked for before the next turn."""
        # Only a grammar makes every candidate a call of a writing tool: free samples would mostly answer.
        # (A write held at any certainty, nobody having asked for it, leaves the history: _search.)
        wanted = self.runner.config.repair_candidates and self.runner.constrained and self.pending is None
        if wanted and len(turn.calls) == 1:
            self.pending = Pending(turn, step, conversation, real_results)

    def refused(self, turn: Turn, step: CallStep, conversation: Conversation) -> None:
        """A committed read ran: the read it was after comes next, where the environment names
        one for a failure (``engine/instead.py``), or where its result missed the question
        (``engine/aside.py``); a search that found nothing, again (``engine/again.py``)."""
        # A read made instead is not refused again: one switch, never a loop between two reads.
        if turn.instead:
            return
        found = self.runner.config.read_instead and (refused_read(self.runner, turn, step, conversation)
                                                     or missed_read(self.runner, turn, step, conversation))
        # A search made again has its own switch (``EpisodeConfig.search_again``), read in ``empty_search``.
        self.refusal = found or empty_search(self.runner, turn, step, conversation) or self.refusal

    def unmade(self, conversation: Conversation) -> str:
        """The writes the request names and no call made, asked for next (once per user turn),
        as their names; "" where there are none (``engine/unmade.py``)."""
        if self.named_asked or not self.runner.config.named_writes or not (tools := unmade(self.runner, conversation)):
            return ""
        self.named_asked, self.refusal = True, Unmade(conversation, tools)
        return " or ".join(t.name for t in tools)

    def weigh(self) -> Generator[TurnUpdated, None, None]:
        """Before the committed actor's next prompt: a read made for one that missed the
        question, weighed against it (``engine/aside.py``)."""
        if isinstance(aside := self.refusal, Aside) and aside.stage == 1:
            self.refusal = None
            yield from aside.weigh()

    def acts(self, last: bool) -> bool:
        """Whether a plan may give the committed actor's next action: past the last step, only
        the engine's own steps: a call drawn for an item the request named (``engine/items.py``),
        the reads of what the question asks (``engine/detail.py``: asked which books a card
        holds, the actor had spent its steps and the titles were never read), a named write."""
        return not last or isinstance(self.refusal, (Planned, Detail, Unmade))

    def next_action(self) -> Generator[Request | TurnUpdated, Generation, tuple[Generation, str] | None]:
        """The committed actor's next action and what it is, where a plan gives it, else None."""
        if (refusal := self.refusal) is not None:
            self.refusal = None
            if (planned := (yield from refusal.next_step(self.runner))) is not None:
                self.refusal = refusal if refusal.choice_left() else None
                return planned
        pending, self.pending = self.pending, None
        results, found = self.ran
        if self.plan and len(results) > found and is_error(results[-1][1]):
            self.plan.clear()  # a step failed for real: the rest of the plan is moot, the actor takes over
        if not self.plan and pending is not None:
            self.plan = yield from self._search(pending)
            self.ran = (pending.real_results, len(pending.real_results))
            if self.plan:  # the held turn gives way: the actor answers from the path that ran
                pending.conversation.turns.remove(pending.turn)
                pending.turn.superseded = f"another path the rehearsal found replaces it: {self.plan[0][1]}"
                yield TurnUpdated("commit", None, pending.turn, None, "acted")
        return self.plan.pop(0) if self.plan else None

    def _search(self, pending: Pending) -> Generator[Request, Generation, list[tuple[Generation, str]]]:
        runner, held = self.runner, pending.step.call
        if not pending.conversation.turns or pending.conversation.turns[-1] is not pending.turn:
            return []  # the held turn left the history (a write nobody asked for): nothing to repair
        before = replace(pending.conversation, turns=pending.conversation.turns[:-1])
        if plan := (yield from self._asked_for(pending, before)):
            return plan
        if plan := (yield from self._fallback(pending, before)):
            return plan
        if plan := (yield from self._meant(pending, before)):
            return plan
        if plan := (yield from self._named(pending, before)):
            return plan
        tried = {held.key()}
        ask = self._candidate_request(pending)
        for _ in range(runner.config.repair_candidates):  # drawn one by one: the first plan found ends it
            runner.batcher.check_limits()
            gen = yield ask
            action = parse_dictated(gen.text, runner.tool_names, runner.tools, pending.conversation.requests(),
                                    runner.config.dictated_case, require=True, writes=runner.writes)
            call = action.calls[0] if len(action.calls) == 1 and not action.error else None
            if call is None or call.key() in tried:
                continue
            tried.add(call.key())
            additive = runner.committer.additive(find_tool(runner.tools, call.name))
            if is_variant(held, call):
                if (step := (yield from self._succeeds(call, gen, before, pending.real_results, True))) is not None:
                    how = "its foreseen failure asks for what it passes" if step.self_contradicted else "foreseen to go through"
                    return [(gen, f"the held {held.name} with {_added(held, call)}: {how}")]
            elif is_prerequisite(held, call, additive):
                step = yield from self._succeeds(call, gen, before, pending.real_results, True)
                if step is None:
                    continue
                after, known = _after(before, pending.real_results, [(call, gen, step)])
                own = Generation(pending.turn.action.text, 0, 0, 0.0)
                if (yield from self._succeeds(held, own, after, known, False)) is not None:
                    return [(gen, f"{call.name} first, for the held {held.name}: both foreseen to go through"),
                            (own, f"the held {held.name}, after {call.name}")]
        return []

    def _asked_for(self, pending: Pending, before: Conversation) -> Generator[Request, Generation, list[tuple[Generation, str]]]:
        """The variant the foreseen failure asks for, where the request asks for it too: the
        message says "pass overwrite=true to replace it" and the user said "Replace" (a word of
        the argument's name or of what the message says it does). The user who wrote "If
        there's already a file by that name, leave it alone" said neither: nothing is replaced."""
        held, tool = pending.step.call, find_tool(self.runner.tools, pending.step.call.name)
        said = stems(wished(" ".join(pending.conversation.requests())))  # "don't overwrite it" asks for none
        for name, value, does in asked(pending.step.rehearsed):
            offered = tool is not None and name in tool.parameters.get("properties", {})
            if name in held.arguments or not offered or not stems(f"{name.replace('_', ' ')} {does}") & said:
                continue
            variant = ToolCall(held.name, {**held.arguments, name: value})
            gen = made_call(variant)
            if (yield from self._succeeds(variant, gen, before, pending.real_results, True)) is not None:
                return [(gen, f"the held {held.name} with {_added(held, variant)}: its foreseen failure asks for it, "
                              "and so does the request")]
        return []

    def _fallback(self, pending: Pending, before: Conversation) -> Generator[Request, Generation, list[tuple[Generation, str]]]:
        """The held write with a path, sum or rest the request gives for its failure (``fallback.py``)."""
        held, requests = pending.step.call, pending.conversation.requests()
        calls = [*fallback_calls(held, requests), *amount_calls(held, requests),
                 *rest_calls(held, requests, pending.step.rehearsed, pending.step.context)]
        return (yield from self._first_likely(pending, before, calls, "the request gives it for when the first fails"))

    def _meant(self, pending: Pending, before: Conversation) -> Generator[Request, Generation, list[tuple[Generation, str]]]:
        """The held write on what the user's words name, where it named what is not there: the
        environment says which file a made-up path stands for, and which folder the user named
        (``Environment.write_instead``); rehearsed, and made where it is foreseen to go through."""
        environment, held = self.runner.committer.environment, pending.step.call
        tool = find_tool(self.runner.tools, held.name)
        if environment is None or tool is None:
            return []
        arguments = environment.write_instead(tool.original_name, held.arguments, pending.conversation.requests())
        calls = [ToolCall(held.name, arguments)] if arguments and arguments != held.arguments else []
        return (yield from self._first_likely(pending, before, calls, "what the request names, which is there"))

    def _first_likely(
        self, pending: Pending, before: Conversation, calls: list[ToolCall], why: str,
    ) -> Generator[Request, Generation, list[tuple[Generation, str]]]:
        """The plan of the first of ``calls`` (values the request gives) likely to go through (``LIKELY``)."""
        held = pending.step.call
        for call in calls:
            gen = made_call(call)
            if (yield from self._succeeds(call, gen, before, pending.real_results, True, LIKELY)) is not None:
                return [(gen, f"the held {held.name} with {_changed(held, call)}: {why}")]
        return []

    def _named(self, pending: Pending, before: Conversation) -> Generator[Request, Generation, list[tuple[Generation, str]]]:
        """The plan the foreseen failure points to, asking the actor nothing: it names a leading
        part of the held call's argument ("no such directory: /notes/travel"), which an additive
        tool taking that one string makes; where that call is foreseen to fail naming a part of
        its own, that part is made first (up to ``MAX_NAMED``). Each is rehearsed, then the held
        call after them."""
        committer = self.runner.committer
        makers = [(t.name, one) for t in self.runner.tools if committer.additive(t) and (one := one_string(t))]
        held = pending.step.call
        part = named_part(held, pending.step.rehearsed)
        if part is None or not written(part, pending.conversation.requests()):
            return []  # a folder of a path the user never wrote ("/archive/projects/website") is not made
        chain = (yield from self._make_first(held, pending.step.rehearsed, makers, before, pending.real_results,
                                             MAX_NAMED)) if makers else None
        if not chain:
            return []
        after, known = _after(before, pending.real_results, chain)
        own = Generation(pending.turn.action.text, 0, 0, 0.0)
        if (yield from self._succeeds(held, own, after, known, False)) is None:
            return []
        made = [f"{c.name} {json.dumps(next(iter(c.arguments.values())))}" for c, _, _ in chain]
        return [*((g, f"{m} first, named by the foreseen failure") for m, (_, g, _) in zip(made, chain)),
                (own, f"the held {held.name}, after {', '.join(made)}")]

    def _make_first(
        self, call: ToolCall, foreseen: Any, makers: list[tuple[str, str]], world: Conversation, known: list, depth: int,
        real: bool = True,
    ) -> Generator[Request, Generation, list[tuple[ToolCall, Generation, CallStep]] | None]:
        """The calls to make, in order, so that ``call`` (foreseen: ``foreseen``) goes through, or None."""
        part = named_part(call, foreseen)
        if part is None or depth == 0:
            return None
        for name, param in makers:
            maker = ToolCall(name, {param: part})
            gen = made_call(maker)
            step = yield from self._foresee(maker, gen, world, known, real)
            if step is None:
                continue
            if foreseen_through(step, LIKELY):  # a folder the user wrote: made where it likely goes through
                return [(maker, gen, step)]
            first = yield from self._make_first(maker, step.rehearsed, makers, world, known, depth - 1, real)
            if first:
                after, seen = _after(world, known, first)
                if (again := (yield from self._succeeds(maker, gen, after, seen, False))) is not None:
                    return [*first, (maker, gen, again)]
        return None

    def _candidate_request(self, pending: Pending) -> Request:
        """The request for a call the actor would make now, shown the foreseen failure: a write
        required, drawn hotter than it acts (each draw its own seed)."""
        runner, unnamed = self.runner, unnamed_changes(self.runner.tools, pending.conversation.user, self.runner.committer)
        writes = tuple(t for t in runner.tools if runner.committer.writes(t) is not False and t.name not in unnamed)
        prompt = actor_prompt(runner.backend, pending.conversation, runner.tools)
        constraint = Constraint(role="actor", think_chars=0, tools=writes, require_call=True)
        return Request(prompt, constraint, "actor", "repair", None, temperature=CANDIDATE_TEMPERATURE)

    def _succeeds(
        self, call: ToolCall, gen: Generation, conversation: Conversation, known: list, real_world: bool,
        floor: float | None | bool = True,
    ) -> Generator[Request, Generation, CallStep | None]:
        """The call's rehearsal, where it foresees a success as surely as a hold asks (or ``floor``)."""
        step = yield from self._foresee(call, gen, conversation, known, real_world)
        floor = self.runner.config.hold_certainty if floor is True else floor
        return step if step is not None and foreseen_through(step, floor) else None

    def _foresee(
        self, call: ToolCall, gen: Generation, conversation: Conversation, known: list, real_world: bool,
    ) -> Generator[Request, Generation, CallStep | None]:
        """The call's rehearsal in ``conversation`` (None for a call its schema refuses); in the real
        world (``real_world``) the rehearser reads the state it depends on first."""
        runner = self.runner
        tool = find_tool(runner.tools, call.name)
        step = CallStep(call)
        step.validation_errors = check_arguments(tool, call.arguments) if tool else ["no such tool"]
        step.valid = not step.validation_errors
        if not step.valid:
            return None
        turn = _imagined_turn(call, gen, None)
        context = runner.committer.read_context(step, tool) if real_world else []
        yield from runner.rehearser.rehearse(turn, step, tool, runner.tools, conversation, known, "commit", None,
                                             context)
        # A foreseen failure whose message asks for what the call passes is no failure.
        step.self_contradicted = contradicts_call(step.rehearsed, call)
        return step


def foreseen_through(step: CallStep, floor: float | None) -> bool:
    """Whether a rehearsed step foresees a success as surely as a hold asks (``floor``)."""
    if step.self_contradicted:
        return True
    sure = floor is None or step.certainty is None or step.certainty >= floor
    return sure and not (step.rehearsed is None or is_error(step.rehearsed) or rehearsal_failed(step.rehearsed))


def one_string(tool: Tool | None) -> str | None:
    """The parameter of a tool that takes one string and nothing else required, else None."""
    params = tool.parameters if tool is not None else {}
    props, required = params.get("properties", {}), params.get("required", [])
    if len(required) != 1 or not isinstance(props.get(required[0]), dict):
        return None
    return required[0] if props[required[0]].get("type") == "string" else None


def named_part(call: ToolCall, foreseen: Any) -> str | None:
    """The longest proper leading part of a string ``call`` passes that the foreseen failure's
    message names, whole (up to a character that is not a letter or digit on both sides, and
    not as part of the full value): "no such directory: /notes/travel" names a part of
    "/notes/travel/japan/packing.txt"; "/notes/todo.txt already exists" names none of
    "/notes/todo.txt"."""
    error = foreseen.get("error") if isinstance(foreseen, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    if not isinstance(message, str):
        return None
    found: list[str] = []
    for value in (v for v in call.arguments.values() if isinstance(v, str)):
        said = message.replace(value, "\0")  # the full value named is not a part named
        for end in range(len(value) - 1, 0, -1):
            part = value[:end]
            if value[end].isalnum() or not any(c.isalnum() for c in part):
                continue
            if re.search(rf"(?<![\w]){re.escape(part)}(?![\w])", said):
                found.append(part)
                break
    return max(found, key=len) if found else None


def written(part: str, requests: list[str]) -> bool:
    """Whether ``part`` leads a value the user wrote: "/notes/travel" of
    "/notes/travel/japan/packing.txt" in "save a packing list at /notes/travel/japan/packing.txt"."""
    return any(word == part or (word.startswith(part) and not word[len(part)].isalnum())
               for text in requests for word in (w.strip("\"'`.,;:!?()[]{}<>") for w in text.split()))


# Words that say nothing of what an argument does.
_PLAIN = {"pass", "true", "false", "with", "that", "this", "then", "from", "into", "instead"}


def stems(text: str) -> set[str]:
    """The words of ``text`` (four letters or more, not ``_PLAIN``), cut to six letters: "Replace"
    and "to replace it" share one, "replacing" too."""
    return {w[:6] for w in re.findall(r"[a-z]{4,}", text.lower()) if w not in _PLAIN}


def _after(world: Conversation, known: list, made: list) -> tuple[Conversation, list]:
    """The imagined world after ``made`` (call, generation, foreseen step), and its few-shot."""
    turns = [_imagined_turn(c, g, step) for c, g, step in made]
    return replace(world, turns=[*world.turns, *turns]), [*known, *((c, step.rehearsed) for c, _, step in made)]


def _imagined_turn(call: ToolCall, gen: Generation, step: CallStep | None) -> Turn:
    turn = Turn(index=0, action=Action(text=gen.text, calls=[call]))
    if step is not None:  # shown with its predicted result: a held step's message is its rehearsal
        shown = CallStep(call, rehearsed=step.rehearsed, held=True)
        turn.calls = [shown]
    return turn


def _changed(held: ToolCall, other: ToolCall) -> str:
    return ", ".join(f"{k}={json.dumps(v)}" for k, v in other.arguments.items() if held.arguments.get(k) != v)


def _added(held: ToolCall, other: ToolCall) -> str:
    return ", ".join(f"{k}={json.dumps(v)}" for k, v in other.arguments.items() if k not in held.arguments)
