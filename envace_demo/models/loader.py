"""Pick and load the model backend from the settings' model name."""

from __future__ import annotations

from pathlib import Path

from envace_demo.models.base import Backend
from envace_demo.models.ids import DEFAULT_GPU_MODEL, EMBEDDED, QWEN3_SMALL, trained_on_contract
from envace_demo.settings import Settings

__all__ = ["DEFAULT_GPU_MODEL", "EMBEDDED", "QWEN3_SMALL", "default_model", "load_backend", "load_configured"]

EMBEDDED_ID = "embedded (SmolLM2-135M-Instruct)"
SMALL_MODEL = Settings().small_model
# The 135M model repeats its call until the token budget cuts the last one in half
# (which fails the whole turn): one call per turn for it.
EMBEDDED_MAX_CALLS = 1
# Under constraint, reasoning is capped (the embedded model's at grammar.MAX_THINK_CHARS,
# so it cannot spend its budget there); a model trained to reason gets ~4k tokens.
REASONING_MODEL_THINK_CHARS = 16_000


def default_model(settings: Settings | None = None) -> str:
    """What :func:`envace_demo.models.hardware.plan_model` picks on this machine."""
    from envace_demo.models.hardware import resolve

    settings, _ = resolve(settings or Settings())
    assert settings.model is not None
    return settings.model


def load_backend(
    model: str | None,
    *,
    quantization: str | None = None,
    dtype: str = "auto",
    device: str = "auto",
    constrained: bool | None = None,
    cache_dir: Path,
    small_model: str = SMALL_MODEL,
    device_map: str = "auto",
    adapter: str | Path | None = None,
    compile_decode: bool = False,
) -> Backend:
    """``model``: None (see :func:`default_model`), ``"embedded"``, a hub id or a
    local folder. ``adapter``: a LoRA adapter folder to serve it with, ``"demo-cpu"`` (the
    shipped one) or ``"none"``; None: no adapter (see :func:`adapter_for`).
    ``compile_decode``: a compiled decoding step over a static cache (it pays on a GPU).
    ``constrained`` defaults to on for the small SmolLM2 model, embedded or
    ``small_model`` from the hub (unaided it answers in prose instead of calling tools),
    and off for others (the EnvACE model writes the contract's format itself)."""
    from envace_demo.models.transformers_backend import TransformersBackend

    model = model or default_model()
    if model in (EMBEDDED, small_model):
        from envace_demo.models.embedded import qwen3_chat_template

        if model == EMBEDDED:
            from envace_demo.models.embedded import ensure_embedded_model

            folder, model_id = ensure_embedded_model(Path(cache_dir)), EMBEDDED_ID
        else:
            from envace_demo.models.hub import fetch_model

            folder, model_id = fetch_model(model, Path(cache_dir)), model
        backend = TransformersBackend.load(
            str(folder),
            quantization=quantization,
            dtype=dtype,
            device=device,
            # SmolLM2's own template silently drops tools=: prompts get Qwen3's.
            chat_template=qwen3_chat_template(),
            constrained=True if constrained is None else constrained,
            model_id=model_id,
            max_calls=EMBEDDED_MAX_CALLS,
            compile_decode=compile_decode,
        )
        backend.requires_first_call = True
        return _with_adapter(backend, adapter_for(model, adapter))
    note = None
    if constrained and trained_on_contract(model):
        constrained, note = False, CONTRACT_MODEL_UNCONSTRAINED
    backend = TransformersBackend.load(
        model,
        quantization=quantization,
        dtype=dtype,
        device=device,
        constrained=False if constrained is None else constrained,
        max_think_chars=REASONING_MODEL_THINK_CHARS,
        device_map=device_map,
        compile_decode=compile_decode,
    )
    backend.constraint_note = note
    return _with_adapter(backend, adapter_for(model, adapter))


def adapter_for(model: str, adapter: str | Path | None) -> Path | None:
    """The adapter folder to apply: ``adapter`` itself, the shipped one for ``"demo-cpu"``,
    none for ``"none"``. Not given: the shipped one for the embedded model (trained by
    the project's own recipe; its card gives the held-out figures), none for others."""
    if adapter is None and model == EMBEDDED:
        adapter = "demo-cpu"
    if adapter is None or str(adapter).strip().lower() == "none":
        return None
    if str(adapter).strip() == "demo-cpu":
        from envace_demo.models.embedded import shipped_adapter

        return shipped_adapter()
    return Path(adapter).expanduser()


def _with_adapter(backend, adapter: Path | None):
    """``backend`` serving ``adapter``; its name then says base and adapter."""
    if adapter is None:
        return backend
    backend.apply_adapter(adapter)
    name_after_adapter(backend)
    return backend


def name_after_adapter(backend) -> None:
    """Name ``backend`` after its base model and the adapter it serves now (the header and
    every record show ``model_id``): "embedded (SmolLM2-135M-Instruct) + demo-cpu adapter"."""
    base = getattr(backend, "base_model_id", None) or backend.model_id
    backend.base_model_id = base
    name = adapter_name(backend)
    backend.model_id = base if name is None else f"{base} + {name} adapter"


def adapter_name(backend) -> str | None:
    """The name of the adapter ``backend`` serves (``demo-cpu`` for the shipped one, else
    its folder's name), or None."""
    from envace_demo.models.embedded import ADAPTER_NAME, SHIPPED_ADAPTER

    adapter = getattr(backend, "adapter", None)
    if adapter is None:
        return None
    return ADAPTER_NAME if Path(adapter).resolve() == SHIPPED_ADAPTER else Path(adapter).name


# Why an EnvACE model never decodes under the grammar, shown where constraints were asked for.
CONTRACT_MODEL_UNCONSTRAINED = (
    "constrained decoding is off for EnvACE models: they write the contract they were trained on "
    "(reasoning of any length and characters, results laid out one key per line, error_tool_call), "
    "which the grammar built for small untrained models refuses"
)


def load_configured(settings: Settings) -> Backend:
    """The backend the settings describe: a chat-completions server or a local model
    (the machine's choice, :mod:`envace_demo.models.hardware`, fills in what is unset)."""
    if settings.backend == "oracle":
        from envace_demo.bfcl_multi.oracle import OracleBackend

        return OracleBackend()
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
    from envace_demo.models.hardware import resolve

    settings, _ = resolve(settings)
    return load_backend(
        settings.model,
        quantization=settings.quantization,
        dtype=settings.dtype,
        device=settings.device,
        constrained=settings.constrained,
        cache_dir=settings.cache_dir,
        small_model=settings.small_model,
        device_map="cuda" if settings.zero_gpu else "auto",
        adapter=settings.adapter,
        compile_decode=settings.compile_decode,
    )
