"""The plan as data: its memory, its training, the whole plan, and the plan in a few lines."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from envace_demo.plan.zerogpu import ZERO_MAX_SCHEDULED

# The longest limit a visitor's run may have (a dedicated GPU or a CPU lets it grow to this).
MAX_EPISODE_SECONDS = 600.0


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
    gpu_quota_seconds: int | None = None  # ZeroGPU: what spaces checks against the visitor's quota
    gpu_size: str | None = None  # ZeroGPU: spaces.GPU's size, "large" (half a card) or "xlarge"
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
            f"ZeroGPU: each run asks for {p.gpu_duration_seconds} s, scheduled as {p.gpu_request_seconds} s "
            f"(size {p.gpu_size}, {p.gpu_quota_seconds} s of the visitor's quota)"
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
