"""The models known by name, and what a name says about a model."""

from __future__ import annotations

DEFAULT_GPU_MODEL = "Team-ACE/EnvACE-Qwen3-8B"
# The same training at 1.7B: fits a T4 in 16-bit, and rehearses faster.
ENVACE_SMALL = "Team-ACE/EnvACE-Qwen3-1.7B"
EMBEDDED = "embedded"
# Optional Qwen3-family models: the 8B's template, thinking tags and <tool_call> tokens.
QWEN3_SMALL = ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B")


def trained_on_contract(model_id: str) -> bool:
    """Whether ``model_id`` names an EnvACE model (trained on the act/rehearse contract)."""
    return "envace" in model_id.rsplit("/", 1)[-1].lower()
