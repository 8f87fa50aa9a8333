"""The ``vllm serve`` command for a card."""

from __future__ import annotations

from envace_demo.plan.cost import weight_bytes
from envace_demo.plan.hardware import GIB, Hardware

# vLLM: --gpu-memory-utilization's default, and what it keeps for activations/CUDA graphs.
VLLM_UTILIZATION = 0.9
VLLM_RESERVE_GIB = 1.5


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
