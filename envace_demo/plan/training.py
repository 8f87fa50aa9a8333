"""Training memory: role-wise GRPO with LoRA (``envace_demo/train``) on a flavor."""

from __future__ import annotations

from envace_demo.plan.cost import CPU_PROCESS_GIB, CUDA_CONTEXT_GIB, HEADROOM, PROMPT_TOKENS, dtype_bytes, weight_bytes
from envace_demo.plan.hardware import GIB, Hardware
from envace_demo.plan.records import Training
from envace_demo.plan.zerogpu import ZERO_MAX_SCHEDULED

# Activations kept for the backward pass, bytes per token per layer in 16-bit: 34 x hidden
# (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
# Models", without the attention-score term: SDPA does not store the scores).
ACTIVATION_BYTES_PER_HIDDEN = 34
LORA_RANK = 8  # TrainConfig's default, on q/k/v/o of every layer
MICRO_BATCHES = (8, 4, 2, 1)




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
    width = dtype_bytes(dtype)
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
