"""Apply a trained LoRA adapter to a loaded backend, or take it off again.

The adapter wraps the backend's model (peft injects its layers into the base
modules); ``remove_adapter`` unloads it and restores the base weights exactly,
so "apply" is reversible. Both wait for a running generation to finish.
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

from envace_demo.errors import ConfigError, ModelError
from envace_demo.models.base import Backend


def _model(backend: Backend):
    model = getattr(backend, "model", None)
    if model is None:
        raise ConfigError(f"{backend.info.model_id}: adapters apply to local transformers models only")
    return model


def _lock(backend: Backend):
    # TransformersBackend serializes generate() with this lock; swapping weights waits for it.
    return getattr(backend, "_lock", None) or nullcontext()


def has_adapter(backend: Backend) -> bool:
    from peft import PeftModel

    return isinstance(getattr(backend, "model", None), PeftModel)


def apply_adapter(backend: Backend, adapter_dir: Path) -> None:
    """Serve ``backend`` with the adapter saved in ``adapter_dir`` (replacing any other)."""
    from peft import PeftModel

    adapter_dir = Path(adapter_dir)
    if not (adapter_dir / "adapter_config.json").is_file():
        raise ConfigError(f"{adapter_dir}: no LoRA adapter here (adapter_config.json missing)")
    with _lock(backend):
        model = _model(backend)
        if isinstance(model, PeftModel):
            model = model.unload()
        try:
            backend.model = PeftModel.from_pretrained(model, str(adapter_dir)).eval()  # type: ignore[attr-defined]
        except (OSError, ValueError, RuntimeError) as err:
            backend.model = model  # type: ignore[attr-defined]
            raise ModelError(
                f"{adapter_dir}: cannot apply this adapter to {backend.info.model_id}: {err}"
            ) from err


def remove_adapter(backend: Backend) -> None:
    """Back to the base weights (a no-op without an adapter)."""
    from peft import PeftModel

    with _lock(backend):
        model = _model(backend)
        if isinstance(model, PeftModel):
            backend.model = model.unload().eval()  # type: ignore[attr-defined]
