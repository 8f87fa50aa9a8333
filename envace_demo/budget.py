"""How much model work fits in a time budget, from the loaded model's measured speed.

An episode's time is almost all generation: each turn of the actor and each rehearsal
is one call to the model, decoding up to ``max_new_tokens``. So the defaults (steps,
new tokens, N) are chosen from the model's decode speed, measured once after loading,
so that the default run ends within ``target_seconds`` on whatever runs it: a 135M
model on two CPU cores gets a short budget, the 8B model on a GPU a long one.

Everything here is pure arithmetic; :mod:`envace_demo.models.speed` times the model
(``measure_speed``) and fits the settings to what it measured (``fitted_settings``).

The measured speed must survive a busy machine: it is the median of several short
timings (a burst of other work spoils one, not the median), it follows what runs then see
(:func:`observed`), and it is kept within what the model's size makes plausible
(:func:`plausible`): decoding a token reads every weight once, prefilling one costs about
two operations per parameter, and no machine that runs the model at all is slower than
the floors below, nor any faster than the ceilings.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from envace_demo.errors import ConfigError
from envace_demo.settings import Settings, default_of

TARGET_SECONDS = default_of(Settings, "target_seconds")  # the default run should end within this
# The time limit of an episode is this many times its target: a slower turn than the
# typical one is let finish, a runaway is not. On a machine too slow for even the
# smallest budget to fit the target, the limit is this many times the estimate instead:
# a run cut at the limit would have spent its time for nothing.
LIMIT_FACTOR = 2.0
OVER_ESTIMATE = 1.5
# Tokens a turn takes when the model is not cut short: bounded reasoning, then one call
# (actor) or one JSON result (rehearser). Measured on the bank example with the embedded
# model under constraint (actor 38-81, rehearser 45-160); a longer budget does not make
# them longer.
TYPICAL_TOKENS = {"actor": 64, "rehearser": 128}
# Of which bounded reasoning (a grammar's 120-300 characters). On a machine where even the
# smallest budget would not fit the target with it, reasoning goes first (``think_chars`` 0):
# a small model's reasoning is the costliest part of its turns and the least useful.
REASONING_TOKENS = {"actor": 16, "rehearser": 32}
# Decoding N rows at once costs more than one row, far less than N rows one by one.
BATCH_ROW_COST = 0.5
# Rendered prompts (tool schemas, history) of the example environments: 1,000-1,900
# tokens. Each generation pays their prefill: on a CPU that is most of its time. Rows of
# a batch share their common prefix (the schemas) and prefill only where they differ.
PROMPT_TOKENS = 1500
DISTINCT_TOKENS = 300
# The floor holds a bounded rehearsal (grammar.py: 3 items of 32-character strings, about
# 130-190 tokens): a lower cap cuts results in half, and a cut result is no prediction.
TOKEN_LADDER = (2048, 1536, 1024, 768, 512, 384, 256, 192)
# Two steps: one call and the answer.
MIN_STEPS, MAX_STEPS = 2, 8
# Plausible speeds, from the model's size. Memory bandwidth (bytes/s) bounds decoding:
# two busy laptop cores still stream 4 GB/s, one accelerator at most about 5 TB/s.
# Compute (operations/s) bounds prefill: two busy cores still reach 50 GFLOP/s, one
# accelerator at most about 2 PFLOP/s. The embedded model (513 MB of fp32 weights) is so
# held within 7.8-9,700 decode and 195-7.8M prefill tokens/s; idle on two cores it
# decodes 22-29 and prefills about 1,000.
BANDWIDTH = (4e9, 5e12)
COMPUTE = (5e10, 2e15)
# A generate loop in Python does not step faster than this, whatever the model.
MAX_DECODE = 2000.0
# Bytes a weight takes, by dtype and quantization (what the model's footprint is divided by).
_BYTES_PER_PARAMETER = {"float32": 4.0, "bfloat16": 2.0, "float16": 2.0, "4bit": 0.5, "8bit": 1.0}


@dataclass(frozen=True)
class Speed:
    """The loaded model's speed, in tokens per second."""

    decode: float  # new tokens, one row
    prefill: float  # prompt tokens

    def __post_init__(self) -> None:
        if not (self.decode > 0 and self.prefill > 0):
            raise ConfigError(f"speed must be positive, got decode={self.decode}, prefill={self.prefill}")

    def to_dict(self) -> dict:
        return {"decode_tokens_per_s": round(self.decode, 1), "prefill_tokens_per_s": round(self.prefill, 1)}


@dataclass(frozen=True)
class Plausible:
    """The speeds a model of its size can have: (floor, ceiling) tokens/s of each kind."""

    decode: tuple[float, float]
    prefill: tuple[float, float]

    def bound(self, speed: Speed) -> Speed:
        """``speed`` with each figure brought within its range."""
        return Speed(
            decode=min(max(speed.decode, self.decode[0]), self.decode[1]),
            prefill=min(max(speed.prefill, self.prefill[0]), self.prefill[1]),
        )


def plausible(model_bytes: float, bytes_per_parameter: float = 2.0) -> Plausible:
    """What a model whose weights take ``model_bytes`` can do (see ``BANDWIDTH``, ``COMPUTE``)."""
    if not (model_bytes > 0 and bytes_per_parameter > 0):
        raise ConfigError(f"plausible: model size must be positive, got {model_bytes} bytes")
    operations = 2 * model_bytes / bytes_per_parameter  # per prefilled token
    decode = (BANDWIDTH[0] / model_bytes, min(BANDWIDTH[1] / model_bytes, MAX_DECODE))
    return Plausible(decode=(min(decode), decode[1]), prefill=(COMPUTE[0] / operations, COMPUTE[1] / operations))


def plausible_for(backend) -> Plausible | None:
    """The plausible speeds of ``backend``'s model, from the footprint and dtype it reports;
    None where it reports no footprint (a model behind a server)."""
    info = backend.info
    if not info.memory_mb:
        return None
    per_parameter = _BYTES_PER_PARAMETER.get(info.quantization or "") or _BYTES_PER_PARAMETER.get(info.dtype, 2.0)
    return plausible(info.memory_mb * 2**20, per_parameter)


def median_rate(stamps: list[float], least: int = 4) -> float | None:
    """Tokens per second from the times at which tokens streamed in: one over the median
    gap between consecutive tokens (a pause for other work lengthens a few gaps, not the
    median). None with fewer than ``least`` gaps, or none that took any time."""
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    if len(gaps) < least:
        return None
    middle = statistics.median(gaps)
    return 1.0 / middle if middle > 0 else None


@dataclass(frozen=True)
class Budget:
    """Defaults for a run, fitted to a speed."""

    n: int
    max_steps: int
    max_new_tokens: int
    episode_seconds: float  # the hard limit
    estimate_seconds: float  # a typical run of the default mode with these defaults
    think_chars: int | None = None  # reasoning bound under a grammar; None: the engine's own

    def to_dict(self) -> dict:
        return {
            "n": self.n,
            "max_steps": self.max_steps,
            "max_new_tokens": self.max_new_tokens,
            "episode_seconds": round(self.episode_seconds),
            "estimate_seconds": round(self.estimate_seconds),
            "think_chars": self.think_chars,
        }


def _generation_seconds(speed: Speed, role: str, max_new_tokens: int, rows: int, reasoning: bool = True) -> float:
    tokens = min(max_new_tokens, TYPICAL_TOKENS[role] - (0 if reasoning else REASONING_TOKENS[role]))
    prefill = PROMPT_TOKENS + DISTINCT_TOKENS * (rows - 1)
    return prefill / speed.prefill + tokens * (1.0 + BATCH_ROW_COST * (rows - 1)) / speed.decode


def _trajectory_seconds(
    speed: Speed, turns: int, max_new_tokens: int, rows: int, rehearsed: bool, reasoning: bool = True
) -> float:
    """``rows`` trajectories decoded together, each calling a tool at every one of its
    ``turns`` turns, each call rehearsed if ``rehearsed``."""
    per_turn = _generation_seconds(speed, "actor", max_new_tokens, rows, reasoning)
    if rehearsed:
        per_turn += _generation_seconds(speed, "rehearser", max_new_tokens, rows, reasoning)
    return turns * per_turn


def estimate_seconds(
    speed: Speed, mode: str, n: int, max_steps: int, max_new_tokens: int, reasoning: bool = True
) -> float:
    """Seconds an episode takes when every trajectory calls a tool at each of its
    ``max_steps`` turns, with turns of typical length: the longest a run goes unless a
    turn runs on to ``max_new_tokens``. (The small model seldom answers before its last
    step, so for it this is also the usual time.)"""
    if max_steps < 1 or max_new_tokens < 1 or n < 1:
        raise ConfigError("estimate: n, max_steps and max_new_tokens must be positive")
    total = 0.0
    if mode in ("parallel", "imagine"):  # N trajectories advance together, batched
        total += _trajectory_seconds(speed, max_steps, max_new_tokens, n, rehearsed=True, reasoning=reasoning)
    elif mode == "sequential":  # one attempt after the other
        total += n * _trajectory_seconds(speed, max_steps, max_new_tokens, 1, rehearsed=True, reasoning=reasoning)
    elif mode != "none":
        raise ConfigError(f"estimate: unknown mode {mode!r}")
    if mode != "imagine":  # the committed run: each real call rehearsed first, unless mode none
        # After rehearsals it takes the lead imagined run's first step (action and prediction:
        # the same prompt and seed, while no rehearsal foresaw a failure) and does the rest.
        steps = max_steps - 1 if mode in ("parallel", "sequential") else max_steps
        total += _trajectory_seconds(speed, steps, max_new_tokens, 1, rehearsed=mode != "none", reasoning=reasoning)
    return total


def fit(speed: Speed, target_seconds: float = TARGET_SECONDS, mode: str = "parallel", n: int = 2) -> Budget:
    """The largest defaults whose run fits ``target_seconds``.

    - max_new_tokens: the longest of the ladder one generation can decode in a sixth
      of the target (a turn that runs on is cut there);
    - think_chars: 0 (no reasoning) where one step more than ``MIN_STEPS`` with ``n`` and
      reasoning would not fit, else None (the engine's bound);
    - n: ``n``, or fewer where even ``MIN_STEPS`` steps with it would not fit;
    - max_steps: the most steps (``MIN_STEPS`` to ``MAX_STEPS``) whose estimate fits;
    - episode_seconds: ``LIMIT_FACTOR`` times the target, or ``OVER_ESTIMATE`` times the
      estimate where that is longer (a machine too slow for the target).
    """
    if target_seconds <= 0:
        raise ConfigError(f"target_seconds must be positive, got {target_seconds}")
    per_generation = target_seconds / 6
    tokens = next(
        (t for t in TOKEN_LADDER if PROMPT_TOKENS / speed.prefill + t / speed.decode <= per_generation),
        TOKEN_LADDER[-1],
    )
    # Reasoning is the first thing to go: kept only where the target leaves room beyond the
    # smallest budget (a run at its floor has no slack for the turns that run long).
    reasoning = estimate_seconds(speed, mode, n, MIN_STEPS + 1, tokens) <= target_seconds
    while n > 1 and estimate_seconds(speed, mode, n, MIN_STEPS, tokens, reasoning) > target_seconds:
        n -= 1
    steps = MIN_STEPS
    while steps < MAX_STEPS and estimate_seconds(speed, mode, n, steps + 1, tokens, reasoning) <= target_seconds:
        steps += 1
    estimate = estimate_seconds(speed, mode, n, steps, tokens, reasoning)
    return Budget(
        n=n,
        max_steps=steps,
        max_new_tokens=tokens,
        episode_seconds=max(target_seconds * LIMIT_FACTOR, estimate * OVER_ESTIMATE),
        estimate_seconds=estimate,
        think_chars=None if reasoning else 0,
    )


def refit(budget: Budget, speed: Speed, target_seconds: float = TARGET_SECONDS, mode: str = "parallel") -> Budget:
    """``budget`` for a speed seen since it was fitted (``observed``): its estimate and its
    limit follow the speed; N, steps, new tokens and reasoning stay as they were (the
    defaults a page shows do not change under its visitor between runs)."""
    if target_seconds <= 0:
        return budget
    estimate = estimate_seconds(
        speed, mode, budget.n, budget.max_steps, budget.max_new_tokens, reasoning=budget.think_chars is None
    )
    limit = max(target_seconds * LIMIT_FACTOR, estimate * OVER_ESTIMATE)
    return replace(budget, estimate_seconds=estimate, episode_seconds=limit)


def observed(
    speed: Speed, generations: list[tuple[int, int, float]], weight: float = 0.5, bounds: Plausible | None = None
) -> Speed:
    """``speed`` moved toward what a run just saw: ``generations`` are (prompt tokens,
    new tokens, seconds) of single-row generations. A machine that got busier since the
    model was timed makes the next estimate longer. Unchanged without usable figures;
    kept within ``bounds`` where given."""
    predicted = sum(p / speed.prefill + n / speed.decode for p, n, s in generations if s > 0)
    actual = sum(s for _, _, s in generations if s > 0)
    if predicted <= 0 or actual <= 0:
        return speed
    ratio = (1 - weight) + weight * predicted / actual
    moved = Speed(decode=speed.decode * ratio, prefill=speed.prefill * ratio)
    return bounds.bound(moved) if bounds is not None else moved


_FITTED = ("max_steps", "max_new_tokens", "episode_seconds", "think_chars")


def apply(settings, budget: Budget | None):
    """``settings`` with the budget's steps, new tokens and limit in place of those left
    at their defaults (a value set on purpose is kept); unchanged without a budget or
    with fitting off (``target_seconds`` 0)."""
    from dataclasses import fields

    if budget is None or not settings.target_seconds:
        return settings
    defaults = {f.name: f.default for f in fields(settings)}
    changes = {name: getattr(budget, name) for name in _FITTED if getattr(settings, name) == defaults[name]}
    return settings.replace(**changes) if changes else settings


def describe(budget: Budget, speed: Speed) -> str:
    """One line for a banner or a log."""
    reasoning = "" if budget.think_chars is None else f", reasoning ≤{budget.think_chars} characters"
    return (
        f"{speed.decode:.0f} tokens/s: N={budget.n}, {budget.max_steps} steps, "
        f"{budget.max_new_tokens} new tokens{reasoning}; about {budget.estimate_seconds:.0f} s a run, "
        f"limit {budget.episode_seconds:.0f} s"
    )
