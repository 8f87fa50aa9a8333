"""The episode engine: act, rehearse, commit.

``Episode(...).run()`` is a generator of typed events (``envace_demo.events``);
the last one carries the finished ``Trajectory``. What each mode runs is the mode
policy (``envace_demo.modes``); the imagined trajectories are driven by the lockstep
scheduler (``envace_demo.scheduler``); every model call and real tool call is a
supervised call (``envace_demo.supervise``).

Time: the rehearsals may spend ``rehearsal_share`` of the episode's limit; past it they
are cut (what they reached still feeds the memory) and the committed run goes on with the
rest, its own reserve. A committed call's rehearsal gives way to the real call when the
limit draws near (``CALL_RESERVE``), so a run whose rehearsals are slow still commits.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Callable, Generator, Iterator

from envace_demo import grounding
from envace_demo import memory as memory_mod
from envace_demo.bfcl_multi import judge as bfcl_judge
from envace_demo.calls import parse_action, parse_execution_result
from envace_demo.context import read_context, shots
from envace_demo.envs.base import Environment
from envace_demo.errors import ConfigError
from envace_demo.events import (
    EpisodeFinished,
    EpisodeStarted,
    Event,
    MemoryReady,
    RehearsalFinished,
    TurnUpdated,
    UserTurnStarted,
)
from envace_demo.fidelity import Context as FidelityContext
from envace_demo.fidelity import fidelity, mean_fidelity, score
from envace_demo.generation import CUT, BatchGenerator, Cutoff
from envace_demo.modes import MODES, mode_policy
from envace_demo.models.adapters import rehearse_temperature
from envace_demo.models.base import Backend, Constraint, Generation, Prompt, Sampling
from envace_demo.models.grammar import rehearsal_constraint, rehearses_failures
from envace_demo.prompts import (
    Conversation,
    actor_prompt,
    rehearser_messages,
    rehearser_prompt,
    shows_response_schema,
)
from envace_demo.record import Action, CallStep, Rehearsal, ToolCall, Trajectory, Turn, call_steps, is_error
from envace_demo.scheduler import Outcome, Request, Run, Stop, drive, lockstep
from envace_demo.schemas import Tool, find_tool
from envace_demo.supervise import supervise, wait
from envace_demo.tasks import Task, evaluate
from envace_demo.validation import check_arguments, repeated_failure, validation_error
from envace_demo.writes import read_only, unrequested_write

__all__ = ["MODES", "Episode", "EpisodeConfig", "check_arguments", "run_episode", "validation_error"]

# Why rehearsals end when their share of the episode's time is spent.
REHEARSAL_TIME = "rehearsal_time"
# A committed call's rehearsal ends this share of the episode's limit before the limit:
# the real call, and the answer after it, keep that time.
CALL_RESERVE = 0.1
# How an interrupted step names the reason the episode (or the rehearsals) stopped.
_STOP_WORDS = {
    "time_limit": "the time limit came",
    "cancelled": "stopped",
    REHEARSAL_TIME: "the rehearsal time ran out",
}
# A backend that ignores its cancel switch is abandoned this long after being told to stop.
_HALT_GRACE_S = 5.0

# What the committed actor may read of the rehearsal memory (``EpisodeConfig.memory``).
MEMORY_VIEWS = ("outcomes", "full", "off")

# Executes one committed call for real: (tool, arguments) -> JSON response.
Executor = Callable[[Tool, dict], Any]


@dataclass
class EpisodeConfig:
    mode: str = "parallel"
    n: int = 2
    sampling: Sampling = field(default_factory=Sampling)
    max_steps: int = 6
    episode_seconds: float = 600.0
    # The share of ``episode_seconds`` the rehearsals may spend before the committed run
    # (whose reserve is the rest). Modes without a committed run (imagine) use it all.
    rehearsal_share: float = 0.5
    # One real call's limit. Above the MCP per-request timeout (30 s), whose own error is clearer.
    tool_seconds: float = 60.0
    constrained: bool = True
    # The first actor turn must call a tool: small models otherwise answer in prose.
    require_first_call: bool = False
    # Reasoning bound (characters) under constrained decoding; None: the backend's own.
    # Fitted to the model's speed (budget.py): 0 on a machine where reasoning costs the minute.
    think_chars: int | None = None
    # The declared response schema as one extra line of the rehearser's message; None: on only
    # for models EnvACE did not train (the trained ones never saw that line).
    response_schema: bool | None = None
    # Real (call, result) pairs from this visitor's earlier episodes on the same environment
    # (reads made before any write, so they hold in the fresh state every episode starts
    # from): the rehearser's few-shot, before this episode's own real results.
    known_results: tuple[tuple[ToolCall, Any], ...] = field(default=(), compare=False)
    # Run on the served model's base weights, its adapter switched off (Compare's base side).
    base_weights: bool = False
    # Whether a first rehearsal may predict a domain failure; None: where the model was
    # trained to rehearse (grammar.rehearses_failures).
    rehearse_failures: bool | None = None
    # The committed actor stops reading the rehearsal memory once a real response contradicts
    # its rehearsal: a failure where success was rehearsed (or the reverse), or a fidelity
    # below this. A small model copies the memory's values and repeats its calls (a refused
    # transfer sent again, a copy written with the rehearsed content); None: keep it.
    memory_fidelity_floor: float | None = 0.75
    # What the committed actor reads of the rehearsals: "outcomes" (each rehearsed call and
    # whether it was predicted to succeed or which error: which calls to make, not what to
    # tell the user), "full" (the predicted values too), or "off".
    memory: str = "outcomes"
    # A committed call whose rehearsal predicts a failure is held the first time: not
    # executed, the actor shown the prediction, so it can take another path (a call asked
    # again runs for real: the rehearsal may be wrong).
    hold_predicted_failures: bool = True
    # Turns an exception's text into what the record may show (public mode hides server paths
    # and secrets); None shows it as is.
    redact: Callable[[str], str] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        if self.mode in ("parallel", "sequential", "imagine") and not 1 <= self.n <= 64:
            raise ConfigError(f"n must be between 1 and 64, not {self.n}")
        if not self.tool_seconds > 0:
            raise ConfigError(f"tool_seconds must be positive, not {self.tool_seconds}")
        if not 0 < self.rehearsal_share < 1:
            raise ConfigError(f"rehearsal_share must be between 0 and 1 (exclusive), not {self.rehearsal_share}")
        if self.memory not in MEMORY_VIEWS:
            raise ConfigError(f"memory must be one of {', '.join(MEMORY_VIEWS)}, not {self.memory!r}")
        if self.memory_fidelity_floor is not None and not 0 <= self.memory_fidelity_floor <= 1:
            raise ConfigError(f"memory_fidelity_floor must be between 0 and 1, not {self.memory_fidelity_floor}")

    @classmethod
    def for_backend(cls, backend: Backend, *, constrained: bool = True, require_first_call: bool | None = None,
                    **values: Any) -> "EpisodeConfig":
        """A config that asks of ``backend`` only what it can do: constrained decoding where it
        supports it; a required first call where it needs one, unless said otherwise."""
        first = backend.requires_first_call if require_first_call is None else require_first_call
        return cls(constrained=constrained and backend.supports_constraints, require_first_call=first, **values)


class Episode:
    def __init__(
        self,
        backend: Backend,
        task: Task,
        config: EpisodeConfig,
        environment: Environment | None = None,
        executor: Executor | None = None,
        cancel: threading.Event | None = None,
        previous: Trajectory | None = None,
    ):
        """``previous``: the record of this conversation so far, run against the same live
        ``environment``; the episode goes on from the first user turn it did not answer
        (a follow-up) and its record holds the whole conversation."""
        self.previous = previous
        if previous is not None and len(previous.answers) >= len(task.user_turns):
            raise ConfigError("a follow-up needs a user turn the conversation has not answered yet")
        self.backend = backend
        self.task = task
        self.config = config
        self.policy = mode_policy(config.mode, config.n)
        self.environment = environment
        if executor is None and environment is not None:
            executor = lambda tool, args: environment.execute(tool.original_name, args)  # noqa: E731
        self.executor = executor
        self.cancel = cancel or threading.Event()
        self._deadline = 0.0
        self._generate: BatchGenerator | None = None  # the batcher, made when the run starts
        self._rehearsals: list[Rehearsal] = []  # the run's imagined trajectories
        # Rehearser prompt -> (output, rehearsal index): a committed call asked in a prompt a
        # rehearsal already answered takes that answer (its prediction for this very call).
        self._predicted: dict[str, tuple[str, int | None]] = {}
        # The user turn being run and the tools offered in it (a conversation may add some).
        self._user_turn = 0
        self._tools = task.tools_at(0)
        self._tool_names = {t.name for t in self._tools}
        self._constrained = config.constrained and backend.supports_constraints
        self._failures = rehearses_failures(backend) if config.rehearse_failures is None else config.rehearse_failures
        # The sampling every generation uses: the config's, the rehearser's temperature filled
        # in from the served weights where the config leaves it (adapters.rehearse_temperature).
        self.sampling = config.sampling
        if self.sampling.rehearse_temperature is None:
            self.sampling = replace(self.sampling, rehearse_temperature=rehearse_temperature(backend))

    # ---- public -----------------------------------------------------------------

    def run(self) -> Iterator[Event]:
        cfg, policy = self.config, self.policy
        start = time.monotonic()
        self._deadline = start + cfg.episode_seconds
        self._generate = BatchGenerator(
            self.backend, self.sampling, self.cancel, self._deadline, _HALT_GRACE_S, self._shown
        )
        traj = Trajectory(
            mode=cfg.mode,
            model=self.backend.info.to_dict(),
            tools=[t.to_dict() for t in self.task.tools],
            prompt=self.task.prompt,
            follow_ups=list(self.task.follow_ups),
            environment=self.task.env,
            task=self.task.name,
            n=policy.rehearsals,
            seed=self.sampling.seed,
            sampling={k: v for k, v in vars(self.sampling).items()},
        )
        self._rehearsals = traj.rehearsals
        yield EpisodeStarted(traj)
        try:
            if policy.commit:
                yield from self._converse(traj, start)
            else:
                yield from self._rehearse_all(traj, start, [])
                last = traj.rehearsals[-1] if traj.rehearsals else None
                traj.final_answer = last.final_answer if last else None
                traj.ended = last.ended if last else "no_rehearsal"
        except Stop as stop:
            traj.ended = stop.reason
        traj.seconds = time.monotonic() - start
        traj.fidelity = mean_fidelity([c.fidelity for c in call_steps(traj.turns)])
        if self.environment is not None:
            traj.final_state = self.environment.state()
        if policy.commit:
            # A BFCL multi-turn entry is judged by BFCL's own checker; every other task by its check.
            verdict = bfcl_judge(self.task, traj) or evaluate(
                self.task, traj.committed_calls(), traj.final_answer, traj.final_state
            )
            if verdict is not None:
                traj.success, traj.check_reasons = verdict.success, verdict.reasons
        yield EpisodeFinished(traj)

    def _converse(self, traj: Trajectory, start: float) -> Generator[Event, None, None]:
        """Each user turn in order: rehearse it (where the mode does) from the real
        conversation so far, then commit it; the environment's state carries over."""
        earlier: list[tuple[str, list[Turn]]] = []  # the user turns answered so far, for real
        real_results: list[tuple[ToolCall, Any]] = []  # every real result so far: few-shot
        done = self._resume(traj, earlier, real_results)
        for k, user in enumerate(self.task.user_turns):
            if k < done:
                continue
            self._user_turn, self._tools = k, self.task.tools_at(k)
            self._tool_names = {t.name for t in self._tools}
            if k:
                yield UserTurnStarted(k, user)
            if self.policy.rehearsals:
                yield from self._rehearse_all(traj, start, earlier)
            memory = traj.memory if self.policy.rehearsals else None
            conversation = Conversation(
                user, memory=self._memory_text(memory), executed=self.executor is not None, earlier=list(earlier)
            )
            first = len(traj.turns)
            run = self._trajectory(conversation, "commit", None, traj.turns, commit=True, memory=memory,
                                   real_results=real_results)
            outcome = yield from drive(run, self._batcher)
            traj.answers.append(outcome.final_answer)
            traj.final_answer, traj.ended = outcome.final_answer, outcome.ended
            said = self._ungrounded(traj, outcome.final_answer)
            traj.ungrounded = sorted({*traj.ungrounded, *said})
            # The next turn reads this one as it happened: its steps and its answer.
            answered = [t for t in traj.turns[first:] if not t.withdrawn]
            earlier.append((user, answered))
            if outcome.ended in ("environment_error", "no_environment"):
                break  # nothing to build the next turn on

    def _resume(self, traj: Trajectory, earlier: list, real_results: list) -> int:
        """Load the conversation so far (``previous``) into ``traj``; the user turns it holds."""
        if self.previous is None:
            return 0
        before = Trajectory.from_dict(self.previous.to_dict())  # a copy: the earlier record stays as it was
        traj.turns, traj.rehearsals, traj.answers = before.turns, before.rehearsals, before.answers
        traj.ungrounded = before.ungrounded
        self._rehearsals = traj.rehearsals
        for k, user in enumerate(self.task.user_turns[: len(before.answers)]):
            earlier.append((user, [t for t in before.turns if t.user_turn == k and not t.withdrawn]))
        real_results += [(c.call, c.real) for c in call_steps(before.turns) if c.real is not None]
        return len(before.answers)

    # ---- rehearsal ----------------------------------------------------------------

    def _rehearse_all(
        self, traj: Trajectory, start: float, earlier: list[tuple[str, list[Turn]]]
    ) -> Generator[Event, None, None]:
        """The N imagined trajectories of the current user turn, from the real conversation
        before it (``earlier``); their memory becomes ``traj.memory``."""
        user = self.task.user_turns[self._user_turn]
        base = len(traj.rehearsals)
        rehearsals = [Rehearsal(index=base + k, user_turn=self._user_turn) for k in range(self.policy.rehearsals)]

        def ended(index: int, outcome: Outcome) -> Iterator[Event]:
            rehearsal = rehearsals[index - base]
            rehearsal.final_answer, rehearsal.ended = outcome.final_answer, outcome.ended
            rehearsal.cut = outcome.ended == REHEARSAL_TIME
            yield RehearsalFinished(rehearsal)

        if self.policy.commit:  # the rest of the time is the committed run's
            share = self.config.episode_seconds * self.config.rehearsal_share
            self._batcher.cutoff = Cutoff(start + share, REHEARSAL_TIME)
        try:
            if self.policy.sequential:  # attempt k needs the memory of 1..k-1: one at a time
                for k, rehearsal in enumerate(rehearsals):
                    self._batcher.check_limits()  # an attempt that cannot start is not begun
                    traj.rehearsals.append(rehearsal)
                    mem = memory_mod.summarize(rehearsals[:k])
                    conversation = Conversation(user, memory=(mem or {}).get("text") or None, earlier=list(earlier))
                    try:
                        outcome = yield from drive(self._rehearsal(conversation, rehearsal), self._batcher)
                    except Stop as stop:
                        yield from ended(rehearsal.index, Outcome(None, stop.reason))
                        raise
                    yield from ended(rehearsal.index, outcome)
            else:
                traj.rehearsals.extend(rehearsals)
                runs = {r.index: self._rehearsal(Conversation(user, earlier=list(earlier)), r) for r in rehearsals}
                yield from lockstep(runs, self._batcher, ended)
        except Stop as stop:
            if stop.reason != REHEARSAL_TIME:
                raise
        finally:
            self._batcher.cutoff = None
        traj.memory = memory_mod.summarize(rehearsals)
        if len(self.task.user_turns) > 1:
            traj.memory["user_turn"] = self._user_turn
        yield MemoryReady(traj.memory)

    def _rehearsal(self, conversation: Conversation, rehearsal: Rehearsal) -> Run:
        return self._trajectory(conversation, "rehearsal", rehearsal.index, rehearsal.turns, commit=False)

    # ---- one trajectory (imagined or committed) -----------------------------------------

    def _trajectory(
        self,
        conversation: Conversation,
        where: str,
        rindex: int | None,
        turns: list[Turn],
        commit: bool,
        memory: dict | None = None,
        real_results: list[tuple[ToolCall, Any]] | None = None,
    ) -> Run:
        cfg = self.config
        # Few-shot entries for the rehearser: the real results of the conversation so far
        # (a committed run appends to its caller's list, so the next user turn has them).
        real_results = [] if real_results is None else real_results
        execute = commit and self.executor is not None
        held: set[str] = set()  # calls held once in this run (asked again, they run)
        withdrawn = False  # an answer taken back once for values only rehearsals had
        turn_index = 0
        while turn_index < cfg.max_steps:
            require = cfg.require_first_call and turn_index == 0
            prompt = actor_prompt(self.backend, conversation, self._tools)
            gen = yield self._act_request(prompt, where, rindex, require)
            action = parse_action(
                gen.text, self._tool_names, require_call=require, cut=gen.finish_reason == "length"
            )
            turn = _new_turn(turns, action, gen, prompt, self._user_turn)
            if action.error:
                turn.error = f"{action.error}: {action.error_message}"
                if gen.finish_reason == "length":
                    turn.error = f"{self._cut_by()}: {turn.error}"
                yield TurnUpdated(where, rindex, turn, None, "acted")
                return Outcome(None, "parse_error")
            if not action.calls:
                if gen.finish_reason == "length":
                    turn.error = f"{self._cut_by()}: the answer was not finished"
                elif execute and not withdrawn and self.policy.rehearse_calls:
                    # An answer that tells a rehearsed value as real is taken back once; the
                    # actor answers again from the real results alone.
                    said = self._ungrounded_in(turns, action.content, self._rehearsals)
                    if said:
                        withdrawn = True
                        turn.withdrawn = f"it said {', '.join(said)}, which only rehearsals had"
                        conversation.memory, conversation.grounded = None, True
                        yield TurnUpdated(where, rindex, turn, None, "acted")
                        continue  # not a step: the same state is asked again
                yield TurnUpdated(where, rindex, turn, None, "acted")
                return Outcome(action.content, "max_new_tokens" if turn.error else "answer")
            turn_index += 1
            for call in action.calls:
                step = CallStep(call)
                turn.calls.append(step)
                yield from self._call(turn, step, conversation, real_results, where, rindex, execute, held)
                if execute and step.held:
                    continue
                if execute:
                    real_results.append((call, step.real))
                    why = memory_mod.contradiction(step, cfg.memory_fidelity_floor) if conversation.memory else None
                    if why:
                        conversation.memory = None  # the next turns read the real results alone
                        if memory is not None:
                            memory["withdrawn"] = {"turn": turn.index, "position": len(turn.calls) - 1, "call": call.name, "why": why}
                            yield MemoryReady(memory)
                    if step.error:
                        conversation.turns.append(turn)
                        return Outcome(None, "environment_error")
            conversation.turns.append(turn)
            if commit and not execute:
                # Nothing to commit against: the calls stand as the answer (BFCL style).
                return Outcome(None, "no_environment")
        return Outcome(None, "max_steps")

    def _call(
        self,
        turn: Turn,
        step: CallStep,
        conversation: Conversation,
        real_results: list[tuple[ToolCall, Any]],
        where: str,
        rindex: int | None,
        execute: bool,
        held: set[str] | None = None,
    ) -> Generator[Event | Request, Generation, None]:
        """Validate one call, then rehearse it (where the mode does), then execute it (in
        a commit with an environment) unless its rehearsal foresaw a failure: then it is
        held once (``EpisodeConfig.hold_predicted_failures``); the turn is reported after
        each phase."""
        tool = find_tool(self._tools, step.call.name)
        step.validation_errors = check_arguments(tool, step.call.arguments) if tool else []
        step.valid = tool is not None and not step.validation_errors
        at = len(turn.calls) - 1
        yield TurnUpdated(where, rindex, turn, at, "acted")
        rehearse = self.policy.rehearse_calls
        try:
            if rehearse:
                context = self._read_context(step, tool) if execute else []
                yield from self._rehearse(turn, step, tool, conversation, real_results, where, rindex, context)
                yield TurnUpdated(where, rindex, turn, at, "rehearsed")
                if execute and held is not None and self._hold(step, held):
                    yield TurnUpdated(where, rindex, turn, at, "held")
                    return
            if execute:
                self._execute(step, tool)
                if rehearse:
                    shown = shots(self.config.known_results, real_results, context)
                    self._score(step, tool, shown, conversation)
                yield TurnUpdated(where, rindex, turn, at, "executed")
                self._batcher.check_limits()  # Stop or the time limit during the call
        except Stop as stop:
            # The record says why this call has no rehearsed or real response.
            missing = "rehearsal" if rehearse and step.rehearsed is None else "real call"
            if step.error is None and (missing == "rehearsal" or (execute and step.real is None)):
                step.error = f"{_STOP_WORDS.get(stop.reason, stop.reason)} before the {missing}"
                step.rehearsal_cut = missing == "rehearsal" and stop.reason == REHEARSAL_TIME
                yield TurnUpdated(where, rindex, turn, at, "acted")
            raise

    # ---- phases ---------------------------------------------------------------------

    def _read_context(self, step: CallStep, tool: Tool | None) -> list[tuple[ToolCall, Any]]:
        """The real reads that show what ``step``'s call depends on (the environment names
        them), made before it is rehearsed; recorded on the step."""
        if self.environment is None or tool is None or not step.valid:
            return []
        try:
            reads = self.environment.context_reads(tool.original_name, step.call.arguments)
            pairs = read_context(reads, self.environment.execute)
        except Exception:  # noqa: BLE001 - a context is a help, never a reason to fail the run
            return []
        step.context = [{"call": c.to_dict(), "result": r} for c, r in pairs]
        return pairs

    def _hold(self, step: CallStep, held: set[str]) -> bool:
        """Whether ``step`` is held: its rehearsal predicted a failure, and the same call was
        not held before in this run."""
        if not self.config.hold_predicted_failures or not is_error(step.rehearsed) or _rehearsal_failed(step.rehearsed):
            return False
        key = json.dumps(step.call.to_dict(), sort_keys=True, default=str)
        if key in held:
            return False
        held.add(key)
        step.held = True
        return True

    def _memory_text(self, memory: dict | None) -> str | None:
        """The rehearsal memory as the committed actor reads it (``EpisodeConfig.memory``)."""
        if not memory or self.config.memory == "off":
            return None
        if self.config.memory == "full":
            return memory.get("text") or None
        return memory_mod.render(memory.get("attempts", []), values=False) or None

    def _ungrounded_in(self, turns: list[Turn], answer: str | None, rehearsals: list[Rehearsal] = ()) -> list[str]:
        """The values of ``answer`` that only rehearsals had (``grounding.py``)."""
        committed = call_steps(turns)
        imagined = [c for r in rehearsals for c in call_steps(r.turns)]
        rehearsed = [c.rehearsed for c in [*committed, *imagined]]
        rehearsed += [r.final_answer for r in rehearsals]
        real: list[Any] = [*self.task.user_turns, *(t.to_openai() for t in self.task.tools_at(len(self.task.user_turns)))]
        for c in committed:
            real += [c.call.arguments, c.real, *(x.get("result") for x in c.context)]
        for c in imagined:
            real.append(c.call.arguments)  # an argument is the actor's, not a prediction
        real += [r for _, r in self.config.known_results]
        return grounding.ungrounded(answer, rehearsed, real)

    def _ungrounded(self, traj: Trajectory, answer: str | None) -> list[str]:
        if not self.policy.rehearse_calls:
            return []
        return self._ungrounded_in(traj.turns, answer, traj.rehearsals)

    def _act_request(self, prompt: Any, where: str, rindex: int | None, require: bool) -> Request:
        constraint = self._constraint("actor", tools=tuple(self._tools), require_call=require)
        return Request(prompt, constraint, "actor", where, rindex)

    def _constraint(self, role: str, **values: Any) -> Constraint | None:
        """What a ``role`` turn's grammar enforces, where decoding is constrained."""
        return Constraint(role=role, think_chars=self.config.think_chars, **values) if self._constrained else None

    def _rehearse(
        self,
        turn: Turn,
        step: CallStep,
        tool: Tool | None,
        conversation: Conversation,
        real_results: list[tuple[ToolCall, Any]],
        where: str,
        rindex: int | None,
        context: list[tuple[ToolCall, Any]] = (),
    ) -> Generator[Request, Generation, None]:
        decided = validation_error(step.call, tool, step.validation_errors)
        if decided is None:
            decided = repeated_failure(step.call, real_results)
        if decided is not None:
            # Validation, or a failure met again in an unchanged world, is certain here: the
            # engine writes the response itself and the model is not asked (it could only
            # guess what the engine already knows).
            step.rehearsed = decided
            step.rehearsal_text = None
            return
        messages = rehearser_messages(
            self._tools, shots(self.config.known_results, real_results, list(context)), conversation, turn.action.text, step.call, tool,
            response_schema=shows_response_schema(self.backend.info.model_id, self.config.response_schema),
        )
        prompt = rehearser_prompt(self.backend, messages)
        step.rehearser_prompt = _prompt_text(prompt)
        if where == "commit" and step.rehearser_prompt in self._predicted:
            step.rehearsal_text, step.rehearsal_from = self._predicted[step.rehearser_prompt]
            step.rehearsed = _parsed_rehearsal(step.rehearsal_text)
            return
        # What the call fixes is pinned; a failure seen for real may be said again (grammar.py).
        constraint = rehearsal_constraint(
            tool.response if tool else None, step.call.name, step.call.arguments, real_results, self._failures,
            self.config.think_chars,
        ) if self._constrained else None
        # A committed call's rehearsal gives way to the real call when the limit draws near.
        own = self._deadline - CALL_RESERVE * self.config.episode_seconds if where == "commit" else None
        gen = yield Request(prompt, constraint, "rehearser", where, rindex, deadline=own)
        if gen.finish_reason == CUT:
            step.rehearsal_cut = True
            step.rehearse_seconds = round(gen.seconds, 3)
            return
        step.rehearsal_text = gen.text
        step.rehearse_seconds = round(gen.seconds, 3)
        step.rehearse_tokens = gen.new_tokens
        cut = self._cut_by() if gen.finish_reason == "length" else None
        step.rehearsed = _parsed_rehearsal(gen.text, cut)
        if where == "rehearsal" and cut is None:
            self._predicted.setdefault(step.rehearser_prompt, (gen.text, rindex))

    def _execute(self, step: CallStep, tool: Tool | None) -> None:
        assert self.executor is not None
        started = time.monotonic()
        if tool is None:
            step.real = _failure("TOOL_NOT_AVAILABLE", f"no tool named {step.call.name!r}")
        else:
            call = partial(self.executor, tool, step.call.arguments)
            step.real, step.error = _real_call(call, self.cancel, self._deadline, self.config.tool_seconds, self._shown)
            self._mark_write(step, tool)
        step.execute_seconds = round(time.monotonic() - started, 3)

    def _score(self, step: CallStep, tool: Tool | None, shown: list[tuple[ToolCall, Any]],
               conversation: Conversation) -> None:
        """The committed call's fidelity and its parts (``fidelity.score``): a rehearsal cut
        or unparsable is a miss; values the rehearser's context held are the knowable ones."""
        if step.real is None or not self.policy.rehearse_calls or step.error:
            return
        history = [r for t in conversation.turns for _, r in conversation.results(t)]
        context = FidelityContext(
            arguments=step.call.arguments,
            known=tuple([*(r for _, r in shown), *history]),
            description=json.dumps(tool.to_openai(), ensure_ascii=False) if tool else "",
        )
        parts = score(step.rehearsed, step.real, context)
        step.fidelity = fidelity(step.rehearsed, step.real)
        step.outcome_right, step.knowable, step.unknowable = parts.outcome_right, parts.knowable, parts.unknowable

    def _cut_by(self) -> str:
        """Which budget cut a generation short."""
        sampling = self.sampling
        think = f", {sampling.think_tokens} of them for reasoning" if sampling.think_tokens else ""
        return f"cut by the new-token limit (max_new_tokens={sampling.max_new_tokens}{think})"

    def _mark_write(self, step: CallStep, tool: Tool) -> None:
        """Whether the real call went to a tool that writes, and whether the request asked
        for one (where the task's check says what it asks: a typed request has none)."""
        if self.environment is None:
            return
        step.write = self.environment.writes(tool.original_name)
        if self.task.check is not None:
            step.unrequested_write = unrequested_write(step.write, step.real, read_only(self.task.check))

    @property
    def _batcher(self) -> BatchGenerator:
        assert self._generate is not None, "the batcher is made when the run starts"
        return self._generate

    def _shown(self, text: str) -> str:
        return self.config.redact(text) if self.config.redact is not None else text


def known_reads(traj: Trajectory, limit: int = 8) -> list[tuple[ToolCall, Any]]:
    """The committed run's real (call, result) pairs made before its first write (they
    describe the state every fresh episode of the environment starts in), without repeats:
    few-shot for the same visitor's later episodes (``EpisodeConfig.known_results``)."""
    out: list[tuple[ToolCall, Any]] = []
    for step in call_steps(traj.turns):
        if step.write is not False:  # a write, or a tool whose writing is unknown: stop here
            break
        if step.real is None or step.error is not None or any(c == step.call for c, _ in out):
            continue
        out.append((step.call, step.real))
    return out[:limit]


def _new_turn(turns: list[Turn], action: Action, gen: Generation, prompt: Any, user_turn: int = 0) -> Turn:
    turn = Turn(
        index=len(turns),
        user_turn=user_turn,
        action=action,
        act_seconds=round(gen.seconds, 3),
        act_tokens=gen.new_tokens,
        prompt_tokens=gen.prompt_tokens,
        actor_prompt=_prompt_text(prompt),
    )
    turns.append(turn)
    return turn


def _real_call(
    call: Callable[[], Any], cancel: threading.Event, deadline: float, tool_seconds: float, shown: Callable[[str], str]
) -> tuple[Any, str | None]:
    """(real response, step error). The call runs supervised: a tool that hangs costs at
    most ``tool_seconds`` (or what is left of the episode), and Stop works meanwhile."""
    done = wait(supervise(call, cancel=cancel, deadline=deadline, limit_s=tool_seconds, name="envace-execute"))
    if done.returned:
        return done.value, None
    if done.error is not None:  # a failing backend must not take the app down
        message = shown(str(done.error) or type(done.error).__name__)
        return _failure("ENVIRONMENT_FAILURE", message), f"the environment failed: {message}"
    if done.stopped == "cancelled":
        return _failure("CANCELLED", "stopped while the tool was running"), "stopped during the real call"
    if done.stopped == "time_limit":
        return _failure("TIME_LIMIT", "the episode's time ran out during the call"), "time limit during the real call"
    message = f"no response within {tool_seconds:g} s"
    return _failure("TOOL_TIMEOUT", message), f"the environment did not answer: {message}"


def _parsed_rehearsal(text: str, cut: str | None = None) -> Any:
    """The rehearser's result; one that does not parse as an error object (the actor still
    needs a tool message), naming the budget that ``cut`` it short."""
    result, problem = parse_execution_result(text)
    if not problem:
        return result
    if cut is not None:
        problem = f"{cut} before the result was closed ({problem})"
    return {"error": {"code": "REHEARSAL_FAILED", "message": problem}}


def _prompt_text(prompt: Prompt) -> str:
    """What the record keeps of a prompt: its rendered text, or its messages as JSON."""
    return prompt.shown()


def _failure(code: str, message: str) -> dict:
    return {"error": {"code": code, "message": message}}


def _rehearsal_failed(value: Any) -> bool:
    err = value.get("error") if isinstance(value, dict) else None
    return isinstance(err, dict) and err.get("code") == "REHEARSAL_FAILED"


def run_episode(
    backend: Backend,
    task: Task,
    config: EpisodeConfig,
    environment: Environment | None = None,
    cancel: threading.Event | None = None,
) -> Trajectory:
    """Run to the end and return the record (no streaming)."""
    for event in Episode(backend, task, config, environment, cancel=cancel).run():
        if isinstance(event, EpisodeFinished):
            return event.trajectory
    raise AssertionError("the engine always ends with EpisodeFinished")
