"""The GPU section (runs only where CUDA is present): the EnvACE 8B model in bf16 and
4-bit, decode tokens/s ÷ the device's measured bandwidth roofline, and the parallel
rehearsal ratio there. A model that cannot be loaded (no hub access, no bitsandbytes)
is reported with its error instead of failing the benchmark."""

from __future__ import annotations

import gc
import statistics

from bench.decode import decode_tok_s, roofline_fraction, roofline_tok_s, weight_bytes
from bench.memory_bw import measure_bandwidth
from bench.parallel import parallel_ratio

MODEL = "Team-ACE/EnvACE-Qwen3-8B"


def available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def gpu_section(quick: bool, prompt_task) -> dict:
    """``prompt_task``: (the decode prompt builder, the task for the parallel ratio)."""
    import torch

    from envace_demo.errors import EnvaceError
    from envace_demo.models.transformers_backend import TransformersBackend

    make_prompt, task = prompt_task
    bandwidth = measure_bandwidth(size_mb=2048, repeats=5 if quick else 11, device="cuda")
    out: dict = {"device": torch.cuda.get_device_name(0), "bandwidth": bandwidth.to_dict(), "models": {}}
    for quantization in (None, "4bit"):
        name = quantization or "bf16"
        try:
            backend = TransformersBackend.load(MODEL, quantization=quantization, device="cuda")
        except (EnvaceError, ImportError, OSError) as err:
            out["models"][name] = {"error": str(err)}
            continue
        nbytes = weight_bytes(backend.model)
        runs = decode_tok_s(backend, make_prompt(backend), 64 if quick else 128, 3 if quick else 5)
        tok_s = statistics.median(r.tok_s for r in runs)
        entry = {
            "decode_tok_s": round(tok_s, 1),
            "weight_gb": round(nbytes / 1e9, 2),
            "roofline_tok_s": round(roofline_tok_s(bandwidth.best_gbs, nbytes), 1),
            "roofline_fraction": round(roofline_fraction(tok_s, bandwidth.best_gbs, nbytes), 3),
        }
        if quantization is None:
            figures = parallel_ratio(backend, task, n=4, seeds=(0, 1) if quick else (0, 1, 2),
                                     max_new_tokens=256, require_first_call=False)
            entry["parallel_rehearsal_ratio"] = round(figures.ratio, 3)
            entry["parallel_one_s"], entry["parallel_many_s"] = round(figures.one_s, 2), round(figures.many_s, 2)
        out["models"][name] = entry
        del backend
        gc.collect()
        torch.cuda.empty_cache()
    return out
