"""The acting step and the turn loop of one trajectory, imagined or committed: the actor's
turn, then each of its calls validated, rehearsed (where the mode does), held or executed."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Generator

from envace_demo.context import shots
from envace_demo.engine.answers import ungrounded
from envace_demo.engine.asked import ask_again
from envace_demo.engine.commit import Committer
from envace_demo.engine.condition import condition_reads, gated, unsettled
from envace_demo.engine.condition import real_results as condition_results
from envace_demo.engine.config import EpisodeConfig
from envace_demo.engine.detail import Detail
from envace_demo.engine.instead import Instead
from envace_demo.engine.items import more_items
from envace_demo.engine.offer import names_write, offered
from envace_demo.engine.limits import (
    CALL_RESERVE,
    FIRST_WRITE,
    DRAFT_ANSWER_CHARS,
    IMAGINED_ANSWER_CHARS,
    REHEARSAL_TIME,
    REPEATED_READ,
    STOP_WORDS,
    cut_by,
)
from envace_demo.engine.rehearsal import CallRehearser, score_call
from envace_demo.engine.repair import Repairs
from envace_demo.engine.imagined import (
    asked_for,
    asks_a_question,
    ends_at,
    fetches,
    goes_through,
    imagined_action,
    keeps,
    orders,
    plans_write,
    repeats_reads,
    rereads,
    short_answers,
    wrote,
)
from envace_demo.engine.quotes import complete_quote
from envace_demo.engine.told import tell_failure
from envace_demo.engine.verdict import Held, RunState, drop_contradicted, drop_unasked, run_checked, supersede
from envace_demo.events import Event, TurnUpdated
from envace_demo.generation import BatchGenerator
from envace_demo.models.base import Backend, Constraint, Generation, Sampling
from envace_demo.modes import ModePolicy
from envace_demo.prompts import Conversation, actor_prompt
from envace_demo.record import Action, CallStep, Rehearsal, ToolCall, Turn
from envace_demo.scheduler import Outcome, Request, Run, Stop
from envace_demo.schemas import Tool, find_tool
from envace_demo.task import Task
from envace_demo.validation import check_arguments
from envace_demo.verbatim import parse_dictated


class TrajectoryRunner:
    """Runs trajectories of one episode as scheduler runs (``scheduler.Run``): each yields
    its model requests and its events, and returns its ``Outcome``."""

    def __init__(self, backend: Backend, task: Task, config: EpisodeConfig, policy: ModePolicy, sampling: Sampling,
                 batcher: BatchGenerator, deadline: float, rehearser: CallRehearser, committer: Committer,
                 constrained: bool):
        self.backend, self.task, self.config, self.policy = backend, task, config, policy
        self.sampling, self.batcher, self.deadline = sampling, batcher, deadline
        self.rehearser, self.committer, self.constrained = rehearser, committer, constrained
        self.rehearsals: list[Rehearsal] = []  # the episode's imagined runs: what only they had
        # The lead imagined run's actions (the lowest index of the user turn's rehearsals), its k-th drawn
        # with the seed the committed actor's k-th will have: actor prompt -> (generation, rehearsal index,
        # k). A committed actor asked the same prompt at its k-th turn takes it: the same answer.
        self.imagined_actions: dict[str, tuple[Generation, int, int]] = {}
        self.lead: int | None = None
        self.user_turn = 0
        self.repairs = Repairs(self)  # another path for a held call, found by rehearsal
        self.tools: list[Tool] = task.tools_at(0)
        self.tool_names = {t.name for t in self.tools}

    def at_user_turn(self, k: int) -> None:
        """The user turn being run, and the tools offered in it (a conversation may add some)."""
        self.user_turn, self.tools, self.repairs = k, self.task.tools_at(k), Repairs(self)
        self.imagined_actions.clear()
        self.tool_names = {t.name for t in self.tools}

    def run(
        self,
        conversation: Conversation,
        where: str,
        rindex: int | None,
        turns: list[Turn],
        commit: bool,
        memory: dict | None = None,
        real_results: list[tuple[ToolCall, Any]] | None = None,
    ) -> Run:
        """One trajectory: up to ``max_steps`` turns that call tools, then an answer."""
        cfg, execute = self.config, commit and self.committer.executor is not None
        # The rehearser's few-shot: the real results so far, appended to (the caller's list).
        real_results = [] if real_results is None else real_results
        state, turn_index = RunState(cfg.check_given_up, cfg.trust_certainty), 0
        # Past its last step a committed run still answers: no call on offer, none made.
        while turn_index < cfg.max_steps or (execute and turn_index == cfg.max_steps):
            last, answer, state.answer_next = turn_index == cfg.max_steps, state.answer_next, False
            yield from self.repairs.weigh()  # a read made for one that missed the question, weighed against it
            require = cfg.require_first_call and turn_index == 0 and not last and not answer
            prompt = actor_prompt(self.backend, conversation, self.tools)
            lead = where == "rehearsal" and rindex == self.lead and not state.withdrawn
            draft = execute and bool(conversation.memory) and cfg.answer_without_memory
            gen, taken, repaired = yield from self._act(prompt, where, rindex, require, turn_index,
                                                        state.withdrawn or answer, lead, last or answer, draft)
            action = parse_dictated(gen.text, self.tool_names, self.tools, conversation.requests(), cfg.dictated_case,
                                    require=require, cut=gen.finish_reason == "length", writes=self.writes)
            turn = new_turn(turns, action, gen, prompt, self.user_turn, taken, repaired)
            if kept := lead and keeps(action, gen, require, short_answers(self.constrained, self.policy, cfg)):
                self.imagined_actions[prompt.shown()] = (gen, rindex, turn_index)
            if action.error:
                turn.error = action_error(action, gen, self.sampling)
                yield TurnUpdated(where, rindex, turn, None, "acted")
                return Outcome(None, "parse_error")
            if not action.calls:
                outcome = yield from self._answer(turn, gen, conversation, turns, where, rindex, execute, state,
                                                  real_results, memory)
                if outcome is None:
                    continue  # not a step: the actor is asked again
                return outcome
            turn_index += repaired is None  # a plan's steps are the engine's, not the actor's turns
            if last and repaired is None:
                turn.error = "a call past the last step (max_steps): not made"
                yield TurnUpdated(where, rindex, turn, None, "acted")
                break
            if (ends := skipped(self, turn, conversation, where, execute, state)) is not None:
                yield TurnUpdated(where, rindex, turn, None, "acted")
                if ends:
                    return Outcome(None, REPEATED_READ)
                continue
            for call in action.calls:
                step = CallStep(call)
                turn.calls.append(step)
                yield from self._call(turn, step, conversation, real_results, where, rindex, execute, state.held_keys)
                if execute and step.held:
                    state.pending.append(Held(turn, len(turn.calls) - 1, step, len(real_results)))
                    self.repairs.held(turn, step, conversation, real_results)
                    continue
                if execute:
                    state.executed(step)
                    real_results.append((call, step.real))
                    yield from drop_contradicted(turn, step, conversation, memory, cfg.memory_fidelity_floor)
                    if (gone := supersede(step, conversation)) is not None:
                        yield TurnUpdated(where, rindex, gone, None, "acted")
                    if step.error:
                        conversation.turns.append(turn)
                        return Outcome(None, "environment_error")
            if execute and unasked(self, conversation, turn.action.calls) and drop_unasked(turn, state):
                yield TurnUpdated(where, rindex, turn, None, "acted")
                continue
            if (lead and not kept and cfg.follow_rehearsed_writes and plans_write(action, gen, self.writes)
                    and goes_through(turn) and asked_for(action, conversation.user, self.writes)):
                self.imagined_actions[prompt.shown()] = (gen, rindex, turn_index - 1)  # a write let through
            conversation.turns.append(turn)
            if where == "rehearsal" and ends_at(turn, self.writes, cfg, self.policy):
                return Outcome(None, FIRST_WRITE)
            if commit and not execute:
                # Nothing to commit against: the calls stand as the answer (BFCL style).
                return Outcome(None, "no_environment")
        return Outcome(None, "max_steps")

    def _answer(
        self, turn: Turn, gen: Generation, conversation: Conversation, turns: list[Turn], where: str,
        rindex: int | None, execute: bool, state: RunState, real_results: list[tuple[ToolCall, Any]],
        memory: dict | None,
    ) -> Generator[Event, None, Outcome | None]:
        """A turn without calls: the run's outcome, or None where the answer is set aside or
        taken back and the actor is asked again."""
        content = turn.action.content
        if gen.finish_reason == "length":
            turn.error = f"{cut_by(self.sampling)}: the answer was not finished"
        elif execute and (why := state.set_aside(conversation, memory)):
            turn.set_aside = why
            yield TurnUpdated(where, rindex, turn, None, "acted")
            checked = state.take()
            if not checked:  # it answered from the memory: asked again without it
                conversation.memory = None
                return None
            yield from run_checked(checked, self.tools, self.committer, self.deadline, self.config, conversation,
                                   real_results, memory, self.batcher.check_limits)
            return Outcome(None, "environment_error") if any(h.step.error for h in checked) else None
        elif execute and conversation.memory and self.config.answer_without_memory:
            # The memory chose the calls; the words come from the conversation, with this turn's seed.
            turn.set_aside = "begun with the rehearsal memory in view; worded again from the conversation alone"
            conversation.memory, state.answer_next = None, True
            self.batcher.redraw_committed_seed()
            yield TurnUpdated(where, rindex, turn, None, "acted")
            return None
        elif execute and not state.withdrawn and self.policy.rehearse_calls:
            # An answer that tells a rehearsed value as real is taken back once; the
            # actor answers again from the real results alone.
            said = ungrounded(self.task, self.config.known_results, turns, content, self.rehearsals)
            if said:
                state.withdrawn = True
                turn.withdrawn = f"it said {', '.join(said)}, which only rehearsals had"
                conversation.memory, conversation.grounded = None, True
                yield TurnUpdated(where, rindex, turn, None, "acted")
                return None
        if execute and not turn.error and (named := self.repairs.unmade(conversation)):
            turn.withdrawn = f"the request asks for {named}, and no call of it was made"
            yield TurnUpdated(where, rindex, turn, None, "acted")
            return None
        if execute and not turn.error and (yield from more_items(self, turn, conversation, where, rindex)):
            return None
        if execute and not turn.error:
            if ((self.config.report_failures and (yield from tell_failure(self, turn, conversation, turns, state,
                                                                          memory, where, rindex)))
                    or (yield from ask_again(self, turn, conversation, state, where, rindex))):
                return None
            content = complete_quote(turn, conversation, self.config)  # a real text it quoted cut short: whole
        yield TurnUpdated(where, rindex, turn, None, "acted")
        if where == "rehearsal" and short_answers(self.constrained, self.policy, self.config) and not turn.error:
            return Outcome(None, "answer")  # its first character only: the committed run answers
        return Outcome(content, "max_new_tokens" if turn.error else "answer")

    def _call(
        self, turn: Turn, step: CallStep, conversation: Conversation, real_results: list[tuple[ToolCall, Any]],
        where: str, rindex: int | None, execute: bool, held: set[str] | None = None,
    ) -> Generator[Event | Request, Generation, None]:
        """Validate one call, then rehearse it (where the mode does), then execute it (in
        a commit with an environment) unless its rehearsal foresaw a failure: then it is
        held once (``EpisodeConfig.hold_predicted_failures``); the turn is reported after
        each phase."""
        tool = find_tool(self.tools, step.call.name)
        step.validation_errors = check_arguments(tool, step.call.arguments) if tool else []
        step.valid = tool is not None and not step.validation_errors
        at = len(turn.calls) - 1
        yield TurnUpdated(where, rindex, turn, at, "acted")
        rehearse = self.policy.rehearse_calls
        context: list = []
        try:
            if rehearse:
                # An imagined run reads the real state for its rehearser while its world is
                # still the real one: until it imagines its first write ("imagine" reads nothing).
                real_world = where == "rehearsal" and self.policy.commit and not wrote(conversation, turn, self.writes)
                if real_world and fetches(step, self.writes, self.config, self.committer.executor is not None):
                    # A read in the real world is fetched: it changes nothing and is never held.
                    self.committer.fetch(step, tool, self.deadline)
                    real_results += [(step.call, step.real)] if step.error is None else []
                    yield TurnUpdated(where, rindex, turn, at, "executed")
                    self.batcher.check_limits()
                    return
                context = self.committer.read_context(step, tool) if execute or real_world else []
                # A committed call's rehearsal gives way to the real call when the limit draws near.
                own = self.deadline - CALL_RESERVE * self.config.episode_seconds if where == "commit" else None
                # A committed read is asked of the rehearser only where a rehearsal already
                # answered it (no cost): its real result is safe to fetch, and it is what
                # the answer must tell. A write is always rehearsed before it runs.
                ask = not (execute and self.config.rehearse_committed == "writes" and self.writes(step.call.name) is False)
                yield from self.rehearser.rehearse(
                    turn, step, tool, self.tools, conversation, real_results, where, rindex, context, own, ask
                )
                yield TurnUpdated(where, rindex, turn, at, "rehearsed")
                if execute and held is not None and self.committer.hold(step, held, tool, unasked(self, conversation, [step.call])):
                    yield TurnUpdated(where, rindex, turn, at, "held")
                    return
            if execute:
                self.committer.execute(step, tool, self.deadline)
                self.repairs.refused(turn, step, conversation)
                if rehearse and (step.rehearsed is not None or step.rehearsal_cut):  # a read not asked: no score
                    score_call(step, tool, shots(self.config.known_results, real_results, context), conversation)
                yield TurnUpdated(where, rindex, turn, at, "executed")
                self.batcher.check_limits()  # Stop or the time limit during the call
        except Stop as stop:
            # The record says why this call has no rehearsed or real response.
            missing = "rehearsal" if rehearse and step.rehearsed is None else "real call"
            if step.error is None and (missing == "rehearsal" or (execute and step.real is None)):
                step.error = f"{STOP_WORDS.get(stop.reason, stop.reason)} before the {missing}"
                step.rehearsal_cut = missing == "rehearsal" and stop.reason == REHEARSAL_TIME
                yield TurnUpdated(where, rindex, turn, at, "acted")
            raise

    def _act(
        self, prompt: Any, where: str, rindex: int | None, require: bool, k: int, withdrawn: bool, lead: bool,
        last: bool = False, draft: bool = False,
    ) -> Generator[Request, Generation, tuple[Generation, int | None, str | None]]:
        """The actor's ``k``-th generation, the rehearsal it was taken from, and the plan it is a step
        of: a committed actor asked what the lead imagined run was asked at its ``k``-th turn, with the
        same seed, takes its answer (the ``lead`` run draws the seeds the committed actor will); after
        a hold, a path the rehearsal found comes first (``repair.py``); a ``draft`` answer, first words only."""
        planning = where == "commit" and not withdrawn and self.repairs.acts(last)
        if planning and (planned := (yield from self.repairs.next_action())):
            return planned[0], None, planned[1]
        taken = imagined_action(self.imagined_actions, prompt.shown(), k) if where == "commit" and not withdrawn else None
        if taken is not None:
            self.batcher.skip_committed_seed()
            return replace(taken[0], seconds=0.0), taken[1], None
        # The committed actor reads an imagined run's calls and their predictions, never its answer
        # (unless the memory view is "full"): an imagined answer stops after its first words.
        short = where == "rehearsal" and short_answers(self.constrained, self.policy, self.config)
        chars = IMAGINED_ANSWER_CHARS if short else DRAFT_ANSWER_CHARS if draft else None
        constraint = Constraint(role="actor", think_chars=self.config.think_chars,
                                tools=offered(self.tools, prompt, last, self.config, self.committer), require_call=require,
                                answer_chars=chars) if self.constrained else None
        gen = yield Request(prompt, constraint, "actor", where, rindex, aligned=k if lead else None)
        return gen, None, None

    def writes(self, name: str) -> bool | None:  # as the environment says (None: unknown)
        return self.committer.writes(find_tool(self.tools, name))


def skipped(runner: TrajectoryRunner, turn: Turn, conversation: Conversation, where: str, execute: bool,
            state: RunState) -> bool | None:
    """Whether a turn that is not made ends its run. A turn that only repeats reads: an imagined
    run ends there (True); a committed actor's turn of reads it already made since the last write
    is not made, it would only answer the same, and the actor answers next (False: the turn leaves
    the history; ``EpisodeConfig.repeated_reads_answer``). So is a committed write the request's
    condition rules out (False, ``unmet``). None: the turn is made."""
    calls, config = turn.action.calls, runner.config
    if where == "rehearsal":
        return True if repeats_reads(conversation.turns, calls, runner.writes, config, runner.policy) else None
    if execute and unmet(runner, turn, conversation, state):
        return False
    if not (execute and config.repeated_reads_answer and rereads(conversation.turns, calls, runner.writes)):
        return None
    turn.superseded, state.answer_next = "it repeats a read made since the last write: the same result", True
    return False


def unmet(runner: TrajectoryRunner, turn: Turn, conversation: Conversation, state: RunState) -> bool:
    """Whether a committed turn asks for a write the request wants only where its condition goes
    the other way (``engine/condition.py``): the turn is not made, and the actor answers next."""
    if not runner.config.weigh_conditions:
        return False
    request, results, calls = conversation.user, condition_results(conversation.turns), turn.action.calls
    branch = next((b for call in calls if (b := gated(request, call, runner.tools, runner.writes, results))), None)
    if branch is not None:
        turn.superseded = (f"the request asks for it only where {branch.condition!r} is "
                           f"{str(branch.holds).lower()}; the real reads say otherwise")
        state.answer_next = True
        return True
    # A condition no read has settled yet: the reads the environment names for the write come first, once.
    reads = [] if state.condition_read else [
        r for call in calls if unsettled(request, call, runner.tools, runner.writes, results)
        for r in condition_reads(runner.committer.environment, call, conversation.turns)]
    if not reads:
        return False
    # Then the actor's own calls again: the condition weighed, the write is made, held or replaced.
    then = [c for c in calls if c not in reads]
    why = "the request's condition on the write turns on it"
    state.condition_read, runner.repairs.refusal = True, Detail(reads, why, then)
    turn.superseded = "the request sets a condition on it that no read had settled: the reads it turns on come first"
    return True


def action_error(action: Action, gen: Generation, sampling: Sampling) -> str:
    error = f"{action.error}: {action.error_message}"
    return f"{cut_by(sampling)}: {error}" if gen.finish_reason == "length" else error


def unasked(runner: TrajectoryRunner, conversation: Conversation, calls: list[ToolCall]) -> bool:
    """Whether the writes ``calls`` are ones nobody asked for: the request asks a question, and
    none of its sentences that ask nothing names them (``imagined.orders``)."""
    if not (runner.config.drop_unasked_failures and asks_a_question(conversation.user)):
        return False
    ordered = orders(conversation.user)
    return not ordered or not any(names_write(t, ordered, runner.tools, runner.committer)
                                  for c in calls if (t := find_tool(runner.tools, c.name)) is not None)


def new_turn(turns: list[Turn], action: Action, gen: Generation, prompt: Any, user_turn: int = 0,
             action_from: int | None = None, repaired: str | None = None) -> Turn:
    turn = Turn(
        index=len(turns),
        user_turn=user_turn,
        action=action,
        act_seconds=round(gen.seconds, 3),
        act_tokens=gen.new_tokens,
        prompt_tokens=gen.prompt_tokens,
        actor_prompt=prompt.shown(),
        action_from=action_from,
        repaired=None if isinstance(repaired, Instead) else repaired,
        instead=repaired if isinstance(repaired, Instead) else None,
    )
    turns.append(turn)
    return turn
