"""bench/gpu_plan.py --tiny: the GPU check's variants (N = 1 and 4, shared prefill or not,
eager or compiled) run on the CPU with a 2-layer random Qwen3 (mechanics only; the
figures mean nothing here)."""

from __future__ import annotations

import json

import pytest


def test_the_gpu_check_measures_its_variants_on_a_tiny_shape(capsys):
    import torch

    from bench import gpu_plan

    if torch.cuda.is_available():
        pytest.skip("on a CUDA machine the script runs for real")
    assert gpu_plan.main(["--tiny", "--tokens", "4", "--prompt-tokens", "16", "--rows", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    found = out["variants"]["16-bit"]
    assert [(v["rows"], v["shared_prefill"], v["compiled"]) for v in found] == list(gpu_plan.VARIANTS)
    assert all(v["prefill_seconds"] > 0 and v["decode_tokens_per_s"] > 0 for v in found)
    summary = out["summary"]["16-bit"]
    assert summary["prefill_whole_over_shared"] > 0 and set(summary["compiled_over_eager"]) == {"1", "4"}
    entry = out["measured_decode"]["16-bit"]
    assert entry["key"][1:] == [gpu_plan.MODEL, None] and entry["decode_tokens_per_s"] > 0
    assert "4-bit" not in out["variants"]  # no CUDA: skipped


def test_a_spent_time_budget_skips_the_remaining_variants(capsys):
    from bench import gpu_plan

    assert gpu_plan.main(["--tiny", "--tokens", "4", "--prompt-tokens", "16", "--rows", "1", "--max-seconds", "0"]) == 0
    found = json.loads(capsys.readouterr().out)["variants"]["16-bit"]
    assert found and all(v["skipped"] == "time" for v in found)
