"""The loaded model timed (decode and prefill speed), and the settings fitted to it.

The arithmetic of a budget is :mod:`envace_demo.budget`; this module runs the model.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

from envace_demo.budget import PROMPT_TOKENS, Speed, apply, fit, median_rate, plausible_for
from envace_demo.models.base import Sampling


def measure_speed(
    backend, new_tokens: int = 48, repeats: int = 3, timer: Callable[[], float] = time.perf_counter
) -> Speed:
    """Time ``backend`` after a prompt as long as an episode's: the prefill is the median of
    ``repeats`` timings (generations of one new token, and the wait for the first token of
    the decode timing), the decode the median gap between the ``new_tokens`` that then
    stream in (``median_rate``; without streaming, that call's time less the prefill).
    Decoding slows with the context (each token attends to the whole prompt), hence the
    long prompt. A short first call warms the backend up; kept prompt caches are dropped
    before each timing. The result is kept within what the model's size makes plausible
    (``plausible_for``). About five seconds for the embedded model on two idle cores."""
    filler = " ".join(f"item {i}: a line of a long document." for i in range(PROMPT_TOKENS // 12))
    ask = "\n\nNow count from one to one hundred in words, separated by commas."
    long_prompt = backend.prompt([{"role": "user", "content": filler + ask}], thinking=False)

    def timed(prompt, max_new_tokens: int, stamps: list[float] | None = None):
        forget = getattr(getattr(backend, "row_prefixes", None), "clear", None)
        if forget is not None:
            forget()
        on_token = (lambda row, text: stamps.append(timer())) if stamps is not None else None
        started = timer()
        sampling = Sampling(temperature=0.0, max_new_tokens=max_new_tokens, seed=0)
        gen = backend.generate(prompt, sampling, on_token=on_token)
        return gen, started, timer() - started

    timed(backend.prompt([{"role": "user", "content": ask}], thinking=False), 1)  # lazy imports, first allocations
    prefills = []
    for _ in range(max(repeats - 1, 1)):
        gen, _, seconds = timed(long_prompt, 1)
        prefills.append(max(gen.prompt_tokens, 1) / max(seconds, 1e-6))
    stamps: list[float] = []
    gen, started, seconds = timed(long_prompt, new_tokens, stamps)
    if stamps:  # the first token came after the prompt's prefill: one more prefill timing
        prefills.append(max(gen.prompt_tokens, 1) / max(stamps[0] - started, 1e-6))
    prefill = statistics.median(prefills)
    decode = median_rate(stamps)
    if decode is None:  # no streaming to time: the whole call, less the prompt's prefill
        decode = max(gen.new_tokens, 1) / max(seconds - gen.prompt_tokens / prefill, 1e-6)
    speed = Speed(decode=decode, prefill=prefill)
    bounds = plausible_for(backend)
    return bounds.bound(speed) if bounds is not None else speed


def fitted_settings(backend, settings):
    """(settings, budget, speed): ``settings`` with the defaults fitted to ``backend``'s
    measured speed (values set on purpose kept); unchanged, with no budget or speed,
    when fitting is off (``target_seconds`` 0)."""
    if not settings.target_seconds:
        return settings, None, None
    speed = measure_speed(backend)
    fitted = fit(speed, settings.target_seconds)
    return apply(settings, fitted), fitted, speed
