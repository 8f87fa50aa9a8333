"""The episode: its user turns in order, each rehearsed (where the mode does) from the
real conversation so far and then committed; the events it yields, and its verdict."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any, Generator, Iterator

from envace_demo import memory as memory_mod
from envace_demo.bfcl_multi import judge as bfcl_judge
from envace_demo.engine.acting import TrajectoryRunner
from envace_demo.engine.answers import ungrounded
from envace_demo.engine.commit import Committer, Executor
from envace_demo.engine.config import EpisodeConfig
from envace_demo.engine.limits import HALT_GRACE_S, REHEARSAL_TIME
from envace_demo.engine.rehearsal import CallRehearser, memory_text
from envace_demo.envs.base import Environment
from envace_demo.errors import ConfigError
from envace_demo.events import (
    EpisodeFinished,
    EpisodeStarted,
    Event,
    MemoryReady,
    RehearsalFinished,
    UserTurnStarted,
)
from envace_demo.fidelity import mean_fidelity
from envace_demo.generation import BatchGenerator, Cutoff
from envace_demo.models.adapters import rehearse_temperature
from envace_demo.models.base import Backend
from envace_demo.models.grammar import rehearses_failures
from envace_demo.modes import mode_policy
from envace_demo.prompts import Conversation
from envace_demo.record import Rehearsal, ToolCall, Trajectory, Turn, call_steps
from envace_demo.scheduler import Outcome, Run, Stop, drive, lockstep
from envace_demo.task import Task
from envace_demo.tasks import evaluate


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
        # The sampling every generation uses: the config's, the rehearser's temperature filled
        # in from the served weights where the config leaves it (adapters.rehearse_temperature).
        self.sampling = config.sampling
        if self.sampling.rehearse_temperature is None:
            self.sampling = replace(self.sampling, rehearse_temperature=rehearse_temperature(backend))
        self._constrained = config.constrained and backend.supports_constraints
        failures = rehearses_failures(backend) if config.rehearse_failures is None else config.rehearse_failures
        self._rehearser = CallRehearser(backend, config, self.sampling, self._constrained, failures,
                                        environment.stated_facts if environment is not None else None)
        self._committer = Committer(
            environment, executor, self.cancel, task.check, config.hold_predicted_failures, config.tool_seconds,
            self._shown, config.hold_certainty,
        )
        self._runner: TrajectoryRunner | None = None  # made when the run starts (its deadline)

    # ---- public -----------------------------------------------------------------

    def run(self) -> Iterator[Event]:
        cfg, policy = self.config, self.policy
        self.backend.forget_replays()  # its time is its own: no rows of an earlier run replayed
        start = time.monotonic()
        deadline = start + cfg.episode_seconds
        batcher = BatchGenerator(self.backend, self.sampling, self.cancel, deadline, HALT_GRACE_S, self._shown)
        self._runner = TrajectoryRunner(
            self.backend, self.task, cfg, policy, self.sampling, batcher, deadline, self._rehearser,
            self._committer, self._constrained,
        )
        traj = self._new_trajectory()
        self._runner.rehearsals = traj.rehearsals
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

    # ---- the conversation -----------------------------------------------------------

    def _new_trajectory(self) -> Trajectory:
        return Trajectory(
            mode=self.config.mode,
            model=self.backend.info.to_dict(),
            tools=[t.to_dict() for t in self.task.tools],
            prompt=self.task.prompt,
            follow_ups=list(self.task.follow_ups),
            environment=self.task.env,
            task=self.task.name,
            n=self.policy.rehearsals,
            seed=self.sampling.seed,
            sampling={k: v for k, v in vars(self.sampling).items()},
        )

    def _converse(self, traj: Trajectory, start: float) -> Generator[Event, None, None]:
        """Each user turn in order: rehearse it (where the mode does) from the real
        conversation so far, then commit it; the environment's state carries over."""
        earlier: list[tuple[str, list[Turn]]] = []  # the user turns answered so far, for real
        real_results: list[tuple[ToolCall, Any]] = []  # every real result so far: few-shot
        done = self._resume(traj, earlier, real_results)
        for k, user in enumerate(self.task.user_turns):
            if k < done:
                continue
            self._trajectories.at_user_turn(k)
            if k:
                yield UserTurnStarted(k, user)
            if self.policy.rehearsals:
                yield from self._rehearse_all(traj, start, earlier, real_results)
            memory = traj.memory if self.policy.rehearsals else None
            if memory is not None:  # read by the committed actor? (EpisodeConfig.memory_shown)
                # In parallel, the lead run is the committed run's own path (its seeds and,
                # while nothing is foreseen, its actions): another run's foresight is about a
                # path the committed run does not take, and reading it only distracts.
                lead = None if self.policy.sequential else self._trajectories.lead
                memory["shown"] = self.config.memory_shown == "always" or self._foresaw(memory, lead)
            conversation = Conversation(
                user, memory=memory_text(memory, self.config.memory) if memory and memory["shown"] else None,
                executed=self.executor is not None, earlier=list(earlier),
            )
            first = len(traj.turns)
            run = self._trajectories.run(conversation, "commit", None, traj.turns, commit=True, memory=memory,
                                         real_results=real_results)
            outcome = yield from drive(run, self._batcher)
            traj.answers.append(outcome.final_answer)
            traj.final_answer, traj.ended = outcome.final_answer, outcome.ended
            said = self._ungrounded(traj, outcome.final_answer)
            traj.ungrounded = sorted({*traj.ungrounded, *said})
            # The next turn reads this one as it happened: its steps and its answer.
            answered = [t for t in traj.turns[first:] if t.read()]
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
        self._trajectories.rehearsals = traj.rehearsals
        for k, user in enumerate(self.task.user_turns[: len(before.answers)]):
            earlier.append((user, [t for t in before.turns if t.user_turn == k and t.read()]))
        real_results += [(c.call, c.real) for c in call_steps(before.turns) if c.real is not None]
        return len(before.answers)

    def _ungrounded(self, traj: Trajectory, answer: str | None) -> list[str]:
        if not self.policy.rehearse_calls:
            return []
        return ungrounded(self.task, self.config.known_results, traj.turns, answer, traj.rehearsals)

    # ---- rehearsal ----------------------------------------------------------------

    def _rehearse_all(
        self, traj: Trajectory, start: float, earlier: list[tuple[str, list[Turn]]],
        real_results: list[tuple[ToolCall, Any]] = (),
    ) -> Generator[Event, None, None]:
        """The N imagined trajectories of the current user turn, from the real conversation
        before it (``earlier``, and its ``real_results``, the rehearser's few-shot as the
        committed run's); their memory becomes ``traj.memory``."""
        user_turn = self._trajectories.user_turn
        user = self.task.user_turns[user_turn]
        base = len(traj.rehearsals)
        rehearsals = [Rehearsal(index=base + k, user_turn=user_turn) for k in range(self.policy.rehearsals)]
        self._trajectories.lead = base  # its actions are drawn with the committed actor's seeds

        def ended(index: int, outcome: Outcome) -> Iterator[Event]:
            rehearsal = rehearsals[index - base]
            rehearsal.final_answer, rehearsal.ended = outcome.final_answer, outcome.ended
            rehearsal.cut = outcome.ended == REHEARSAL_TIME
            yield RehearsalFinished(rehearsal)

        skipped: list[int] = []  # how many imagined runs the lead's foresight left unstarted
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
                        outcome = yield from drive(self._rehearsal(conversation, rehearsal, real_results), self._batcher)
                    except Stop as stop:
                        yield from ended(rehearsal.index, Outcome(None, stop.reason))
                        raise
                    yield from ended(rehearsal.index, outcome)
            else:
                for group in self._imagined_groups(rehearsals, skipped):
                    traj.rehearsals.extend(group)
                    runs = {r.index: self._rehearsal(Conversation(user, earlier=list(earlier)), r, real_results)
                            for r in group}
                    yield from lockstep(runs, self._batcher, ended)
        except Stop as stop:
            if stop.reason != REHEARSAL_TIME:
                raise
        finally:
            self._batcher.cutoff = None
        traj.memory = memory_mod.summarize(rehearsals if self.policy.sequential else traj.rehearsals[base:])
        if skipped:
            traj.memory["others_skipped"] = skipped[0]
        if len(self.task.user_turns) > 1:
            traj.memory["user_turn"] = user_turn
        yield MemoryReady(traj.memory)

    def _imagined_groups(self, rehearsals: list[Rehearsal], skipped: list[int]) -> Iterator[list[Rehearsal]]:
        """Parallel's imagined runs, in the groups that run in step: all at once, or the lead
        first and the others only where it foresaw something (``EpisodeConfig.imagined_others``;
        how many it left unstarted goes into ``skipped``)."""
        lazy = (self.config.imagined_others == "on_foresight" and self.config.memory_shown == "foresight"
                and self.policy.commit and len(rehearsals) > 1)
        if not lazy:
            yield rehearsals
            return
        lead, others = rehearsals[0], rehearsals[1:]
        yield [lead]
        if self._foresaw(memory_mod.summarize([lead]), lead.index):
            yield others
        else:
            skipped.append(len(others))

    def _foresaw(self, memory: dict, attempt: int | None) -> bool:
        """Whether the memory is worth the committed actor's reading: a failure foreseen as
        surely as a held call is trusted (``EpisodeConfig.trust_certainty``; any, where it is
        None), or an invalid call. A less sure one is not shown (``EpisodeConfig.hold_certainty``
        decides what its call does): shown upfront it only changed what the actor wrote (a
        shopping list written with a full stop, against a check that wanted none)."""
        return memory_mod.foresaw(memory, attempt, sure=self.config.trust_certainty)

    def _rehearsal(self, conversation: Conversation, rehearsal: Rehearsal, real_results=()) -> Run:
        # Its own copy of the real results: its fetched reads join them, as a committed run's do.
        return self._trajectories.run(conversation, "rehearsal", rehearsal.index, rehearsal.turns, commit=False,
                                      real_results=list(real_results))

    # ---- parts made when the run starts ------------------------------------------------

    @property
    def _trajectories(self) -> TrajectoryRunner:
        assert self._runner is not None, "the trajectory runner is made when the run starts"
        return self._runner

    @property
    def _batcher(self) -> BatchGenerator:
        return self._trajectories.batcher

    def _shown(self, text: str) -> str:
        return self.config.redact(text) if self.config.redact is not None else text


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
