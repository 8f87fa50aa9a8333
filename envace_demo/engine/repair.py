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
from dataclasses import dataclass, replace
from typing import Any, Generator

from envace_demo.engine.commit import contradicts_call
from envace_demo.events import TurnUpdated
from envace_demo.models.base import Constraint, Generation
from envace_demo.prompts import Conversation, actor_prompt
from envace_demo.record import Action, CallStep, ToolCall, Turn, is_error, rehearsal_failed
from envace_demo.scheduler import Request
from envace_demo.schemas import find_tool
from envace_demo.validation import check_arguments
from envace_demo.verbatim import parse_dictated

# The candidates are drawn hotter than the actor acts: the point is calls it would rarely make.
CANDIDATE_TEMPERATURE = 1.0


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

    def held(self, turn: Turn, step: CallStep, conversation: Conversation, real_results: list) -> None:
        """A committed call was held, surely: its other paths are looked for before the next turn."""
        # Only a grammar makes every candidate a call of a writing tool: free samples would mostly answer.
        # (A write held at any certainty, nobody having asked for it, leaves the history: _search.)
        wanted = self.runner.config.repair_candidates and self.runner.constrained and self.pending is None
        if wanted and len(turn.calls) == 1:
            self.pending = Pending(turn, step, conversation, real_results)

    def next_action(self) -> Generator[Request | TurnUpdated, Generation, tuple[Generation, str] | None]:
        """The committed actor's next action and what it is, where a plan gives it, else None."""
        pending, self.pending = self.pending, None
        if not self.plan and pending is not None:
            self.plan = yield from self._search(pending)
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
        tried = {held.key()}
        ask = self._candidate_request(pending)
        for _ in range(runner.config.repair_candidates):  # drawn one by one: the first plan found ends it
            runner.batcher.check_limits()
            gen = yield ask
            action = parse_dictated(gen.text, runner.tool_names, runner.tools, pending.conversation.requests(),
                                    runner.config.dictated_case, require=True)
            call = action.calls[0] if len(action.calls) == 1 and not action.error else None
            if call is None or call.key() in tried:
                continue
            tried.add(call.key())
            tool = find_tool(runner.tools, call.name)
            environment = runner.committer.environment
            additive = environment is not None and tool is not None and environment.additive(tool.original_name)
            if is_variant(held, call):
                if (step := (yield from self._succeeds(call, gen, before, pending.real_results, True))) is not None:
                    how = "its foreseen failure asks for what it passes" if step.self_contradicted else "foreseen to go through"
                    return [(gen, f"the held {held.name} with {_added(held, call)}: {how}")]
            elif is_prerequisite(held, call, additive):
                step = yield from self._succeeds(call, gen, before, pending.real_results, True)
                if step is None:
                    continue
                after = replace(before, turns=[*before.turns, _imagined_turn(call, gen, step)])
                own = Generation(pending.turn.action.text, 0, 0, 0.0)
                if (yield from self._succeeds(held, own, after, [*pending.real_results, (call, step.rehearsed)],
                                              False)) is not None:
                    return [(gen, f"{call.name} first, for the held {held.name}: both foreseen to go through"),
                            (own, f"the held {held.name}, after {call.name}")]
        return []

    def _candidate_request(self, pending: Pending) -> Request:
        """The request for a call the actor would make now, shown the foreseen failure: a write
        required, drawn hotter than it acts (each draw its own seed)."""
        runner = self.runner
        writes = tuple(t for t in runner.tools if runner.committer.writes(t) is not False)
        prompt = actor_prompt(runner.backend, pending.conversation, runner.tools)
        constraint = Constraint(role="actor", think_chars=0, tools=writes, require_call=True)
        return Request(prompt, constraint, "actor", "repair", None, temperature=CANDIDATE_TEMPERATURE)

    def _succeeds(
        self, call: ToolCall, gen: Generation, conversation: Conversation, known: list, real_world: bool,
    ) -> Generator[Request, Generation, CallStep | None]:
        """The call's rehearsal, where it foresees a success as surely as a hold asks."""
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
        if contradicts_call(step.rehearsed, call):  # its message asks for what the call passes: no failure
            step.self_contradicted = True
            return step
        floor = runner.config.hold_certainty
        sure = floor is None or step.certainty is None or step.certainty >= floor
        fails = step.rehearsed is None or is_error(step.rehearsed) or rehearsal_failed(step.rehearsed)
        return step if sure and not fails else None


def _imagined_turn(call: ToolCall, gen: Generation, step: CallStep | None) -> Turn:
    turn = Turn(index=0, action=Action(text=gen.text, calls=[call]))
    if step is not None:  # shown with its predicted result: a held step's message is its rehearsal
        shown = CallStep(call, rehearsed=step.rehearsed, held=True)
        turn.calls = [shown]
    return turn


def _added(held: ToolCall, other: ToolCall) -> str:
    return ", ".join(f"{k}={json.dumps(v)}" for k, v in other.arguments.items() if k not in held.arguments)
