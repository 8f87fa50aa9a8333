"""The run budget: estimates from a speed, defaults fitted to it, applied to settings."""

from __future__ import annotations

import pytest

from envace_demo import budget
from envace_demo.budget import Speed
from envace_demo.errors import ConfigError
from envace_demo.models.base import Backend, Generation, ModelInfo
from envace_demo.models.speed import measure_speed
from envace_demo.settings import Settings

SLOW_CPU = Speed(decode=25.0, prefill=1000.0)  # the embedded model on two idle cores
LAPTOP = Speed(decode=46.0, prefill=1500.0)
GPU = Speed(decode=60.0, prefill=20_000.0)  # the 8B model on one GPU


def test_an_estimate_is_generation_time_of_each_turn_and_rehearsal():
    speed = Speed(decode=10.0, prefill=1500.0)  # 1 s of prefill per generation
    # Mode none, one step: one actor turn (1 s prefill + 64 tokens at 10/s).
    assert budget.estimate_seconds(speed, "none", 1, 1, 512) == pytest.approx(1 + 6.4)
    # Parallel N=1, one step: a rehearsal turn (actor + rehearser); the committed run takes
    # that step's action and prediction (the same prompt and seed) instead of making its own.
    assert budget.estimate_seconds(speed, "parallel", 1, 1, 512) == pytest.approx(1 + 6.4 + 1 + 12.8)
    # Two steps: the committed run makes its second step itself.
    assert budget.estimate_seconds(speed, "parallel", 1, 2, 512) == pytest.approx(3 * (1 + 6.4 + 1 + 12.8))
    # A token budget below a turn's typical length bounds it.
    assert budget.estimate_seconds(speed, "none", 1, 1, 32) == pytest.approx(1 + 3.2)
    # Imagine is the rehearsal alone; sequential runs its N attempts one after the other.
    assert budget.estimate_seconds(speed, "imagine", 1, 2, 512) == pytest.approx(
        2 * budget.estimate_seconds(speed, "parallel", 1, 1, 512)
    )
    assert budget.estimate_seconds(speed, "sequential", 3, 2, 512) > budget.estimate_seconds(
        speed, "parallel", 3, 2, 512
    )


def test_an_estimate_grows_with_steps_and_n_and_shrinks_with_speed():
    base = budget.estimate_seconds(SLOW_CPU, "parallel", 2, 2, 160)
    assert budget.estimate_seconds(SLOW_CPU, "parallel", 2, 3, 160) > base
    assert budget.estimate_seconds(SLOW_CPU, "parallel", 4, 2, 160) > base
    assert budget.estimate_seconds(LAPTOP, "parallel", 2, 2, 160) < base


def test_fitted_defaults_fit_the_target_and_grow_with_the_speed():
    slow, laptop, gpu = (budget.fit(s) for s in (SLOW_CPU, LAPTOP, GPU))
    for fitted, speed in ((slow, SLOW_CPU), (laptop, LAPTOP), (gpu, GPU)):
        assert fitted.estimate_seconds <= budget.TARGET_SECONDS
        reasoning = fitted.think_chars is None
        assert fitted.estimate_seconds == pytest.approx(
            budget.estimate_seconds(speed, "parallel", fitted.n, fitted.max_steps, fitted.max_new_tokens, reasoning)
        )
        assert fitted.episode_seconds == budget.TARGET_SECONDS * budget.LIMIT_FACTOR
    assert (slow.max_steps, slow.max_new_tokens) < (laptop.max_steps, laptop.max_new_tokens)
    assert laptop.max_steps <= gpu.max_steps and laptop.max_new_tokens < gpu.max_new_tokens
    assert slow.n == gpu.n == 2 and gpu.max_steps > laptop.max_steps


def test_reasoning_goes_first_where_the_budget_is_at_its_floor():
    slow, gpu = budget.fit(SLOW_CPU), budget.fit(GPU)
    assert slow.think_chars == 0 and gpu.think_chars is None
    # Without reasoning a turn is shorter: the same defaults take less time.
    assert budget.estimate_seconds(SLOW_CPU, "parallel", 2, 2, 192, reasoning=False) < budget.estimate_seconds(
        SLOW_CPU, "parallel", 2, 2, 192
    )
    # A value set on purpose is kept; one left at its default takes the fitted value.
    assert budget.apply(Settings(), slow).think_chars == 0
    assert budget.apply(Settings(think_chars=120), slow).think_chars == 120


def test_a_machine_too_slow_for_two_rehearsals_gets_one_and_never_less_than_two_steps():
    crawl = Speed(decode=2.0, prefill=100.0)
    fitted = budget.fit(crawl)
    assert (fitted.n, fitted.max_steps, fitted.max_new_tokens) == (1, budget.MIN_STEPS, budget.TOKEN_LADDER[-1])
    assert fitted.estimate_seconds > budget.TARGET_SECONDS  # the estimate says so honestly
    # and the limit leaves the run room to end rather than cut it after all that time
    assert fitted.episode_seconds == pytest.approx(fitted.estimate_seconds * budget.OVER_ESTIMATE)


def test_a_longer_target_allows_more():
    assert budget.fit(SLOW_CPU, 300).max_steps > budget.fit(SLOW_CPU, 60).max_steps


def test_bad_inputs_are_config_errors():
    with pytest.raises(ConfigError, match="speed must be positive"):
        Speed(decode=0.0, prefill=10.0)
    with pytest.raises(ConfigError, match="unknown mode 'fast'"):
        budget.estimate_seconds(SLOW_CPU, "fast", 1, 1, 16)
    with pytest.raises(ConfigError, match="target_seconds must be positive"):
        budget.fit(SLOW_CPU, 0)
    with pytest.raises(ConfigError, match="target_seconds"):
        Settings(target_seconds=-1).checked()


def test_apply_replaces_defaults_keeps_chosen_values_and_can_be_off():
    fitted = budget.Budget(n=2, max_steps=5, max_new_tokens=512, episode_seconds=90.0, estimate_seconds=40.0)
    applied = budget.apply(Settings(), fitted)
    assert (applied.max_steps, applied.max_new_tokens, applied.episode_seconds) == (5, 512, 90.0)
    chosen = budget.apply(Settings(max_steps=7), fitted)
    assert (chosen.max_steps, chosen.max_new_tokens) == (7, 512)
    assert budget.apply(Settings(target_seconds=0), fitted) == Settings(target_seconds=0)
    assert budget.apply(Settings(), None) == Settings()


@pytest.mark.slow
def test_the_embedded_model_is_timed_and_its_budget_fits_a_two_core_machine(embedded_backend):
    speed = measure_speed(embedded_backend)
    assert speed.decode > 1 and speed.prefill > speed.decode  # prefill runs many tokens at once
    fitted = budget.fit(speed)
    assert budget.MIN_STEPS <= fitted.max_steps < budget.MAX_STEPS  # a 135M model on a CPU is no GPU


def test_a_busier_machine_than_measured_slows_the_next_estimate():
    speed = Speed(decode=20.0, prefill=1000.0)
    # Two turns predicted at 1 s prefill + 2 s decode each took 12 s: four times slower.
    slower = budget.observed(speed, [(1000, 40, 12.0), (1000, 40, 12.0)], weight=1.0)
    assert slower.decode == pytest.approx(5.0) and slower.prefill == pytest.approx(250.0)
    halfway = budget.observed(speed, [(1000, 40, 12.0)])  # default weight: half the way
    assert halfway.decode == pytest.approx(20.0 * (0.5 + 0.5 * 0.25))
    assert budget.estimate_seconds(halfway, "parallel", 2, 2, 160) > budget.estimate_seconds(speed, "parallel", 2, 2, 160)
    assert budget.observed(speed, []) == speed and budget.observed(speed, [(10, 0, 0.0)]) == speed


# ---- a speed fit that survives a busy machine ------------------------------------------------------

EMBEDDED_MB = 513.1  # the embedded model's fp32 footprint


class Clocked(Backend):
    """A model on a fake clock (``timer``): prefill at ``prefill`` tokens/s, decode at
    ``decode``; the calls in ``slow_calls`` and the tokens in ``slow_tokens`` (by index)
    take ``burst`` times longer, as when other work takes the cores for a moment."""

    supports_constraints = False

    def __init__(self, decode, prefill, memory_mb=EMBEDDED_MB, slow_calls=(), slow_tokens=(), burst=10.0,
                 stream=True):
        self.decode, self.prefill, self.memory_mb = decode, prefill, memory_mb
        self.slow_calls, self.slow_tokens, self.burst, self.stream = set(slow_calls), set(slow_tokens), burst, stream
        self.now, self.calls = 0.0, 0

    def timer(self) -> float:
        return self.now

    @property
    def info(self) -> ModelInfo:
        return ModelInfo(model_id="clocked", device="cpu", dtype="float32", memory_mb=self.memory_mb)

    def render(self, messages, tools=None, enable_thinking=True) -> str:
        return messages[-1]["content"]

    def generate(self, prompt, sampling, constraint=None, on_token=None, cancel=None):
        self.calls += 1
        prompt_tokens = 1500
        slow = self.burst if self.calls in self.slow_calls else 1.0
        self.now += prompt_tokens / self.prefill * slow
        text = ""
        for i in range(sampling.max_new_tokens):
            self.now += (self.burst if i in self.slow_tokens else 1.0) * slow / self.decode
            text += "x"
            if on_token is not None and self.stream:
                on_token(0, text)
        return Generation(text, sampling.max_new_tokens, prompt_tokens, 0.0)


def test_a_burst_of_other_work_during_the_timing_does_not_move_the_measured_speed():
    # The second prefill timing and three of the decoded tokens ran while something else
    # had the cores, ten times slower.
    quiet = Clocked(decode=25.0, prefill=1000.0)
    calm = measure_speed(quiet, timer=quiet.timer)
    assert calm.decode == pytest.approx(25.0) and calm.prefill == pytest.approx(1000.0, rel=0.05)
    backend = Clocked(decode=25.0, prefill=1000.0, slow_calls={3}, slow_tokens={3, 10, 20})
    burst = measure_speed(backend, timer=backend.timer)
    assert burst.decode == pytest.approx(calm.decode) and burst.prefill == pytest.approx(calm.prefill)
    # One timing of each kind, as before, would have believed the burst.
    single = Clocked(decode=25.0, prefill=1000.0, slow_calls={2}, stream=False)
    assert measure_speed(single, repeats=1, timer=single.timer).prefill < calm.prefill / 4


def test_a_backend_that_does_not_stream_is_timed_by_the_whole_call():
    backend = Clocked(decode=25.0, prefill=1000.0, stream=False)
    speed = measure_speed(backend, timer=backend.timer)
    assert speed.decode == pytest.approx(25.0, rel=0.05) and speed.prefill == pytest.approx(1000.0, rel=0.05)


def test_an_implausibly_slow_measurement_is_held_to_what_the_model_size_allows():
    # Timed while another job held the machine throughout: 1 token/s, as once seen.
    crawl = Clocked(decode=1.0, prefill=60.0)
    speed = measure_speed(crawl, timer=crawl.timer)
    bounds = budget.plausible_for(crawl)
    assert speed == Speed(decode=bounds.decode[0], prefill=bounds.prefill[0])
    held, believed = budget.fit(speed), budget.fit(Speed(decode=1.0, prefill=60.0))
    assert held.n == 1 and held.max_steps == budget.MIN_STEPS
    # A plausible budget: the limit a few minutes at most, where believing the crawl set
    # about a quarter of an hour.
    assert held.episode_seconds < 4 * budget.TARGET_SECONDS < 10 * 60 < believed.episode_seconds


def test_plausible_speeds_follow_the_model_size_and_hold_the_measured_ones():
    small = budget.plausible(EMBEDDED_MB * 2**20, 4.0)
    for measured in (Speed(decode=25.0, prefill=1000.0), Speed(decode=60.0, prefill=20_000.0)):
        assert small.bound(measured) == measured  # idle two cores, and one GPU
    large = budget.plausible(16e9, 2.0)  # an 8B model in bfloat16
    assert large.decode[1] < small.decode[1] and large.prefill[0] < small.prefill[0]
    assert budget.plausible_for(Clocked(1.0, 1.0, memory_mb=None)) is None  # a server reports no footprint
    with pytest.raises(ConfigError, match="model size"):
        budget.plausible(0)


def test_the_live_speed_moves_the_fit_but_stays_plausible():
    bounds = budget.plausible(EMBEDDED_MB * 2**20, 4.0)
    speed = Speed(decode=25.0, prefill=1000.0)
    # Runs then took a hundred times longer than predicted: the speed falls to the floor, no lower.
    slower = budget.observed(speed, [(1500, 40, 300.0)], weight=1.0, bounds=bounds)
    assert slower == Speed(decode=bounds.decode[0], prefill=bounds.prefill[0])
    assert budget.fit(slower).estimate_seconds > budget.fit(speed).estimate_seconds


def test_a_median_rate_needs_enough_tokens():
    assert budget.median_rate([0.0, 0.1, 0.2, 5.0, 5.1, 5.2]) == pytest.approx(10.0)
    assert budget.median_rate([0.0, 0.1, 0.2]) is None
    assert budget.median_rate([1.0] * 6) is None


def test_a_refit_follows_the_speed_and_keeps_the_defaults_shown():
    fitted = budget.fit(SLOW_CPU)
    slower = budget.refit(fitted, Speed(decode=5.0, prefill=200.0))
    assert (slower.n, slower.max_steps, slower.max_new_tokens, slower.think_chars) == (
        fitted.n, fitted.max_steps, fitted.max_new_tokens, fitted.think_chars)
    assert slower.estimate_seconds > fitted.estimate_seconds and slower.episode_seconds > fitted.episode_seconds
    assert budget.refit(fitted, SLOW_CPU) == fitted
    assert budget.refit(fitted, Speed(decode=5.0, prefill=200.0), target_seconds=0) == fitted
