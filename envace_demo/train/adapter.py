"""Apply a trained LoRA adapter to a loaded backend, or take it off again.

The backend does the work (``TransformersBackend.apply_adapter``, reversible, waits
for a running generation); these functions name what a backend without adapters
(a chat server) cannot do.
"""

from __future__ import annotations

from pathlib import Path

from envace_demo.errors import ConfigError
from envace_demo.models.base import Backend


def _adaptable(backend: Backend):
    if not hasattr(backend, "apply_adapter"):
        raise ConfigError(f"{backend.info.model_id}: adapters apply to local transformers models only")
    return backend


def has_adapter(backend: Backend) -> bool:
    return getattr(backend, "adapter", None) is not None


def apply_adapter(backend: Backend, adapter_dir: Path) -> None:
    """Serve ``backend`` with the adapter saved in ``adapter_dir`` (replacing any other)."""
    from envace_demo.models.loader import name_after_adapter

    _adaptable(backend).apply_adapter(Path(adapter_dir))  # type: ignore[attr-defined]
    name_after_adapter(backend)


def remove_adapter(backend: Backend) -> None:
    """Back to the base weights (a no-op without an adapter)."""
    from envace_demo.models.loader import name_after_adapter

    _adaptable(backend).remove_adapter()  # type: ignore[attr-defined]
    name_after_adapter(backend)
