"""The plan for each Spaces hardware flavor and model (envace_demo.plan): pure arithmetic,
no GPU. The speed model's figures are checked on a GPU by bench/gpu_plan.py."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from envace_demo import plan as plan_mod
from envace_demo.cli import main
from envace_demo.errors import ConfigError
from envace_demo.models.hardware import DEFAULT_GPU_MODEL, EMBEDDED, ENVACE_SMALL
from envace_demo.plan import FLAVORS, SHAPES, Plan, plan

ENVACE = (DEFAULT_GPU_MODEL, ENVACE_SMALL)
GPU_FLAVORS = [f for f, hw in FLAVORS.items() if hw.cuda]


@pytest.mark.parametrize("flavor", list(FLAVORS))
@pytest.mark.parametrize("model", [*ENVACE, EMBEDDED])
def test_every_flavor_and_model_has_a_consistent_plan(flavor, model):
    p = plan(flavor, model)
    m = p.memory
    assert m.total_gib == pytest.approx(m.weights_gib + m.kv_cache_gib + m.workspace_gib)
    assert p.fits == (m.total_gib <= m.available_gib)
    # Headroom kept, on the memory one call gets (a ZeroGPU call on the whole card: twice the slice's).
    assert m.available_gib < FLAVORS[flavor].memory_gib * (2 if p.gpu_size == "xlarge" else 1)
    assert p.device == ("cuda" if FLAVORS[flavor].cuda else "cpu")
    if SHAPES[model].reasoning:
        assert p.think_tokens >= 128
        assert p.max_new_tokens >= p.think_tokens + 128
    # Whatever does not serve a visitor says what to pick instead.
    if not p.usable:
        assert p.advice and "pick" in p.advice
    if p.usable and p.mode == "parallel":
        assert p.estimated_episode_seconds <= p.episode_seconds
    assert (p.gpu_request_seconds is not None) == FLAVORS[flavor].zero_gpu


def test_the_plan_fills_both_envace_models_on_every_gpu():
    for flavor in GPU_FLAVORS:
        for model in ENVACE:
            p = plan(flavor, model)
            assert p.fits, (flavor, model, p.advice)
            assert p.usable, (flavor, model, p.advice)


def test_zerogpu_schedules_at_most_a_minute_with_room_to_think():
    for size in ("large", "xlarge"):
        p = plan("zero-a10g", DEFAULT_GPU_MODEL, gpu_size=size)
        assert p.gpu_size == size and p.gpu_request_seconds is not None and p.gpu_request_seconds <= 60
        factor = 1.5 if size == "large" else 1.0
        assert p.gpu_request_seconds == round(p.gpu_duration_seconds * factor)
        # An xlarge call is checked twice against the visitor's quota.
        assert p.gpu_quota_seconds == p.gpu_request_seconds * (2 if size == "xlarge" else 1)
        assert p.think_tokens >= 128 and p.max_new_tokens >= p.think_tokens + 128
        assert p.estimated_episode_seconds <= p.episode_seconds < p.gpu_duration_seconds
        assert p.fits and p.dtype == "bfloat16" and p.quantization is None


def test_zerogpu_rehearses_by_default_on_the_whole_card():
    """The 8B's run with rehearsal does not fit a call on half a card; the plan takes the
    whole card for it (256 thinking tokens, at most a minute scheduled) and says what that
    costs a visitor's quota."""
    p = plan("zero-a10g", DEFAULT_GPU_MODEL)
    assert (p.mode, p.gpu_size) == ("parallel", "xlarge") and p.usable
    assert p.think_tokens >= 256 and p.gpu_request_seconds <= 60
    assert p.estimated_episode_seconds <= p.episode_seconds == p.gpu_duration_seconds - plan_mod.ZERO_MARGIN_SECONDS
    assert p.memory.available_gib > FLAVORS["zero-a10g"].memory_gib  # the whole card's memory
    assert f"as {p.gpu_quota_seconds} s (an xlarge call counts twice)" in p.notes[0]
    # Half a card is cheaper per run and runs without rehearsal, as the note says.
    half = plan("zero-a10g", DEFAULT_GPU_MODEL, gpu_size="large")
    assert f"ENVACE_GPU_SIZE=large runs without rehearsal at {half.gpu_quota_seconds} s" in p.notes[0]
    # The smaller model rehearses on half a card: no need to pay for the whole one.
    assert plan("zero-a10g", ENVACE_SMALL).gpu_size == "large"
    with pytest.raises(ConfigError, match="gpu size 'huge'"):
        plan("zero-a10g", DEFAULT_GPU_MODEL, gpu_size="huge")


def test_zerogpu_says_so_where_rehearsal_does_not_fit_one_call():
    p = plan("zero-a10g", DEFAULT_GPU_MODEL, gpu_size="large")
    assert p.mode != "parallel"  # as the speed model stands, the 8B's smallest rehearsal needs more
    assert "rehearsal does not fit" in p.advice and "pick" in p.advice
    # ... and what rehearsal would need: one step eager and with a compiled decode, against the call.
    import re

    eager, compiled, hold = map(int, re.search(
        r"takes about (\d+) s eager and (\d+) s with a compiled decode.* against the (\d+) s", p.advice).groups())
    assert compiled < eager and hold == round(p.episode_seconds)


@pytest.mark.parametrize("flavor", ["t4-small", "t4-medium"])
def test_a_t4_never_plans_the_8b_in_16_bit(flavor):
    auto = plan(flavor, DEFAULT_GPU_MODEL)
    assert auto.quantization == "4bit" and auto.fits and auto.dtype == "float16"
    forced = plan(flavor, DEFAULT_GPU_MODEL, "none")
    assert not forced.fits and not forced.usable
    assert "4-bit" in forced.advice
    # The smaller model fits there in 16-bit (float16: no bf16 on a T4).
    small = plan(flavor, ENVACE_SMALL)
    assert small.quantization is None and small.fits and small.dtype == "float16"


def test_an_l4_fits_the_8b_in_bf16_within_its_own_limit():
    p = plan("l4x1", DEFAULT_GPU_MODEL)
    assert (p.dtype, p.quantization, p.fits, p.mode) == ("bfloat16", None, True, "parallel")
    assert p.estimated_episode_seconds <= p.episode_seconds
    assert "--max-model-len" in p.serve_command
    # The full 40,960-token context does not fit an L4's KV cache after the weights.
    assert int(p.serve_command.split("--max-model-len ")[1].split()[0]) < 40_960


def test_an_a100_runs_bf16_with_a_larger_n():
    a100, l4, a10g = (plan(f, DEFAULT_GPU_MODEL) for f in ("a100-large", "l4x1", "a10g-large"))
    assert a100.dtype == "bfloat16" and a100.quantization is None
    assert a100.n > l4.n and a100.n > a10g.n
    assert "--max-model-len 40960" in a100.serve_command


def test_cpu_flavors_refuse_the_8b_and_say_what_to_pick():
    for flavor in ("cpu-basic", "cpu-upgrade"):
        p = plan(flavor, DEFAULT_GPU_MODEL)
        assert not p.fits and not p.usable
        assert "pick" in p.advice and ("t4-small" in p.advice or "l4x1" in p.advice)
        assert plan(flavor, EMBEDDED).usable


def test_more_memory_never_plans_less():
    """Monotone: a card with more bandwidth and memory gets a run at least as rich."""
    order = ["t4-small", "l4x1", "a10g-large", "a100-large"]
    plans = [plan(f, ENVACE_SMALL) for f in order]
    keys = [(p.n, p.max_steps, p.think_tokens) for p in plans]
    assert keys[-1] >= keys[0]
    assert all(b.decode_tokens_per_s >= a.decode_tokens_per_s * 0.9 for a, b in zip(plans, plans[1:]))


def test_4bit_weights_are_about_a_third_of_bf16():
    shape = SHAPES[DEFAULT_GPU_MODEL]
    bf16 = plan_mod.weight_bytes(shape, None, "bfloat16")
    nf4 = plan_mod.weight_bytes(shape, "4bit", "bfloat16")
    assert bf16 == pytest.approx(2 * 8.19e9, rel=0.01)
    assert 0.3 < nf4 / bf16 < 0.45


def test_a_measured_speed_replaces_the_model(monkeypatch):
    before = plan("l4x1", DEFAULT_GPU_MODEL)
    monkeypatch.setitem(plan_mod.MEASURED_DECODE, ("L4", DEFAULT_GPU_MODEL, None), 5.0)
    after = plan("l4x1", DEFAULT_GPU_MODEL)
    assert after.decode_tokens_per_s < before.decode_tokens_per_s
    assert after.estimated_episode_seconds <= after.episode_seconds  # the limit follows


def test_bad_input_is_named():
    with pytest.raises(ConfigError, match="hardware 'h100'"):
        plan("h100", DEFAULT_GPU_MODEL)
    with pytest.raises(ConfigError, match="model 'x/y'"):
        plan("l4x1", "x/y")
    with pytest.raises(ConfigError, match="needs a CUDA GPU"):
        plan("cpu-basic", EMBEDDED, "4bit")


def test_the_plan_command_prints_json(capsys):
    rc = main(["plan", "--hardware", "zero-a10g", "--model", DEFAULT_GPU_MODEL, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert out["gpu_request_seconds"] <= 60 and out["think_tokens"] >= 256 and out["mode"] == "parallel"
    assert main(["plan", "--hardware", "zero-a10g", "--model", DEFAULT_GPU_MODEL, "--json", "--gpu-size", "large"]) == 0
    assert json.loads(capsys.readouterr().out)["gpu_size"] == "large"
    assert out["max_new_tokens"] >= out["think_tokens"] + 128
    assert set(out["memory"]) == {"weights_gib", "kv_cache_gib", "workspace_gib", "total_gib", "available_gib"}
    for key in ("dtype", "quantization", "fits", "n", "max_steps", "episode_seconds", "estimated_episode_seconds"):
        assert key in out


def test_the_plan_command_says_what_does_not_fit(capsys):
    rc = main(["plan", "--hardware", "t4-small", "--model", DEFAULT_GPU_MODEL, "--quantization", "none"])
    text = capsys.readouterr().out
    assert rc == 1
    assert "DOES NOT FIT" in text and "advice:" in text
    with pytest.raises(SystemExit):
        main(["plan", "--hardware", "h100"])


def test_the_zerogpu_factor_is_spaces_own():
    """The plan's duration factor is the one in spaces' zero/configs.json for today's ZeroGPU
    card, and spaces' own arithmetic schedules what the plan says."""
    spaces_config = pytest.importorskip("spaces.zero.config")
    from importlib.resources import files
    from unittest import mock

    configs = json.loads(files("spaces.zero").joinpath(spaces_config.CONFIGS_FILENAME).read_text())
    blackwell = next(c for c in configs if "Blackwell" in c["model"])
    hw = FLAVORS["zero-a10g"]
    assert hw.duration_factor == blackwell["duration_factor"]
    assert hw.memory_gib * 2 * plan_mod.GIB == pytest.approx(blackwell["memory"])
    from spaces.zero import client

    for size in ("large", "xlarge"):
        p = plan("zero-a10g", DEFAULT_GPU_MODEL, gpu_size=size)
        with mock.patch.object(client.config, "get_config", return_value=blackwell):
            scheduled = client.get_duration_seconds(timedelta(seconds=p.gpu_duration_seconds), size)
        assert round(scheduled) == p.gpu_request_seconds, size


def test_plan_round_trips_to_a_dict():
    p = plan("a10g-small", ENVACE_SMALL)
    d = p.to_dict()
    assert isinstance(p, Plan) and d["usable"] == p.usable and d["model"] == ENVACE_SMALL


def test_the_readme_and_the_deploy_page_follow_the_plan():
    """The Space card (README's front matter) preloads the 8B; docs/deploy.md gives each
    flavor's serving command and default run as the plan makes them."""
    from conftest import ROOT

    front = (ROOT / "README.md").read_text(encoding="utf-8").split("\n---\n", 1)[0]
    assert "preload_from_hub:\n  - Team-ACE/EnvACE-Qwen3-8B" in front
    text = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    for flavor in ("l4x1", "a10g-large", "a100-large", "t4-small"):
        assert f"`{plan(flavor, DEFAULT_GPU_MODEL).serve_command}`" in text, flavor
    for flavor in ("l4x1", "a100-large", "zero-a10g"):
        p = plan(flavor, DEFAULT_GPU_MODEL)
        row = f"{p.mode}, N={p.n}, {p.max_steps} steps, {p.think_tokens}+{p.max_new_tokens - p.think_tokens} tokens"
        assert row in text, flavor


def test_training_memory_of_the_8b():
    """QLoRA on an L4, bf16 on an A100, off on ZeroGPU with the reason; the reference
    policy (adapter off) costs no second copy of the weights."""
    l4 = plan("l4x1", DEFAULT_GPU_MODEL).training
    assert l4.available and l4.fits and l4.quantization == "4bit"
    assert l4.memory["weights_gib"] < 7 and l4.memory["total_gib"] <= l4.memory["available_gib"]
    a100 = plan("a100-large", DEFAULT_GPU_MODEL).training
    assert a100.available and a100.quantization is None and a100.micro_batch >= 2
    # The weights are counted once: serving and training share them, the reference too.
    assert a100.memory["weights_gib"] == pytest.approx(plan("a100-large", DEFAULT_GPU_MODEL).memory.weights_gib, abs=0.01)
    assert "no second copy" in a100.reference
    parts = ("weights_gib", "lora_and_optimizer_gib", "activations_gib", "logits_gib")
    assert sum(a100.memory[k] for k in parts) < a100.memory["total_gib"]  # + the CUDA context
    # bf16 training of the 8B does not fit an L4 (weights + one row's activations).
    assert l4.memory["activations_gib"] + 15.26 > l4.memory["available_gib"]
    zero = plan("zero-a10g", DEFAULT_GPU_MODEL).training
    assert not zero.available and "ZeroGPU" in zero.reason
    lora = a100.memory["lora_and_optimizer_gib"]
    assert 0.05 < lora < 0.2  # r=8 on q/k/v/o of 36 layers: 7.7M parameters, 16 bytes each


def test_the_gpu_check_builds_the_8bs_exact_shape():
    from bench import gpu_plan

    assert gpu_plan.shape_of(gpu_plan.QWEN3_8B) == SHAPES[DEFAULT_GPU_MODEL]
    config = __import__("transformers").Qwen3Config(**gpu_plan.QWEN3_8B)
    assert (config.num_hidden_layers, config.num_key_value_heads, config.tie_word_embeddings) == (36, 8, False)


def test_the_gpu_check_dry_runs_on_a_tiny_shape(capsys):
    """bench/gpu_plan.py --tiny: the script's own steps on the CPU, a 2-layer random model
    (mechanics only; the figures mean nothing here)."""
    import torch

    from bench import gpu_plan

    if torch.cuda.is_available():
        pytest.skip("on a CUDA machine the script runs for real")
    assert gpu_plan.main(["--tiny", "--tokens", "4", "--prompt-tokens", "16", "--rows", "1", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    bf16, nf4 = out["models"]
    assert [r["rows"] for r in bf16["runs"]] == [1, 2]
    for run in bf16["runs"]:
        assert run["decode_tokens_per_s"] > 0 and run["planned_tokens_per_s"] > 0
        assert "implied_layer_overhead_s" in run and "measured_over_planned" in run
    assert nf4["skipped"].startswith("bitsandbytes 4-bit needs CUDA")
    with pytest.raises(SystemExit):
        gpu_plan.main([])  # no CUDA and no --tiny: says so
