"""The cost model: a model's memory on a card, the speed of a decoding step and of a
prefill, and the seconds of one run of the engine."""

from __future__ import annotations

from dataclasses import dataclass

from envace_demo.plan.hardware import GIB, Hardware
from envace_demo.plan.records import Memory

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


def dtype_bytes(dtype: str) -> int:
    return 4 if dtype == "float32" else 2


def weight_bytes(shape, quantization: str | None, dtype: str) -> float:
    """Resident weights: quantized linear layers, embeddings (and an untied output
    projection) and norms in ``dtype`` (bitsandbytes leaves them unquantized)."""
    width = dtype_bytes(dtype)
    linear = shape.linear_params * (QUANT_BYTES[quantization] if quantization else width)
    return linear + (shape.params - shape.linear_params) * width


def read_bytes_per_step(shape, quantization: str | None, dtype: str) -> float:
    """Weights one decoding step reads: everything but the input embedding (one row of it)."""
    width = dtype_bytes(dtype)
    linear = shape.linear_params * (QUANT_BYTES[quantization] if quantization else width)
    return linear + shape.embedding_params * width  # the output projection


def context_tokens(max_steps: int, max_new_tokens: int) -> int:
    """A row's longest context: the prompt, then each step's turn and tool response."""
    return PROMPT_TOKENS + max_steps * (max_new_tokens + RESULT_TOKENS)


def memory(hw: Hardware, shape, quantization: str | None, dtype: str, rows: int, context: int) -> Memory:
    weights = weight_bytes(shape, quantization, dtype)
    kv = rows * context * shape.kv_bytes_per_token(2 if hw.cuda else dtype_bytes(dtype))
    width = dtype_bytes(dtype)
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
    measured: float | None = None, compiled: bool = False,
) -> float:
    """One decoding step of ``rows`` rows at ``context`` tokens each; ``measured``: one row's
    decoding speed measured on this machine (default: ``MEASURED_DECODE``'s, if any);
    ``compiled``: a compiled step replayed as one graph (no per-layer launch cost)."""
    kv = rows * context * shape.kv_bytes_per_token(2 if hw.cuda else dtype_bytes(dtype))
    measured = measured or MEASURED_DECODE.get((hw.gpu or hw.flavor, model, quantization))
    if measured:
        return 1.0 / measured + kv / (hw.bandwidth_gbs * 1e9 * BANDWIDTH_EFFICIENCY)
    weights = read_bytes_per_step(shape, None, dtype)  # the 16-bit speed, then QUANT_SPEED
    bandwidth = hw.bandwidth_gbs * 1e9 * BANDWIDTH_EFFICIENCY
    overhead = shape.layers * LAYER_OVERHEAD_S if hw.cuda and not compiled else 0.0
    return ((weights + kv) / bandwidth + overhead) / QUANT_SPEED[quantization]


def prefill_seconds(hw: Hardware, shape, quantization: str | None, tokens: int) -> float:
    flops = 2 * shape.params * tokens
    overhead = shape.layers * LAYER_OVERHEAD_S if hw.cuda else 0.0
    return flops / (hw.tflops * 1e12 * PREFILL_EFFICIENCY) / QUANT_SPEED[quantization] + overhead


@dataclass(frozen=True)
class Run:
    mode: str
    n: int
    steps: int
    think: int

    @property
    def max_new_tokens(self) -> int:
        return self.think + ANSWER_ALLOWANCE


def episode_estimate(
    hw: Hardware, shape, model: str, quantization: str | None, dtype: str, run: Run, measured: float | None = None,
    compiled: bool = False,
) -> float:
    """Seconds of a run in which every trajectory calls a tool at each of its steps, each
    turn thinking ``think`` tokens then answering (a rehearsed call: actor then rehearser);
    ``compiled``: see ``step_seconds``."""
    context = context_tokens(run.steps, run.max_new_tokens)
    average = (PROMPT_TOKENS + context) // 2

    def generation(role: str, rows: int) -> float:
        tokens = min(run.max_new_tokens, run.think + ANSWER_TOKENS[role])
        decode = tokens * step_seconds(hw, shape, model, quantization, dtype, rows, average, measured, compiled)
        return prefill_seconds(hw, shape, quantization, PROMPT_TOKENS * rows) + decode

    def trajectory(rows: int, rehearsed: bool) -> float:
        turn = generation("actor", rows) + (generation("rehearser", rows) if rehearsed else 0.0)
        return run.steps * turn

    if run.mode == "parallel":
        # The imagined runs act and rehearse each step until their first write, and end
        # there. The committed run takes the lead run's actions whose prompts came true and
        # its predictions asked in the same prompt (engine/acting.py, while no rehearsal
        # foresaw a failure); the steps after an earlier write it acts and rehearses itself,
        # on one row. So N rows' trajectory bounds it: a run without rehearsal plus a
        # rehearsal a step (on 2 CPU cores, N = 2: 2.3-2.55 times a run without, where a
        # rehearsal is 1.3-1.5 actor turns; bench/RESULTS.md).
        return trajectory(run.n, True)
    return trajectory(1, False)
