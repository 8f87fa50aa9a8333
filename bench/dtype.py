"""fp32 vs bf16 for the embedded model on CPU: speed and whether constrained calls stay valid.

Validity: greedy, constrained ``none``-mode episodes over BFCL ``simple`` records
(no environment: the first calls are judged BFCL-style), counting schema-valid
calls and BFCL matches.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from envace_demo.engine import EpisodeConfig, run_episode
from envace_demo.models.base import Sampling
from envace_demo.record import call_steps
from envace_demo.tasks import Task

ROOT = Path(__file__).resolve().parents[1]
BFCL_SIMPLE = ROOT / "tests" / "data" / "bfcl" / "bfcl_simple.jsonl"


def prefill_s(backend, prompt: str, repeats: int) -> float:
    """Median seconds of one forward pass over ``prompt`` (what every new prompt costs)."""
    import torch

    ids = backend.tokenizer(prompt, return_tensors="pt", add_special_tokens=False).input_ids.to(backend.model.device)
    times = []
    with torch.inference_mode():
        backend.model(ids[:, :16], logits_to_keep=1)  # warm-up
        for _ in range(repeats):
            start = time.perf_counter()
            backend.model(ids, use_cache=True, logits_to_keep=1)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def validity(backend, tasks: list[Task], max_new_tokens: int = 128) -> dict:
    """Constrained greedy first calls on ``tasks``: how many are valid and BFCL-correct."""
    config = EpisodeConfig(
        mode="none",
        sampling=Sampling(temperature=0.0, max_new_tokens=max_new_tokens),
        max_steps=1,
        constrained=backend.supports_constraints,
        require_first_call=True,
    )
    calls = valid = correct = 0
    per_task = []
    for task in tasks:
        traj = run_episode(backend, task, config)
        tool_steps = call_steps(traj.turns)
        calls += len(tool_steps)
        valid += sum(1 for s in tool_steps if s.valid)
        correct += int(bool(traj.success))
        per_task.append({"task": task.name, "calls": [s.call.to_dict() for s in tool_steps], "success": traj.success})
    return {"tasks": len(tasks), "calls": calls, "valid_calls": valid, "bfcl_correct": correct, "per_task": per_task}


def compare_dtypes(backends: dict, decode_prompt: str, long_prompt: str, tasks: list[Task], tokens: int,
                   repeats: int) -> dict:
    """``backends``: dtype name -> backend. Speed runs alternate between the dtypes, so a
    shared machine's drifts hit each alike; validity is greedy, so run once each."""
    from bench.decode import decode_once

    decode: dict[str, list[float]] = {name: [] for name in backends}
    prefill: dict[str, list[float]] = {name: [] for name in backends}
    for backend in backends.values():
        decode_once(backend, decode_prompt, 4, min_new_tokens=4)  # warm-up
    for _ in range(repeats):
        for name, backend in backends.items():
            decode[name].append(decode_once(backend, decode_prompt, tokens, min_new_tokens=tokens).tok_s)
            prefill[name].append(prefill_s(backend, long_prompt, 1))
    return {
        name: {
            "dtype": backend.info.dtype,
            "decode_tok_s": round(statistics.median(decode[name]), 2),
            "prefill_s": round(statistics.median(prefill[name]), 3),
            "prefill_tokens": backend.count_tokens(long_prompt),
            "validity": validity(backend, tasks),
        }
        for name, backend in backends.items()
    }
