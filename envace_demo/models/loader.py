"""Pick and load the model backend from the settings' model name."""

from __future__ import annotations

from pathlib import Path

from envace_demo.models.base import Backend
from envace_demo.settings import Settings

DEFAULT_GPU_MODEL = "Team-ACE/EnvACE-Qwen3-8B"
EMBEDDED = "embedded"
EMBEDDED_ID = "embedded (SmolLM2-135M-Instruct)"
# The 135M model repeats its call until the token budget cuts the last one in half
# (which fails the whole turn): one call per turn for it.
EMBEDDED_MAX_CALLS = 1
# Under constraint, reasoning is capped (the embedded model's at grammar.MAX_THINK_CHARS,
# so it cannot spend its budget there); a model trained to reason gets ~4k tokens.
REASONING_MODEL_THINK_CHARS = 16_000


def default_model() -> str:
    """The EnvACE 8B model where a CUDA GPU is present, else the embedded CPU model."""
    import torch

    return DEFAULT_GPU_MODEL if torch.cuda.is_available() else EMBEDDED


def load_backend(
    model: str | None,
    *,
    quantization: str | None = None,
    dtype: str = "auto",
    device: str = "auto",
    constrained: bool | None = None,
    cache_dir: Path,
) -> Backend:
    """``model``: None (see :func:`default_model`), ``"embedded"``, a hub id or a
    local folder. ``constrained`` defaults to on for the embedded model (unaided it
    answers in prose instead of calling tools) and off for others (the EnvACE model
    writes the contract's format itself)."""
    from envace_demo.models.transformers_backend import TransformersBackend

    model = model or default_model()
    if model == EMBEDDED:
        from envace_demo.models.embedded import ensure_embedded_model

        folder = ensure_embedded_model(Path(cache_dir))
        backend = TransformersBackend.load(
            str(folder),
            quantization=quantization,
            dtype=dtype,
            device=device,
            constrained=True if constrained is None else constrained,
            model_id=EMBEDDED_ID,
            max_calls=EMBEDDED_MAX_CALLS,
        )
        backend.requires_first_call = True
        return backend
    return TransformersBackend.load(
        model,
        quantization=quantization,
        dtype=dtype,
        device=device,
        constrained=False if constrained is None else constrained,
        max_think_chars=REASONING_MODEL_THINK_CHARS,
    )


def load_configured(settings: Settings) -> Backend:
    """The backend the settings describe: a chat-completions server or a local model."""
    if settings.backend == "openai":
        from envace_demo.models.openai_backend import OpenAIBackend

        return OpenAIBackend(
            settings.base_url, settings.model, api_key=settings.api_key, extras=settings.openai_extras
        )
    if settings.threads:
        import torch

        # Two cores shared by an app and its tests: oversubscribed OpenMP threads
        # slowed decoding ~15x in one measurement; one thread per process avoids it.
        torch.set_num_threads(settings.threads)
    return load_backend(
        settings.model,
        quantization=settings.quantization,
        dtype=settings.dtype,
        device=settings.device,
        constrained=settings.constrained,
        cache_dir=settings.cache_dir,
    )
