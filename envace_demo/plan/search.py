"""The budget search: the richest default run whose estimate fits the flavor's target."""

from __future__ import annotations

import math
from dataclasses import replace

from envace_demo import budget as budget_mod
from envace_demo.errors import ConfigError
from envace_demo.plan.cost import (
    PROMPT_TOKENS,
    Run,
    context_tokens,
    episode_estimate,
    memory,
    prefill_seconds,
    read_bytes_per_step,
    step_seconds,
)
from envace_demo.plan.hardware import FLAVORS, GPU_LADDER, Hardware, dtype_for, hardware_of
from envace_demo.plan.records import MAX_EPISODE_SECONDS, Memory, Plan
from envace_demo.plan.serve import serve_command
from envace_demo.plan.shapes import shape_of
from envace_demo.plan.training import training_plan
from envace_demo.plan.zerogpu import (
    ZERO_MARGIN_SECONDS,
    ZERO_MAX_SCHEDULED,
    ZERO_SIZES,
    call_hardware,
    check_size,
    default_concurrency,
    quota_seconds,
    scheduled_seconds,
)

THINK_LADDER = (1024, 512, 384, 256, 128)
STEPS_LADDER = (2, 3, 4)
N_LADDER = (1, 2, 3, 4, 6, 8, 12, 16)
# ZeroGPU drops rehearsal where even its smallest run cannot fit one call; a dedicated GPU
# or a CPU keeps it and lets the limit grow (to MAX_EPISODE_SECONDS).
MODE_PREFERENCE = ("parallel", "none")
# A dedicated GPU: the default run should end within this (a visitor waits for it), its
# limit is LIMIT_FACTOR times the estimate at least (a slow turn is let finish).
GPU_TARGET_SECONDS = 180.0
LIMIT_FACTOR = 1.25
# CPU flavors: budget.fit's target.
CPU_TARGET_SECONDS = budget_mod.TARGET_SECONDS
# What a visitor should see rehearse (the advice where rehearsal does not fit a ZeroGPU call).
SHOWN_THINK = 256


def plan(
    flavor: str, model: str, quantization: str | None = "auto", concurrency: int | None = None,
    measured_decode: float | None = None, gpu_size: str = "auto",
) -> Plan:
    """The plan for ``model`` on ``flavor``. ``quantization``: "auto" (16-bit where it
    fits, else 4-bit), None/"none", "4bit" or "8bit". ``measured_decode``: the loaded
    model's decoding speed (one row, tokens/s) measured here, in place of the speed model.
    ``gpu_size`` (ZeroGPU): "large", "xlarge", or "auto" (the whole card where only it holds
    a run with rehearsal, :func:`_zero_plan`)."""
    hw, shape = hardware_of(flavor), shape_of(model)
    if gpu_size != "auto":
        check_size(gpu_size)
    if quantization == "none":
        quantization = None
    if quantization not in ("auto", None, "4bit", "8bit"):
        raise ConfigError(f"quantization {quantization!r}: expected auto, none, 4bit or 8bit")
    if quantization and quantization != "auto" and not hw.cuda:
        raise ConfigError(f"quantization={quantization} needs a CUDA GPU (bitsandbytes); {flavor} has none")
    dtype = dtype_for(hw)
    if not shape.reasoning and shape.params < 1e9 and not hw.cuda:
        return _cpu_embedded_plan(hw, model, shape, dtype)
    options = [quantization] if quantization != "auto" else ([None, "4bit"] if hw.cuda else [None])
    best: Plan | None = None
    for quant in options:
        candidate = (
            _zero_plan(hw, model, shape, dtype, quant, concurrency, measured_decode, gpu_size)
            if hw.zero_gpu
            else _gpu_plan(hw, model, shape, dtype, quant, concurrency, measured_decode)
        )
        if candidate.usable or best is None or (candidate.fits and not best.fits):
            best = candidate
        if candidate.usable:
            break
    assert best is not None
    return best


def _preference(run: Run) -> tuple:
    # Rehearsal first; then N up to 4, reasoning up to 256 tokens (a thought the 8B was
    # trained to carry up to 8,000 tokens, cut at 128, rarely reaches its call), steps up
    # to 3, N beyond 4, more steps, longer reasoning.
    return (
        MODE_PREFERENCE[::-1].index(run.mode),
        min(run.n, 4),
        min(run.think, 256),
        min(run.steps, 3),
        run.n,
        run.steps,
        run.think,
    )


def _target(hw: Hardware) -> tuple[float, int | None]:
    """(the target of the default run, the GPU call's duration on ZeroGPU)."""
    if hw.zero_gpu:
        duration = math.floor(ZERO_MAX_SCHEDULED / hw.duration_factor)
        return float(duration - ZERO_MARGIN_SECONDS), duration
    return (GPU_TARGET_SECONDS if hw.cuda else CPU_TARGET_SECONDS), None


def _zero_plan(
    hw: Hardware, model: str, shape, dtype: str, quant: str | None, concurrency: int | None,
    measured: float | None, gpu_size: str,
) -> Plan:
    """ZeroGPU: a call on half a card ("large") where a run with rehearsal fits it, else on
    the whole card ("xlarge") where one fits that: twice the bandwidth and no duration
    factor, but checked twice against the visitor's quota. Else half a card, without
    rehearsal, and the advice says what rehearsal would need. ``gpu_size`` other than
    "auto": that size, as it is."""
    half = _gpu_plan(hw, model, shape, dtype, quant, concurrency, measured, ZERO_SIZES[0])
    if gpu_size == ZERO_SIZES[0] or (gpu_size == "auto" and (half.mode == "parallel" or not half.fits)):
        return half
    whole = _gpu_plan(hw, model, shape, dtype, quant, concurrency, measured, ZERO_SIZES[1])
    if gpu_size == "auto" and not (whole.usable and whole.mode == "parallel"):
        return half
    if half.mode == "parallel" or whole.mode != "parallel":
        return whole
    note = (
        f"on half a card (size large) a run with rehearsal does not fit a call ({half.advice}); so each run takes "
        f"the whole card (spaces.GPU size xlarge): it asks for {whole.gpu_duration_seconds} s, scheduled as "
        f"{whole.gpu_request_seconds} s, which spaces checks against the visitor's quota as {whole.gpu_quota_seconds} s "
        f"(an xlarge call counts twice); ENVACE_GPU_SIZE=large runs without rehearsal at "
        f"{half.gpu_quota_seconds} s of quota a run"
    )
    return replace(whole, notes=[note, *whole.notes])


def _gpu_plan(
    hw: Hardware, model: str, shape, dtype: str, quant: str | None, concurrency: int | None,
    measured: float | None = None, size: str = ZERO_SIZES[0],
) -> Plan:
    base, hw = hw, call_hardware(hw, size)  # ZeroGPU: what one call of that size gets
    target, duration = _target(hw)
    visitors = concurrency or default_concurrency(hw)
    rows_per_gpu = 1 if hw.zero_gpu else visitors  # each ZeroGPU call: its own slice

    def fitting(run: Run) -> tuple[bool, Memory]:
        mem = memory(hw, shape, quant, dtype, run.n * rows_per_gpu, context_tokens(run.steps, run.max_new_tokens))
        return mem.total_gib <= mem.available_gib, mem

    thinks = THINK_LADDER if shape.reasoning else (0,)
    modes = MODE_PREFERENCE if hw.zero_gpu else MODE_PREFERENCE[:1]
    runs = [
        Run(mode, n if mode == "parallel" else 1, steps, think)
        for mode in modes
        for n in (N_LADDER if mode == "parallel" else (1,))
        for steps in STEPS_LADDER
        for think in thinks
    ]
    timed = [(run, episode_estimate(hw, shape, model, quant, dtype, run, measured)) for run in runs]
    in_time = [(run, est) for run, est in timed if est <= target and fitting(run)[0]]
    smallest = Run("parallel", 1, STEPS_LADDER[0], thinks[-1])
    smallest_estimate = episode_estimate(hw, shape, model, quant, dtype, smallest, measured)
    notes: list[str] = []
    advice = None
    if in_time:
        run, estimate = max(in_time, key=lambda item: _preference(item[0]))
    elif hw.zero_gpu:  # not even a run without rehearsal: the smallest one, said not to fit
        run = Run("none", 1, STEPS_LADDER[0], thinks[-1])
        estimate = episode_estimate(hw, shape, model, quant, dtype, run, measured)
    else:  # the smallest rehearsal run, with a limit that holds it
        run, estimate = smallest, smallest_estimate
    fits, mem = fitting(run)
    episode = target if hw.zero_gpu else max(target, math.ceil(estimate * LIMIT_FACTOR / 10) * 10)
    if not fits:
        advice = _advice_memory(hw, model, quant, mem)
    elif estimate > episode or episode > MAX_EPISODE_SECONDS:
        speed = 1 / step_seconds(hw, shape, model, quant, dtype, 1, PROMPT_TOKENS, measured)
        advice = f"too slow here: a run takes about {estimate:.0f} s at {speed:.1f} tokens/s; pick {_faster(hw, model)}"
    elif run.mode != "parallel":
        advice = (
            f"rehearsal does not fit one GPU call here: its smallest run (N=1, {smallest.steps} steps, "
            f"{smallest.think} thinking tokens) takes about {smallest_estimate:.0f} s and a call may hold "
            f"{target:.0f} s, so the default run acts without rehearsal; for rehearsal pick {_faster(hw, model)}"
            + _compiled_note(hw, shape, model, quant, dtype, target, measured)
        )
    elif estimate > target:
        notes.append(f"a default run takes about {estimate:.0f} s here (more than the {target:.0f} s aimed at)")
    if quant == "4bit" and dtype == "float16":
        notes.append("4-bit nf4 weights, computed in float16 (a T4 has no bfloat16)")
    speed = 1.0 / step_seconds(hw, shape, model, quant, dtype, 1, PROMPT_TOKENS, measured)
    return Plan(
        hardware=hw.flavor,
        model=model,
        device="cuda" if hw.cuda else "cpu",
        dtype=dtype,
        quantization=quant,
        fits=fits,
        memory=mem,
        mode=run.mode,
        n=run.n,
        max_steps=run.steps,
        max_new_tokens=run.max_new_tokens if shape.reasoning else 256,
        think_tokens=run.think,
        episode_seconds=float(episode),
        estimated_episode_seconds=estimate,
        decode_tokens_per_s=speed,
        prefill_tokens_per_s=PROMPT_TOKENS / prefill_seconds(hw, shape, quant, PROMPT_TOKENS),
        concurrency=visitors,
        **_call_fields(base, duration, size),
        serve_command=serve_command(hw, model, shape, quant, dtype) if hw.cuda and not hw.zero_gpu else None,
        advice=advice,
        notes=notes,
        training=training_plan(hw, model, shape, dtype, quant, run.max_new_tokens),
    )


def _call_fields(hw: Hardware, duration: int | None, size: str) -> dict:
    """A ZeroGPU call's part of the plan (none elsewhere): its duration, what spaces
    schedules and checks against the visitor's quota, and its size."""
    if not duration:
        return {}
    return dict(
        gpu_duration_seconds=duration,
        gpu_request_seconds=scheduled_seconds(hw, duration, size),
        gpu_quota_seconds=quota_seconds(hw, duration, size),
        gpu_size=size,
    )


def _faster(hw: Hardware, model: str) -> str:
    """The cheapest GPU flavor where ``model`` runs with rehearsal, said as advice."""
    for flavor in GPU_LADDER:
        if flavor == hw.flavor:
            continue
        other = _gpu_plan(FLAVORS[flavor], model, shape_of(model), dtype_for(FLAVORS[flavor]), None, None)
        if not other.fits:
            other = _gpu_plan(FLAVORS[flavor], model, shape_of(model), dtype_for(FLAVORS[flavor]), "4bit", None)
        if other.fits and other.mode == "parallel" and other.episode_seconds <= MAX_EPISODE_SECONDS:
            how = "16-bit" if other.quantization is None else other.quantization
            return f"{flavor} ({how}, about {other.estimated_episode_seconds:.0f} s a run with rehearsal)"
    return "a larger GPU, or a server of your own (backend openai)"


def _advice_memory(hw: Hardware, model: str, quant: str | None, mem: Memory) -> str:
    where = f"{mem.total_gib:.1f} GiB needed, {mem.available_gib:.1f} GiB usable on {hw.flavor}"
    if hw.cuda and quant is None:
        here = _gpu_plan(hw, model, shape_of(model), dtype_for(hw), "4bit", None)
        if here.fits:
            return f"{model} does not fit in 16-bit ({where}): use 4-bit here (--quantization 4bit), or pick l4x1"
    for flavor in GPU_LADDER:
        other = plan(flavor, model) if flavor != hw.flavor else None
        if other is not None and other.fits:
            how = "in 16-bit" if other.quantization is None else f"in {other.quantization}"
            return f"{model} does not fit ({where}): pick {flavor} ({how})"
    return f"{model} does not fit ({where}): pick a smaller model"


def _cpu_embedded_plan(hw: Hardware, model: str, shape, dtype: str) -> Plan:
    """The small model on a CPU flavor: the budget fitted to the decoding speed measured on
    the 2-core CI machine (the app refits it to its own measurement once loaded)."""
    decode = hw.bandwidth_gbs * 1e9 / read_bytes_per_step(shape, None, dtype)
    speed = budget_mod.Speed(decode=decode, prefill=decode * 26)  # measured: 1,019 tokens in 1.33 s
    fitted = budget_mod.fit(speed, CPU_TARGET_SECONDS)
    mem = memory(hw, shape, None, dtype, fitted.n, context_tokens(fitted.max_steps, fitted.max_new_tokens))
    return Plan(
        hardware=hw.flavor,
        model=model,
        device="cpu",
        dtype=dtype,
        quantization=None,
        fits=mem.total_gib <= mem.available_gib,
        memory=mem,
        mode="parallel",
        n=fitted.n,
        max_steps=fitted.max_steps,
        max_new_tokens=fitted.max_new_tokens,
        think_tokens=0,
        episode_seconds=float(fitted.episode_seconds),
        estimated_episode_seconds=fitted.estimate_seconds,
        decode_tokens_per_s=decode,
        prefill_tokens_per_s=speed.prefill,
        concurrency=1,
        notes=["constrained decoding: reasoning is bounded in characters by the grammar, not in tokens"],
    )



def _compiled_note(hw, shape, model, quant, dtype, target: float, measured) -> str:
    """What rehearsal would need here: the smallest run of parallel rehearsal with ``SHOWN_THINK``
    thinking tokens, eager and with a compiled decode (the backend's ``compile_decode``;
    on ZeroGPU it needs spaces' ahead-of-time compilation, not done yet), against the call."""
    if not hw.cuda or not shape.reasoning or measured:
        return ""
    run = Run("parallel", 1, STEPS_LADDER[0], SHOWN_THINK)
    eager = episode_estimate(hw, shape, model, quant, dtype, run, measured)
    compiled = episode_estimate(hw, shape, model, quant, dtype, run, measured, compiled=True)
    verdict = "fits" if compiled <= target else f"misses by {compiled - target:.0f} s"
    return (f"; a run of parallel rehearsal (N=1, {run.steps} steps) with {SHOWN_THINK} thinking tokens "
            f"takes about {eager:.0f} s "
            f"eager and {compiled:.0f} s with a compiled decode (one graph a step, no per-layer launches), "
            f"which {verdict} against the {target:.0f} s a call may hold")
