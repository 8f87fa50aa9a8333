"""Rollouts: the engine's own imagined episodes, cut into training rows.

A group is ``Episode(mode="imagine", n=G)`` on one task: G trajectories in which
the actor acts and the same policy rehearses every tool response, with no real
environment (method doc §4). Every generation becomes one ``Row`` tagged with its
group and role, holding the exact prompt the engine rendered and the completion,
so training sees the demo's prompts byte for byte.

Token ids: a local backend reports on each ``Generation`` the prompt's ids and the ids
it sampled, stop token included, and those are trained. With a backend that reports
text only, the completion is re-tokenized and the end-of-turn token appended when
the generation stopped on it, so the policy still learns where to stop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from envace_demo.engine import Episode, EpisodeConfig
from envace_demo.events import EpisodeFinished
from envace_demo.models.base import Backend, BackendWrapper, Generation, Prompt, Sampling
from envace_demo.record import Rehearsal, Trajectory
from envace_demo.tasks import Task

ROLES = ("actor", "rehearser")


@dataclass
class Row:
    """One generation: what the policy saw and what it wrote."""

    group: int  # the prompt group (one task in one step)
    episode: int  # which of the group's G rollouts
    role: str  # "actor" or "rehearser"
    prompt: str
    completion: str
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    empty: bool = False  # nothing outside the reasoning
    reward: float = 0.0
    advantage: float = 0.0
    old_logp: Any = None  # (T,) log pi_old, kept when one batch gets several updates


@dataclass
class Group:
    """The G rollouts of one task, their rows and, once scored, their rewards."""

    index: int
    task: Task
    trajectory: Trajectory
    rows: list[Row] = field(default_factory=list)
    scores: dict[int, Any] = field(default_factory=dict)  # rollout index -> rewards.Score

    @property
    def rehearsals(self) -> list[Rehearsal]:
        return self.trajectory.rehearsals


class _Recorder(BackendWrapper):
    """Passes every call to ``inner`` and keeps each ``Generation`` under (prompt as
    recorded, text), in the order they came: two identical samples are two entries,
    each with the token ids it was sampled as."""

    def __init__(self, inner: Backend):
        super().__init__(inner)
        self.seen: dict[tuple[str, str], list[Generation]] = {}

    def generate(self, prompt, sampling, constraint=None, on_token=None, cancel=None) -> Generation:
        gen = self.inner.generate(prompt, sampling, constraint=constraint, on_token=on_token, cancel=cancel)
        self._keep([prompt], [gen])
        return gen

    def generate_many(self, prompts, sampling, constraints=None, on_token=None, cancel=None):
        # Passed on whole: the engine batches parallel rehearsals here.
        gens = self.inner.generate_many(prompts, sampling, constraints, on_token=on_token, cancel=cancel)
        self._keep(prompts, gens)
        return gens

    def _keep(self, prompts: list[Prompt], gens: list[Generation]) -> None:
        for prompt, gen in zip(prompts, gens):
            self.seen.setdefault((prompt.shown(), gen.text), []).append(gen)

    def take(self, prompt: str, text: str) -> Generation | None:
        """The generation that wrote ``text`` for ``prompt``, each one handed out once:
        the one whose text is the very string the record holds, else the oldest left."""
        kept = self.seen.get((prompt, text))
        if not kept:
            return None
        at = next((i for i, gen in enumerate(kept) if gen.text is text), 0)
        return kept.pop(at)


def episode_config(
    config: Any,
    n: int,
    seed: int,
    mode: str = "imagine",
    temperature: float | None = None,
    top_p: float = 1.0,
    top_k: int = 0,
) -> EpisodeConfig:
    """The engine settings shared by rollouts and evaluation (``config``: a TrainConfig).

    Rollouts sample the plain softmax at ``config.temperature`` (no top-p/top-k), so
    the training log-probs are those of the distribution that was sampled (up to the
    grammar's mask, see the trainer's docstring)."""
    temperature = config.temperature if temperature is None else temperature
    return EpisodeConfig(
        mode=mode,
        n=n,
        sampling=Sampling(
            temperature=temperature, top_p=top_p, top_k=top_k, max_new_tokens=config.max_new_tokens, seed=seed
        ),
        max_steps=config.max_turns,
        constrained=config.constrained,
        require_first_call=config.require_first_call,
    )


def rollout_group(
    backend: Backend,
    task: Task,
    index: int,
    config: Any,
    seed: int,
    tokenize: Callable[[str], list[int]],
    stop_id: int | None,
    cancel: threading.Event | None = None,
) -> Group:
    """G imagined rollouts of ``task`` and their rows (rewards not set yet)."""
    recorder = _Recorder(backend)
    episode = Episode(recorder, task, episode_config(config, config.group_size, seed), cancel=cancel)
    trajectory = None
    for event in episode.run():
        if isinstance(event, EpisodeFinished):
            trajectory = event.trajectory
    assert trajectory is not None
    group = Group(index=index, task=task, trajectory=trajectory)
    prompt_ids: dict[str, list[int]] = {}  # re-tokenized prompts: the G first actor turns share one
    for rehearsal in trajectory.rehearsals:
        for turn in rehearsal.turns:  # one actor generation, then each call the model rehearsed
            assert turn.actor_prompt is not None
            group.rows.append(
                _row(group.index, rehearsal.index, "actor", turn.actor_prompt, turn.action.text,
                     recorder, tokenize, stop_id, prompt_ids)
            )
            for step in turn.calls:
                if step.rehearsal_text is not None and step.rehearser_prompt is not None:
                    group.rows.append(
                        _row(group.index, rehearsal.index, "rehearser", step.rehearser_prompt, step.rehearsal_text,
                             recorder, tokenize, stop_id, prompt_ids)
                    )
    return group


def _row(
    group: int,
    episode: int,
    role: str,
    prompt: str,
    text: str,
    recorder: _Recorder,
    tokenize,
    stop_id,
    prompt_ids: dict,
) -> Row:
    gen = recorder.take(prompt, text)
    if gen is not None and gen.token_ids:
        ids, row_prompt_ids = gen.token_ids, gen.prompt_ids
    else:  # a backend that reports text only: re-tokenize, close the turn if it did
        ids = tokenize(text)
        if gen is not None and gen.finish_reason == "stop" and stop_id is not None:
            ids = ids + [stop_id]
        if prompt not in prompt_ids:
            prompt_ids[prompt] = tokenize(prompt)
        row_prompt_ids = prompt_ids[prompt]
    return Row(
        group=group,
        episode=episode,
        role=role,
        prompt=prompt,
        completion=text,
        prompt_ids=list(row_prompt_ids),
        completion_ids=list(ids),
        empty=is_empty(text),
    )


def is_empty(text: str) -> bool:
    """Whether a generation says nothing outside its ``<think>`` block."""
    rest = text
    if "</think>" in rest:
        rest = rest.split("</think>", 1)[1]
    elif rest.lstrip().startswith("<think>"):
        rest = ""  # reasoning never closed: nothing else was said
    return not rest.strip()
