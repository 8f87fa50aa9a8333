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

Modules, one concern each: :mod:`.hardware` (the flavors), :mod:`.shapes` (the models'
sizes), :mod:`.cost` (memory, speed, a run's seconds), :mod:`.search` (the budget search),
:mod:`.zerogpu` (one GPU call), :mod:`.training` (training memory), :mod:`.serve` (the
vLLM command) and :mod:`.records` (the plan as data, and in a few lines).
"""

from __future__ import annotations

from envace_demo.plan.cost import (
    ANSWER_ALLOWANCE,
    ANSWER_TOKENS,
    BANDWIDTH_EFFICIENCY,
    CPU_PROCESS_GIB,
    CUDA_CONTEXT_GIB,
    HEADROOM,
    LAYER_OVERHEAD_S,
    MEASURED_DECODE,
    PREFILL_EFFICIENCY,
    PROMPT_TOKENS,
    QUANT_BYTES,
    QUANT_SPEED,
    RESULT_TOKENS,
    Run,
    context_tokens,
    dtype_bytes,
    episode_estimate,
    memory,
    prefill_seconds,
    read_bytes_per_step,
    step_seconds,
    weight_bytes,
)
from envace_demo.plan.hardware import (
    FLAVORS,
    FLAVOR_NAMES,
    GIB,
    GPU_LADDER,
    Hardware,
    dtype_for,
    hardware_of,
)
from envace_demo.plan.records import (
    MAX_EPISODE_SECONDS,
    Memory,
    Plan,
    Training,
    describe,
)
from envace_demo.plan.search import (
    CPU_TARGET_SECONDS,
    GPU_TARGET_SECONDS,
    LIMIT_FACTOR,
    MODE_PREFERENCE,
    N_LADDER,
    STEPS_LADDER,
    THINK_LADDER,
    plan,
)
from envace_demo.plan.serve import (
    VLLM_RESERVE_GIB,
    VLLM_UTILIZATION,
    serve_command,
)
from envace_demo.plan.shapes import (
    SHAPES,
    Shape,
    shape_of,
)
from envace_demo.plan.training import (
    ACTIVATION_BYTES_PER_HIDDEN,
    LORA_RANK,
    MICRO_BATCHES,
    training_plan,
)
from envace_demo.plan.zerogpu import (
    ZERO_CONCURRENCY,
    ZERO_MARGIN_SECONDS,
    ZERO_MAX_SCHEDULED,
    default_concurrency,
    scheduled_seconds,
)

__all__ = [
    "ACTIVATION_BYTES_PER_HIDDEN",
    "ANSWER_ALLOWANCE",
    "ANSWER_TOKENS",
    "BANDWIDTH_EFFICIENCY",
    "CPU_PROCESS_GIB",
    "CPU_TARGET_SECONDS",
    "CUDA_CONTEXT_GIB",
    "FLAVORS",
    "FLAVOR_NAMES",
    "GIB",
    "GPU_LADDER",
    "GPU_TARGET_SECONDS",
    "HEADROOM",
    "Hardware",
    "LAYER_OVERHEAD_S",
    "LIMIT_FACTOR",
    "LORA_RANK",
    "MAX_EPISODE_SECONDS",
    "MEASURED_DECODE",
    "MICRO_BATCHES",
    "MODE_PREFERENCE",
    "Memory",
    "N_LADDER",
    "PREFILL_EFFICIENCY",
    "PROMPT_TOKENS",
    "Plan",
    "QUANT_BYTES",
    "QUANT_SPEED",
    "RESULT_TOKENS",
    "Run",
    "SHAPES",
    "STEPS_LADDER",
    "Shape",
    "THINK_LADDER",
    "Training",
    "VLLM_RESERVE_GIB",
    "VLLM_UTILIZATION",
    "ZERO_CONCURRENCY",
    "ZERO_MARGIN_SECONDS",
    "ZERO_MAX_SCHEDULED",
    "default_concurrency",
    "context_tokens",
    "describe",
    "dtype_bytes",
    "dtype_for",
    "episode_estimate",
    "hardware_of",
    "memory",
    "plan",
    "prefill_seconds",
    "read_bytes_per_step",
    "scheduled_seconds",
    "serve_command",
    "shape_of",
    "step_seconds",
    "training_plan",
    "weight_bytes",
]
