"""The plan for a model on a Hugging Face Spaces hardware flavor: dtype, quantization,
memory, the default run's budget and how long it takes, and on ZeroGPU what one GPU
call schedules. Pure arithmetic (no torch): ``python -m envace_demo plan`` prints it,
the app follows it (``models/hardware.py``, ``ui/holder.py``) and the Model tab shows it.

Memory: weights + KV cache (every row of a run at its longest context) + workspace
(CUDA context and allocator slack, the prefill's activations, the last logits), against
the card's memory less a ``HEADROOM`` fraction.

Speed (batch decoding is memory-bound): one decoding step of ``rows`` rows reads the
weights once and each row's KV cache, at ``BANDWIDTH_EFFICIENCY`` of the card's memory
bandwidth, plus a fixed cost per layer for launching its kernels from Python
(``LAYER_OVERHEAD_S``); bitsandbytes layers run at ``QUANT_SPEED`` of that. A prefill is
compute-bound: 2 FLOPs per parameter per token at ``PREFILL_EFFICIENCY`` of the card's
dense 16-bit throughput. Where a speed was measured (``bench/gpu_plan.py``), it replaces
the modelled decoding speed (``MEASURED_DECODE``).

Budget: the richest default run whose estimate fits the flavor's target (rehearsal first,
then N up to 4, steps up to 3, reasoning up to 256 tokens, N beyond 4); on ZeroGPU the target follows from
the most one GPU call may schedule (``ZERO_MAX_SCHEDULED`` after spaces' duration factor).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from envace_demo.errors import ConfigError

GIB = 1024**3


@dataclass(frozen=True)
class Hardware:
    """A Spaces hardware flavor (https://huggingface.co/docs/hub/spaces-gpus), one GPU's figures."""

    flavor: str
    gpu: str | None  # None: CPU only
    gpus: int
    memory_gib: float  # one GPU's memory (nvidia-smi's total), or the machine's RAM on CPU
    bandwidth_gbs: float  # memory bandwidth, GB/s (vendor datasheet)
    tflops: float  # dense fp16/bf16 tensor throughput, TFLOPS (vendor datasheet)
    bf16: bool  # compute capability >= 8.0
    cpu_cores: int
    zero_gpu: bool = False
    duration_factor: float = 1.0  # spaces multiplies a ZeroGPU request by this

    @property
    def cuda(self) -> bool:
        return self.gpu is not None


# Sources: NVIDIA datasheets (T4: 320 GB/s, 65 TFLOPS fp16; L4: 300 GB/s, 121 TFLOPS bf16
# dense; A10G, AWS G5's A10 variant: 600 GB/s, ~70 TFLOPS bf16 dense; A100 80GB PCIe:
# 1,935 GB/s, 312 TFLOPS bf16; RTX PRO 6000 Blackwell Server Edition: 1,597 GB/s, ~500 TFLOPS
# bf16 dense). Memory as nvidia-smi reports it (T4 15,360 MiB; L4 23,034 MiB; A10G 23,028
# MiB; A100 81,920 MiB). ZeroGPU today ("zero-a10g" is the flavor's historical name) is half
# an RTX PRO 6000 Blackwell (spaces' zero/configs.json: 101,973,950,464 bytes for the whole
# card, duration_factor 1.5 for a "large" slice); the slice is taken to have half the
# card's bandwidth and throughput too. CPU flavors: 2 vCPU / 16 GB and 8 vCPU / 32 GB RAM;
# their "bandwidth" is what decoding reached on 2 cores (bench: the embedded model's 135M
# fp32 weights, 0.54 GB, at 29.4 tokens/s: 16 GB/s), doubled for 8 cores (unmeasured).
FLAVORS: dict[str, Hardware] = {
    h.flavor: h
    for h in (
        Hardware("cpu-basic", None, 0, 16.0, 16.0, 0.2, False, 2),
        Hardware("cpu-upgrade", None, 0, 32.0, 32.0, 0.8, False, 8),
        Hardware("t4-small", "T4", 1, 15.0, 320.0, 65.0, False, 4),
        Hardware("t4-medium", "T4", 1, 15.0, 320.0, 65.0, False, 8),
        Hardware("l4x1", "L4", 1, 22.49, 300.0, 121.0, True, 8),
        Hardware("l4x4", "L4", 4, 22.49, 300.0, 121.0, True, 48),
        Hardware("a10g-small", "A10G", 1, 22.49, 600.0, 70.0, True, 4),
        Hardware("a10g-large", "A10G", 1, 22.49, 600.0, 70.0, True, 12),
        Hardware("a100-large", "A100", 1, 80.0, 1935.0, 312.0, True, 12),
        Hardware(
            "zero-a10g", "RTX PRO 6000 Blackwell (half)", 1, 101_973_950_464 / 2 / GIB, 1597.0 / 2, 250.0, True, 8,
            zero_gpu=True, duration_factor=1.5,
        ),
    )
}
FLAVOR_NAMES = tuple(FLAVORS)
# Advice where nothing fits: the flavors to try, cheapest first.
GPU_LADDER = ("t4-small", "l4x1", "a10g-large", "a100-large")

# ---- the speed model ---------------------------------------------------------------------
# Decoding engines reach 75-82% of the bandwidth roofline (vLLM/TensorRT-LLM on an 8B).
BANDWIDTH_EFFICIENCY = 0.8
# transformers' eager decoding launches each layer's kernels from Python: ~0.5 ms a layer
# a step on a server CPU (the ~30 tokens/s usually reported for a 7-8B model under
# `generate` on an A100, against a roofline of ~120). Checked by bench/gpu_plan.py.
LAYER_OVERHEAD_S = 0.0005
# bitsandbytes decodes slower than bf16 though it reads fewer bytes (dequantization on
# the fly): 4-bit nf4 36.5 vs 48.6 tokens/s on a 7B (published); LLM.int8 slower still.
# Applied to the 16-bit speed of the same card.
QUANT_SPEED = {None: 1.0, "4bit": 0.75, "8bit": 0.5}
PREFILL_EFFICIENCY = 0.4
# Bytes a parameter of a quantized linear layer takes: nf4 with an fp32 absmax per block of
# 64 (the loader's config, no double quantization); int8 with an fp32 scale per row.
QUANT_BYTES = {"4bit": 0.5 + 4 / 64, "8bit": 1.0}
# Measured decode tokens/s, one row, short context: (gpu, model, quantization) -> tok/s.
# Filled from bench/gpu_plan.py's output on the hardware itself; it replaces the model.
MEASURED_DECODE: dict[tuple[str, str, str | None], float] = {}

# ---- memory ------------------------------------------------------------------------------
HEADROOM = 0.05  # of the card kept free: fragmentation, the allocator's rounding
CUDA_CONTEXT_GIB = 0.75  # CUDA context, cuBLAS workspace, allocator slack
CPU_PROCESS_GIB = 1.5  # the app, gradio and torch themselves, on a CPU flavor

# ---- the episode -------------------------------------------------------------------------
PROMPT_TOKENS = 1500  # tool schemas + instructions (budget.py: 1,000-1,900 on the examples)
RESULT_TOKENS = 200  # a tool's response added to the context per step
# A reasoning model's turn: thinking (up to think_tokens, where the engine closes the
# thought), then the call (actor) or the predicted response (rehearser).
ANSWER_TOKENS = {"actor": 64, "rehearser": 128}
# Room after the thought: a rehearsed response of 100-190 tokens must not be cut.
ANSWER_ALLOWANCE = 192
THINK_LADDER = (1024, 512, 384, 256, 128)
STEPS_LADDER = (2, 3, 4)
N_LADDER = (1, 2, 3, 4, 6, 8, 12, 16)
# ZeroGPU drops rehearsal where even its smallest run cannot fit one call; a dedicated GPU
# or a CPU keeps it and lets the limit grow (to MAX_EPISODE_SECONDS).
MODE_PREFERENCE = ("parallel", "none")
MAX_EPISODE_SECONDS = 600.0
# A dedicated GPU: the default run should end within this (a visitor waits for it), its
# limit is LIMIT_FACTOR times the estimate at least (a slow turn is let finish).
GPU_TARGET_SECONDS = 180.0
LIMIT_FACTOR = 1.25
# ZeroGPU: the most one GPU call may schedule after spaces' duration factor (an anonymous
# visitor has about 2 minutes a day), and the part of a call that is not the episode
# (moving the weights in, starting generation, the last events out).
ZERO_MAX_SCHEDULED = 60
ZERO_MARGIN_SECONDS = 8
# CPU flavors: budget.fit's target.
CPU_TARGET_SECONDS = 60.0
# vLLM: --gpu-memory-utilization's default, and what it keeps for activations/CUDA graphs.
VLLM_UTILIZATION = 0.9
VLLM_RESERVE_GIB = 1.5


# ---- training (role-wise GRPO with LoRA, envace_demo/train) -------------------------------
# Activations kept for the backward pass, bytes per token per layer in 16-bit: 34 x hidden
# (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
# Models", without the attention-score term: SDPA does not store the scores).
ACTIVATION_BYTES_PER_HIDDEN = 34
LORA_RANK = 8  # TrainConfig's default, on q/k/v/o of every layer
MICRO_BATCHES = (8, 4, 2, 1)


@dataclass(frozen=True)
class Training:
    """Training on this flavor: LoRA on the served weights (16-bit) or QLoRA (4-bit)."""

    available: bool
    reason: str | None  # why not, where not available or not fitting
    quantization: str | None
    micro_batch: int
    sequence_tokens: int
    memory: dict  # GiB: weights, lora_and_optimizer, activations, logits, total, available
    fits: bool
    # The KL term's reference: the LoRA adapter switched off (train/shared.py), no copy.
    reference: str = "the LoRA adapter switched off: no second copy of the weights"


@dataclass(frozen=True)
class Memory:
    weights_gib: float
    kv_cache_gib: float
    workspace_gib: float
    total_gib: float
    available_gib: float  # the card's memory less HEADROOM

    def to_dict(self) -> dict:
        return {k: round(v, 2) for k, v in asdict(self).items()}


@dataclass(frozen=True)
class Plan:
    hardware: str
    model: str
    device: str  # "cuda" or "cpu"
    dtype: str  # "bfloat16", "float16" or "float32" (the compute dtype under quantization)
    quantization: str | None
    fits: bool  # weights + KV cache + workspace within the card's memory
    memory: Memory
    mode: str  # the default run's mode
    n: int
    max_steps: int
    max_new_tokens: int
    think_tokens: int  # tokens the model may think before the engine closes its thought
    episode_seconds: float  # the default run's limit
    estimated_episode_seconds: float
    decode_tokens_per_s: float  # one row
    prefill_tokens_per_s: float
    concurrency: int  # visitors' runs at once
    gpu_duration_seconds: int | None = None  # ZeroGPU: what the app asks spaces.GPU for
    gpu_request_seconds: int | None = None  # ZeroGPU: what spaces schedules (after its factor)
    serve_command: str | None = None  # vLLM on this card, or None where it cannot serve
    advice: str | None = None  # where it does not fit, or rehearsal does not: what to pick
    notes: list[str] = field(default_factory=list)
    training: Training | None = None

    @property
    def usable(self) -> bool:
        """It fits, its default run fits its limit, and that limit is one a visitor can wait for."""
        return (
            self.fits
            and self.estimated_episode_seconds <= self.episode_seconds <= MAX_EPISODE_SECONDS
            and (self.gpu_request_seconds or 0) <= ZERO_MAX_SCHEDULED
        )

    def to_dict(self) -> dict:
        out = asdict(self)
        out["memory"] = self.memory.to_dict()
        out["usable"] = self.usable
        for key in ("episode_seconds", "estimated_episode_seconds", "decode_tokens_per_s", "prefill_tokens_per_s"):
            out[key] = round(out[key], 1)
        return out


def shape_of(model: str):
    from envace_demo.models.pretrained import SHAPES

    if model not in SHAPES:
        raise ConfigError(f"model {model!r}: the plan knows {', '.join(SHAPES)}")
    return SHAPES[model]


def hardware_of(flavor: str) -> Hardware:
    if flavor not in FLAVORS:
        raise ConfigError(f"hardware {flavor!r}: expected one of {', '.join(FLAVORS)}")
    return FLAVORS[flavor]


# ---- memory and speed ----------------------------------------------------------------------


def dtype_for(hw: Hardware) -> str:
    if not hw.cuda:
        return "float32"  # loader.CPU_AUTO_DTYPE: faster than bf16 on the CPUs measured
    return "bfloat16" if hw.bf16 else "float16"  # a T4 has no bf16


def _dtype_bytes(dtype: str) -> int:
    return 4 if dtype == "float32" else 2


def weight_bytes(shape, quantization: str | None, dtype: str) -> float:
    """Resident weights: quantized linear layers, embeddings (and an untied output
    projection) and norms in ``dtype`` (bitsandbytes leaves them unquantized)."""
    width = _dtype_bytes(dtype)
    linear = shape.linear_params * (QUANT_BYTES[quantization] if quantization else width)
    return linear + (shape.params - shape.linear_params) * width


def read_bytes_per_step(shape, quantization: str | None, dtype: str) -> float:
    """Weights one decoding step reads: everything but the input embedding (one row of it)."""
    width = _dtype_bytes(dtype)
    linear = shape.linear_params * (QUANT_BYTES[quantization] if quantization else width)
    return linear + shape.embedding_params * width  # the output projection


def context_tokens(max_steps: int, max_new_tokens: int) -> int:
    """A row's longest context: the prompt, then each step's turn and tool response."""
    return PROMPT_TOKENS + max_steps * (max_new_tokens + RESULT_TOKENS)


def memory(hw: Hardware, shape, quantization: str | None, dtype: str, rows: int, context: int) -> Memory:
    weights = weight_bytes(shape, quantization, dtype)
    kv = rows * context * shape.kv_bytes_per_token(2 if hw.cuda else _dtype_bytes(dtype))
    width = _dtype_bytes(dtype)
    # The prefill's largest transient (gate, up and their product over the prompt), the
    # last logits in fp32, and under bitsandbytes one layer dequantized at a time.
    activations = rows * PROMPT_TOKENS * shape.intermediate * width * 3 + rows * shape.vocab * 4 * 2
    dequant = shape.hidden * shape.intermediate * width if quantization else 0
    fixed = CUDA_CONTEXT_GIB if hw.cuda else CPU_PROCESS_GIB
    workspace = fixed * GIB + activations + dequant
    total = weights + kv + workspace
    return Memory(weights / GIB, kv / GIB, workspace / GIB, total / GIB, hw.memory_gib * (1 - HEADROOM))


def step_seconds(
    hw: Hardware, shape, model: str, quantization: str | None, dtype: str, rows: int, context: int,
    measured: float | None = None,
) -> float:
    """One decoding step of ``rows`` rows at ``context`` tokens each; ``measured``: one row's
    decoding speed measured on this machine (default: ``MEASURED_DECODE``'s, if any)."""
    kv = rows * context * shape.kv_bytes_per_token(2 if hw.cuda else _dtype_bytes(dtype))
    measured = measured or MEASURED_DECODE.get((hw.gpu or hw.flavor, model, quantization))
    if measured:
        return 1.0 / measured + kv / (hw.bandwidth_gbs * 1e9 * BANDWIDTH_EFFICIENCY)
    weights = read_bytes_per_step(shape, None, dtype)  # the 16-bit speed, then QUANT_SPEED
    bandwidth = hw.bandwidth_gbs * 1e9 * BANDWIDTH_EFFICIENCY
    overhead = shape.layers * LAYER_OVERHEAD_S if hw.cuda else 0.0
    return ((weights + kv) / bandwidth + overhead) / QUANT_SPEED[quantization]


def prefill_seconds(hw: Hardware, shape, quantization: str | None, tokens: int) -> float:
    flops = 2 * shape.params * tokens
    overhead = shape.layers * LAYER_OVERHEAD_S if hw.cuda else 0.0
    return flops / (hw.tflops * 1e12 * PREFILL_EFFICIENCY) / QUANT_SPEED[quantization] + overhead


# ---- the episode's time ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Run:
    mode: str
    n: int
    steps: int
    think: int

    @property
    def max_new_tokens(self) -> int:
        return self.think + ANSWER_ALLOWANCE

    def key(self) -> tuple:
        # Rehearsal first; then N up to 4, steps up to 3, reasoning up to 256 tokens, N
        # beyond 4, more steps, longer reasoning.
        return (
            MODE_PREFERENCE[::-1].index(self.mode),
            min(self.n, 4),
            min(self.steps, 3),
            min(self.think, 256),
            self.n,
            self.steps,
            self.think,
        )


def episode_estimate(
    hw: Hardware, shape, model: str, quantization: str | None, dtype: str, run: _Run, measured: float | None = None
) -> float:
    """Seconds of a run in which every trajectory calls a tool at each of its steps, each
    turn thinking ``think`` tokens then answering (a rehearsed call: actor then rehearser)."""
    context = context_tokens(run.steps, run.max_new_tokens)
    average = (PROMPT_TOKENS + context) // 2

    def generation(role: str, rows: int) -> float:
        tokens = min(run.max_new_tokens, run.think + ANSWER_TOKENS[role])
        decode = tokens * step_seconds(hw, shape, model, quantization, dtype, rows, average, measured)
        return prefill_seconds(hw, shape, quantization, PROMPT_TOKENS * rows) + decode

    def trajectory(rows: int, rehearsed: bool) -> float:
        turn = generation("actor", rows) + (generation("rehearser", rows) if rehearsed else 0.0)
        return run.steps * turn

    if run.mode == "parallel":
        return trajectory(run.n, True) + trajectory(1, True)
    return trajectory(1, False)


# ---- the plan ----------------------------------------------------------------------------------


def plan(
    flavor: str, model: str, quantization: str | None = "auto", concurrency: int | None = None,
    measured_decode: float | None = None,
) -> Plan:
    """The plan for ``model`` on ``flavor``. ``quantization``: "auto" (16-bit where it
    fits, else 4-bit), None/"none", "4bit" or "8bit". ``measured_decode``: the loaded
    model's decoding speed (one row, tokens/s) measured here, in place of the speed model."""
    hw, shape = hardware_of(flavor), shape_of(model)
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
        candidate = _gpu_plan(hw, model, shape, dtype, quant, concurrency, measured_decode)
        if candidate.usable or best is None or (candidate.fits and not best.fits):
            best = candidate
        if candidate.usable:
            break
    assert best is not None
    return best


# ZeroGPU runs each GPU call in its own worker on its own slice of a card: several
# visitors at once (the app's queue lets this many run; spaces queues the rest).
ZERO_CONCURRENCY = 3


def _concurrency(hw: Hardware) -> int:
    # On a dedicated GPU the app holds one model (on l4x4 split over the 4 cards by
    # device_map): two runs at once would share it and each take twice as long.
    return ZERO_CONCURRENCY if hw.zero_gpu else 1


def _target(hw: Hardware) -> tuple[float, int | None]:
    """(the target of the default run, the GPU call's duration on ZeroGPU)."""
    if hw.zero_gpu:
        duration = math.floor(ZERO_MAX_SCHEDULED / hw.duration_factor)
        return float(duration - ZERO_MARGIN_SECONDS), duration
    return (GPU_TARGET_SECONDS if hw.cuda else CPU_TARGET_SECONDS), None


def scheduled_seconds(hw: Hardware, duration: int) -> int:
    """What spaces schedules for a ``duration`` request (spaces.zero.client.get_duration_seconds:
    times the duration factor on a "large" slice, then rounded)."""
    return round(duration * hw.duration_factor)


def _gpu_plan(
    hw: Hardware, model: str, shape, dtype: str, quant: str | None, concurrency: int | None,
    measured: float | None = None,
) -> Plan:
    target, duration = _target(hw)
    visitors = concurrency or _concurrency(hw)
    rows_per_gpu = 1 if hw.zero_gpu else visitors  # each ZeroGPU call: its own slice

    def fitting(run: _Run) -> tuple[bool, Memory]:
        mem = memory(hw, shape, quant, dtype, run.n * rows_per_gpu, context_tokens(run.steps, run.max_new_tokens))
        return mem.total_gib <= mem.available_gib, mem

    thinks = THINK_LADDER if shape.reasoning else (0,)
    modes = MODE_PREFERENCE if hw.zero_gpu else MODE_PREFERENCE[:1]
    runs = [
        _Run(mode, n if mode == "parallel" else 1, steps, think)
        for mode in modes
        for n in (N_LADDER if mode == "parallel" else (1,))
        for steps in STEPS_LADDER
        for think in thinks
    ]
    timed = [(run, episode_estimate(hw, shape, model, quant, dtype, run, measured)) for run in runs]
    in_time = [(run, est) for run, est in timed if est <= target and fitting(run)[0]]
    smallest = _Run("parallel", 1, STEPS_LADDER[0], thinks[-1])
    smallest_estimate = episode_estimate(hw, shape, model, quant, dtype, smallest, measured)
    notes: list[str] = []
    advice = None
    if in_time:
        run, estimate = max(in_time, key=lambda item: item[0].key())
    elif hw.zero_gpu:  # not even a run without rehearsal: the smallest one, said not to fit
        run = _Run("none", 1, STEPS_LADDER[0], thinks[-1])
        estimate = episode_estimate(hw, shape, model, quant, dtype, run, measured)
    else:  # the smallest rehearsal run, with a limit that holds it
        run, estimate = smallest, smallest_estimate
    fits, mem = fitting(run)
    episode = target if hw.zero_gpu else max(target, math.ceil(estimate * LIMIT_FACTOR / 10) * 10)
    if not fits:
        advice = _advice_memory(hw, model, quant, mem)
    elif estimate > episode or episode > MAX_EPISODE_SECONDS:
        advice = (
            f"too slow here: a run takes about {estimate:.0f} s at "
            f"{1 / step_seconds(hw, shape, model, quant, dtype, 1, PROMPT_TOKENS, measured):.1f} "
            f"tokens/s; pick {_faster(hw, model)}"
        )
    elif run.mode != "parallel":
        advice = (
            f"rehearsal does not fit one GPU call here: its smallest run (N=1, {smallest.steps} steps, "
            f"{smallest.think} thinking tokens) takes about {smallest_estimate:.0f} s and a call may hold "
            f"{target:.0f} s, so the default run acts without rehearsal; for rehearsal pick {_faster(hw, model)}"
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
        gpu_duration_seconds=duration,
        gpu_request_seconds=scheduled_seconds(hw, duration) if duration else None,
        serve_command=serve_command(hw, model, shape, quant, dtype) if hw.cuda and not hw.zero_gpu else None,
        advice=advice,
        notes=notes,
        training=training_plan(hw, model, shape, dtype, quant, run.max_new_tokens),
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


def training_plan(
    hw: Hardware, model: str, shape, dtype: str, served_quant: str | None, max_new_tokens: int
) -> Training:
    """LoRA training of ``model`` on ``hw``: the largest micro-batch whose memory fits, in
    16-bit, else in 4-bit (QLoRA); the reference policy adds nothing (adapter off)."""
    sequence = PROMPT_TOKENS + max_new_tokens
    # q, k, v, o: r x (in + out) each.
    lora_params = shape.layers * LORA_RANK * (
        4 * shape.hidden + 2 * shape.heads * shape.head_dim + 2 * shape.kv_heads * shape.head_dim
    )
    lora_gib = lora_params * 4 * 4 / GIB  # fp32 weights, gradients, AdamW's two moments
    width = _dtype_bytes(dtype)
    per_row = ACTIVATION_BYTES_PER_HIDDEN * shape.hidden * shape.layers * sequence * width / 2 / GIB
    logits_per_row = max_new_tokens * shape.vocab * 4 * 2 / GIB  # fp32 logits and log-softmax
    fixed = (CUDA_CONTEXT_GIB if hw.cuda else CPU_PROCESS_GIB)
    available = hw.memory_gib * (1 - HEADROOM)
    best = None
    for quant in (None, "4bit") if hw.cuda else (None,):
        weights = weight_bytes(shape, quant, dtype) / GIB
        for micro in MICRO_BATCHES:
            total = weights + lora_gib + micro * (per_row + logits_per_row) + fixed
            memory = {
                "weights_gib": round(weights, 2),
                "lora_and_optimizer_gib": round(lora_gib, 2),
                "activations_gib": round(micro * per_row, 2),
                "logits_gib": round(micro * logits_per_row, 2),
                "total_gib": round(total, 2),
                "available_gib": round(available, 2),
            }
            best = (quant, micro, memory, total <= available)
            if total <= available:
                break
        if best[3]:
            break
    quant, micro, memory, fits = best
    reason = None
    if hw.zero_gpu:
        reason = (
            "training is off on ZeroGPU: one GRPO step (G rollouts per task, then a backward pass) "
            f"does not fit one GPU call of at most {ZERO_MAX_SCHEDULED} s within a visitor's quota; "
            "train on l4x1 (4-bit) or a100-large (bf16)"
        )
    elif not hw.cuda:
        reason = "no GPU: only the embedded model trains here (python -m envace_demo train --model embedded)"
    elif not fits:
        reason = (
            f"{model} does not fit for training even in 4-bit with one row: "
            "train on l4x1 (4-bit) or a100-large (bf16)"
        )
    elif quant != served_quant:
        reason = (
            f"trains in {quant or '16-bit'} while serving in {served_quant or '16-bit'}: load the model "
            f"with --quantization {quant or 'none'} to train (python -m envace_demo train), so the weights are shared"
        )
    return Training(
        available=hw.cuda and not hw.zero_gpu and fits,
        reason=reason,
        quantization=quant,
        micro_batch=micro,
        sequence_tokens=sequence,
        memory=memory,
        fits=fits,
    )


def serve_command(hw: Hardware, model: str, shape, quant: str | None, dtype: str) -> str | None:
    """``vllm serve`` for this card: the context its KV cache holds after the weights."""
    weights = weight_bytes(shape, quant, dtype) / GIB
    kv_gib = hw.memory_gib * VLLM_UTILIZATION - weights - VLLM_RESERVE_GIB
    tokens = int(kv_gib * GIB // shape.kv_bytes_per_token(2))
    length = min(shape.max_context, tokens // 1024 * 1024)
    if length < 4096:
        return None
    parts = [f"vllm serve {model}", "--enable-auto-tool-choice --tool-call-parser hermes"]
    parts.append(f"--max-model-len {length}")
    if dtype == "float16":
        parts.append("--dtype half")
    if quant:
        parts.append("--quantization bitsandbytes")
    return " ".join(parts)


def _cpu_embedded_plan(hw: Hardware, model: str, shape, dtype: str) -> Plan:
    """The small model on a CPU flavor: the budget fitted to the decoding speed measured on
    the 2-core CI machine (the app refits it to its own measurement once loaded)."""
    from envace_demo import budget as budget_mod

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


def describe(p: Plan) -> str:
    """The plan in a few lines, for the command line and the Model tab."""
    quant = p.quantization or "none"
    m = p.memory
    lines = [
        f"{p.model} on {p.hardware}: {p.dtype}, quantization {quant}, "
        + ("fits" if p.fits else "DOES NOT FIT")
        + f" ({m.weights_gib:.1f} GiB weights + {m.kv_cache_gib:.1f} KV cache + {m.workspace_gib:.1f} "
        f"workspace = {m.total_gib:.1f} of {m.available_gib:.1f} GiB)",
        f"default run: {p.mode}, N={p.n}, {p.max_steps} steps, {p.max_new_tokens} new tokens "
        f"({p.think_tokens} thinking); about {p.estimated_episode_seconds:.0f} s at "
        f"{p.decode_tokens_per_s:.1f} tokens/s, limit {p.episode_seconds:.0f} s; {p.concurrency} at once",
    ]
    if p.gpu_request_seconds is not None:
        lines.append(
            f"ZeroGPU: each run asks for {p.gpu_duration_seconds} s, scheduled as {p.gpu_request_seconds} s"
        )
    if p.serve_command:
        lines.append(f"serve: {p.serve_command}")
    if p.training is not None:
        t = p.training
        state = "yes" if t.available else "no"
        lines.append(
            f"training: {state}, {t.quantization or '16-bit'} LoRA, micro-batch {t.micro_batch} of "
            f"{t.sequence_tokens} tokens, {t.memory['total_gib']:.1f} of {t.memory['available_gib']:.1f} GiB; "
            f"reference: {t.reference}" + (f" ({t.reason})" if t.reason else "")
        )
    lines += [f"note: {n}" for n in p.notes]
    if p.advice:
        lines.append(f"advice: {p.advice}")
    return "\n".join(lines)
