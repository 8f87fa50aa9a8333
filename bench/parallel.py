"""parallel_rehearsal_ratio: N imagined trajectories ÷ one, same task, same seeds.

Times the rehearsal phase of a ``parallel`` episode (start to ``MemoryReady``) with
N rehearsals and with one; the committed run is not part of the figure. Sampling
varies trajectory lengths, so each side is the median over seeds, and the ratio is
of the medians. All N run (``imagined_others="always"``): the figure is what N imagined
runs cost against one, not how often the default leaves N−1 of them unstarted.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

from envace_demo.engine import Episode, EpisodeConfig
from envace_demo.envs.registry import create
from envace_demo.events import MemoryReady, RehearsalFinished
from envace_demo.record import rows
from envace_demo.models.base import Sampling
from envace_demo.tasks import Task


@dataclass
class RehearsalTiming:
    n: int
    seconds: float
    steps: int  # imagined steps over all N trajectories
    tokens: int  # generated tokens over all N trajectories


@dataclass
class ParallelFigures:
    n: int
    ratio: float
    one_s: float  # median seconds of one rehearsal
    many_s: float  # median seconds of N rehearsals
    runs: list[dict] = field(default_factory=list)


def time_rehearsals(backend, task: Task, n: int, seed: int, max_steps: int, max_new_tokens: int,
                    require_first_call: bool) -> RehearsalTiming:
    """Seconds from the start of a ``parallel`` episode until its rehearsal memory is ready."""
    config = EpisodeConfig(
        mode="parallel",
        n=n,
        sampling=Sampling(seed=seed, max_new_tokens=max_new_tokens),
        max_steps=max_steps,
        constrained=backend.supports_constraints,
        require_first_call=require_first_call,
        imagined_others="always",
    )
    episode = Episode(backend, task, config, create(task.env) if task.env else None)
    events = episode.run()
    finished = []
    start = time.perf_counter()
    for event in events:
        if isinstance(event, RehearsalFinished):
            finished.append(event.rehearsal)
        if isinstance(event, MemoryReady):
            break
    seconds = time.perf_counter() - start
    events.close()  # the committed run is not measured
    steps = sum(1 for r in finished for _ in rows(r.turns))
    tokens = sum(t.tokens() for r in finished for t in r.turns)
    return RehearsalTiming(n, seconds, steps, tokens)


def parallel_ratio(backend, task: Task, n: int = 4, seeds: tuple[int, ...] = (0, 1, 2), max_steps: int = 2,
                   max_new_tokens: int = 96, require_first_call: bool = True) -> ParallelFigures:
    time_rehearsals(backend, task, 1, 999, 1, 8, require_first_call)  # warm-up: grammar compilation
    one, many, runs = [], [], []
    for seed in seeds:  # interleaved, so drifts of a shared machine hit both sides
        a = time_rehearsals(backend, task, 1, seed, max_steps, max_new_tokens, require_first_call)
        b = time_rehearsals(backend, task, n, seed, max_steps, max_new_tokens, require_first_call)
        one.append(a.seconds)
        many.append(b.seconds)
        runs.append({"seed": seed, "one": vars(a), "many": vars(b)})
    one_s, many_s = statistics.median(one), statistics.median(many)
    return ParallelFigures(n=n, ratio=many_s / one_s, one_s=one_s, many_s=many_s, runs=runs)


def batch_pass_ratio(model, rows: int = 4, cached: int = 1200, passes: int = 12) -> dict:
    """One decoding pass of ``rows`` rows against one row, each over ``cached`` tokens of
    KV cache: the least N rehearsals batched could cost against one, were every row as long
    as the longest and no token forced (one row skips the forced ones, a batch cannot)."""
    import torch

    def per_pass(batch: int) -> float:
        generator = torch.Generator().manual_seed(batch)
        ids = torch.randint(100, model.config.vocab_size - 100, (batch, cached), generator=generator)
        step = ids[:, -1:]
        with torch.no_grad():
            cache = model(ids, use_cache=True).past_key_values
            times = []
            for _ in range(passes + 2):  # the first two warm up
                start = time.perf_counter()
                model(step, past_key_values=cache, use_cache=True)
                times.append(time.perf_counter() - start)
                cache.crop(-1)
        return statistics.median(times[2:])

    one, many = per_pass(1), per_pass(rows)
    return {"rows": rows, "cached": cached, "one_ms": round(one * 1e3, 3), "many_ms": round(many * 1e3, 3),
            "ratio": round(many / one, 3)}
