"""``python -m bench.gpu_plan [--hardware FLAVOR] [--tiny] [--skip-4bit]``: the plan's speed and
memory model (``envace_demo/plan.py``) checked on the machine at hand.

On a CUDA machine, with no hub: a randomly initialized model of EnvACE-Qwen3-8B's exact
shape (``QWEN3_8B`` below, from Qwen3-8B's published config.json; decoding speed and memory
do not depend on the weights' values) is built on the GPU in bfloat16, then saved and
loaded again in 4-bit nf4 (bitsandbytes). For each: the weights' memory, the peak memory
of a generation, and greedy decoding speed (one row and N rows, after a prompt of the
plan's length), printed as JSON beside the plan's figures for the same card (its datasheet
bandwidth, and the bandwidth measured here), with the per-layer overhead the measurement
implies and the line to add to ``plan.MEASURED_DECODE``.

Then the backend's own batched path (``models.batch_decoder``) in its variants, each N
rehearsals of one prompt of the plan's length: N = 1 and N = 4, the shared prefix
prefilled once or every row whole (``share_prefill``), eager or with the compiled
decoding step over a static cache (``compile_decode``; 16-bit only: bitsandbytes layers
do not compile). The JSON's keys beside the plan's check (``models``):

- ``variants``: per model (``"16-bit"``, ``"4-bit"``) a list of ``{"rows", "shared_prefill",
  "compiled", "prefill_seconds", "decode_tokens_per_s" (per row), "step_seconds",
  "peak_gib" (CUDA)}``; a variant past the time budget is ``{"skipped": "time"}``;
- ``summary``: ``prefill_whole_over_shared`` (N = 4: prefill seconds with every row whole
  over the shared prefix's), ``compiled_over_eager`` (decode tokens/s, N = 1 and N = 4);
- ``measured_decode``: per model the entry of ``plan.MEASURED_DECODE`` (``key``: [gpu,
  model, quantization]; ``decode_tokens_per_s``: eager, one row, as the app serves by
  default) and the compiled figure beside it.

It stops starting new measurements after ``--max-seconds`` (default 450: the whole run
within 8 minutes on an H200, the 8B built and saved in 4-bit included).

``--tiny``: the same steps on a 2-layer model of the same family on whatever device there
is (the CPU here), to check the script itself; 4-bit is skipped without CUDA, and the
decoding step is compiled with torch.compile's ``eager`` backend (traced, not code-generated:
inductor takes minutes on a CPU) unless ``--compile-backend`` says otherwise.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import sys
import tempfile
import time
from dataclasses import replace

from envace_demo import plan as plan_mod
from envace_demo.plan import SHAPES, Shape

MODEL = "Team-ACE/EnvACE-Qwen3-8B"
# Qwen3-8B's config.json (the EnvACE model is a fine-tune of it: same shape).
QWEN3_8B = {
    "vocab_size": 151936,
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 40960,
    "rms_norm_eps": 1e-6,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
    "tie_word_embeddings": False,
    "hidden_act": "silu",
    "attention_bias": False,
}
TINY = {**QWEN3_8B, "vocab_size": 1000, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 4096}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def shape_of(config: dict) -> Shape:
    return Shape(
        layers=config["num_hidden_layers"], hidden=config["hidden_size"], intermediate=config["intermediate_size"],
        heads=config["num_attention_heads"], kv_heads=config["num_key_value_heads"], head_dim=config["head_dim"],
        vocab=config["vocab_size"], tied=config["tie_word_embeddings"],
        max_context=config["max_position_embeddings"], reasoning=True,
    )


def build(config: dict, device: str, dtype):
    """A random Qwen3 model of ``config`` built directly on ``device`` in ``dtype``."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = Qwen3ForCausalLM(Qwen3Config(**config))
    finally:
        torch.set_default_dtype(previous)
    model.generation_config.eos_token_id = None  # decode every token asked for
    model.generation_config.pad_token_id = 0
    return model.eval()


def load_4bit(model, folder: str):
    import torch
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    model.save_pretrained(folder)
    quantized = AutoModelForCausalLM.from_pretrained(
        folder,
        device_map="cuda",
        quantization_config=BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16
        ),
    )
    quantized.generation_config.eos_token_id = None
    quantized.generation_config.pad_token_id = 0
    return quantized.eval()


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def decode(model, device: str, rows: int, prompt_tokens: int, new_tokens: int, vocab: int) -> dict:
    """Greedy decoding of ``rows`` rows: prefill seconds, then per-row decode tokens/s."""
    import torch

    ids = torch.randint(10, vocab - 10, (rows, prompt_tokens), device=device)
    mask = torch.ones_like(ids)

    def timed(tokens: int) -> float:
        _sync(device)
        started = time.perf_counter()
        with torch.inference_mode():
            model.generate(ids, attention_mask=mask, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False)
        _sync(device)
        return time.perf_counter() - started

    timed(4)  # warm-up: kernels, allocations
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    prefill = timed(1)
    total = timed(new_tokens)
    decode_s = max(total - prefill, 1e-9)
    out = {
        "rows": rows,
        "prefill_seconds": round(prefill, 3),
        "decode_tokens_per_s": round((new_tokens - 1) / decode_s, 2),
        "step_seconds": round(decode_s / (new_tokens - 1), 5),
    }
    if device == "cuda":
        out["peak_gib"] = round(torch.cuda.max_memory_allocated() / plan_mod.GIB, 2)
    return out


def compare(label: str, model, shape: Shape, quant: str | None, dtype: str, hw, measured_hw, args, device) -> dict:
    """One model: measured against the plan for ``hw`` (datasheet) and ``measured_hw``."""
    import torch

    weights_gib = None
    if device == "cuda":
        gc.collect()
        torch.cuda.empty_cache()
        weights_gib = round(torch.cuda.memory_allocated() / plan_mod.GIB, 2)
    context = args.prompt_tokens + args.tokens // 2
    runs = []
    for rows in args.rows:
        got = decode(model, device, rows, args.prompt_tokens, args.tokens, shape.vocab)
        planned = 1 / plan_mod.step_seconds(hw, shape, MODEL, quant, dtype, rows, context)
        on_measured = 1 / plan_mod.step_seconds(measured_hw, shape, MODEL, quant, dtype, rows, context)
        memory = plan_mod.memory(hw, shape, quant, dtype, rows, args.prompt_tokens + args.tokens)
        bandwidth = measured_hw.bandwidth_gbs * 1e9 * plan_mod.BANDWIDTH_EFFICIENCY
        read = plan_mod.read_bytes_per_step(shape, None, dtype) + rows * context * shape.kv_bytes_per_token(2)
        implied = (got["step_seconds"] * plan_mod.QUANT_SPEED[quant] - read / bandwidth) / shape.layers
        runs.append({
            **got,
            "planned_tokens_per_s": round(planned, 2),
            "planned_on_measured_bandwidth_tokens_per_s": round(on_measured, 2),
            "measured_over_planned": round(got["decode_tokens_per_s"] / planned, 3),
            "planned_total_gib": round(memory.total_gib, 2),
            "implied_layer_overhead_s": round(implied, 6),
        })
    return {
        "model": label,
        "quantization": quant,
        "dtype": dtype,
        "weights_gib": weights_gib,
        "planned_weights_gib": round(plan_mod.weight_bytes(shape, quant, dtype) / plan_mod.GIB, 2),
        "runs": runs,
        "measured_decode_entry": f"({hw.gpu or hw.flavor!r}, {MODEL!r}, {quant!r}): {runs[0]['decode_tokens_per_s']},",
    }


def variant(model, device: str, rows: int, share: bool, compiled: bool, args, vocab: int) -> dict:
    """``rows`` rehearsals of one random prompt through the backend's batched path
    (``prefix_prefill``, then ``model.generate``, over a static cache when ``compiled``):
    prefill seconds (a generation of one token) and per-row greedy decode tokens/s."""
    import torch
    from transformers import GenerationConfig

    from envace_demo.models.batch_decoder import compile_config, static_cache
    from envace_demo.models.decoding import prefix_prefill

    encoded = [torch.randint(10, vocab - 10, (args.prompt_tokens,)).tolist()] * rows
    length = args.prompt_tokens + args.tokens  # one static cache size for every timing: one compilation

    def timed(tokens: int) -> float:
        config = GenerationConfig(
            max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False, pad_token_id=0, eos_token_id=None,
            compile_config=compile_config(device, args.compile_backend) if compiled else None,
        )
        _sync(device)
        started = time.perf_counter()
        with torch.inference_mode():
            cache, ids, mask = prefix_prefill(model, 0, encoded, share=share)
            if compiled:
                cache = static_cache(model, cache, rows, length)
            model.generate(ids, attention_mask=mask, cache=cache, generation_config=config)
        _sync(device)
        return time.perf_counter() - started

    for _ in range(2 if compiled else 1):  # warm-up: kernels, allocations; compilation, CUDA graphs
        timed(4)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    prefill = timed(1)
    decode_s = max(timed(args.tokens) - prefill, 1e-9)
    out = {
        "rows": rows,
        "shared_prefill": share,
        "compiled": compiled,
        "prefill_seconds": round(prefill, 4),
        "decode_tokens_per_s": round((args.tokens - 1) / decode_s, 2),
        "step_seconds": round(decode_s / (args.tokens - 1), 5),
    }
    if device == "cuda":
        out["peak_gib"] = round(torch.cuda.max_memory_allocated() / plan_mod.GIB, 2)
    return out


# (rows, shared prefill, compiled): N = 1, N = 4 whole and shared, then compiled (16-bit only).
VARIANTS = ((1, True, False), (4, False, False), (4, True, False), (1, True, True), (4, True, True))


def variants(model, device: str, args, vocab: int, compiled: bool, deadline: float) -> list[dict]:
    out = []
    for rows, share, compile_ in VARIANTS:
        if compile_ and not compiled:
            continue
        if time.monotonic() > deadline:
            out.append({"rows": rows, "shared_prefill": share, "compiled": compile_, "skipped": "time"})
            continue
        log(f"variant: {rows} rows, shared prefill {share}, compiled {compile_}…")
        out.append(variant(model, device, rows, share, compile_, args, vocab))
    return out


def summary(found: list[dict]) -> dict:
    """The ratios the plan and the issue ask about, from one model's variants."""
    by = {(v["rows"], v["shared_prefill"], v["compiled"]): v for v in found if "skipped" not in v}
    out = {}
    if (4, False, False) in by and (4, True, False) in by:
        out["prefill_whole_over_shared"] = round(
            by[(4, False, False)]["prefill_seconds"] / by[(4, True, False)]["prefill_seconds"], 3
        )
    out["compiled_over_eager"] = {
        str(rows): round(by[(rows, True, True)]["decode_tokens_per_s"] / by[(rows, True, False)]["decode_tokens_per_s"], 3)
        for rows in (1, 4)
        if (rows, True, True) in by and (rows, True, False) in by
    }
    return out


def measured_decode(hw, quant: str | None, found: list[dict]) -> dict:
    one = {v["compiled"]: v["decode_tokens_per_s"] for v in found if v.get("rows") == 1 and "skipped" not in v}
    return {"key": [hw.gpu or hw.flavor, MODEL, quant], "decode_tokens_per_s": one.get(False),
            "compiled_decode_tokens_per_s": one.get(True)}


def _flavor(device_name: str) -> str | None:
    from envace_demo.models.hardware import Machine, flavor_of
    from envace_demo.settings import Settings

    return flavor_of(Settings(), Machine(True, True, False, True, gpu_name=device_name, gpus=1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_plan", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--hardware", choices=plan_mod.FLAVOR_NAMES, help="the flavor to compare with (default: from the card's name)"
    )
    parser.add_argument("--tiny", action="store_true", help="a 2-layer model, to check the script (any device)")
    parser.add_argument("--skip-4bit", action="store_true", help="bf16 only")
    parser.add_argument("--tokens", type=int, default=128, help="new tokens per timed generation")
    parser.add_argument("--prompt-tokens", type=int, default=plan_mod.PROMPT_TOKENS)
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 4], help="batch sizes to time")
    parser.add_argument("--compile-backend", help="torch.compile backend (default: inductor; eager with --tiny)")
    parser.add_argument("--max-seconds", type=float, default=450.0, help="no new measurement starts after this")
    args = parser.parse_args(argv)
    args.compile_backend = args.compile_backend or ("eager" if args.tiny else "inductor")
    deadline = time.monotonic() + args.max_seconds

    import torch

    from bench.memory_bw import measure_bandwidth

    cuda = torch.cuda.is_available()
    if not cuda and not args.tiny:
        parser.error("no CUDA GPU here: pass --tiny to check the script on the CPU")
    device = "cuda" if cuda else "cpu"
    config = TINY if args.tiny else QWEN3_8B
    shape = shape_of(config)
    if not args.tiny:
        assert shape == replace(SHAPES[MODEL]), "QWEN3_8B must be the plan's shape of the 8B"
    name = torch.cuda.get_device_name(0) if cuda else "cpu"
    flavor = args.hardware or (_flavor(name) if cuda else None)
    bandwidth = measure_bandwidth(size_mb=2048 if cuda else 256, repeats=5, device=device)
    log(f"{name}: {bandwidth.best_gbs:.0f} GB/s measured")
    if flavor is not None:
        hw = plan_mod.FLAVORS[flavor]
    else:  # a card the plan has no flavor for: the measured figures stand in for a datasheet
        memory = torch.cuda.get_device_properties(0).total_memory / plan_mod.GIB if cuda else 16.0
        hw = plan_mod.Hardware(
            name, name if cuda else None, 1, memory, bandwidth.best_gbs, 100.0, cuda, 2, zero_gpu=False
        )
    measured_hw = replace(hw, bandwidth_gbs=bandwidth.best_gbs)
    dtype = "bfloat16" if not cuda or torch.cuda.is_bf16_supported() else "float16"
    torch_dtype = getattr(torch, dtype)
    result: dict = {
        "device": name,
        "flavor_compared": hw.flavor,
        "bandwidth": bandwidth.to_dict(),
        "shape": config,
        "speed_model": {
            "bandwidth_efficiency": plan_mod.BANDWIDTH_EFFICIENCY,
            "layer_overhead_s": plan_mod.LAYER_OVERHEAD_S,
            "quant_speed": {str(k): v for k, v in plan_mod.QUANT_SPEED.items()},
        },
        "models": [],
        "variants": {},
        "summary": {},
        "measured_decode": {},
    }
    started = time.monotonic()
    log("building the random model…")
    model = build(config, device, torch_dtype)
    result["build_seconds"] = round(time.monotonic() - started, 1)
    result["models"].append(compare("16-bit", model, shape, None, dtype, hw, measured_hw, args, device))
    _variants(result, "16-bit", model, device, args, shape, True, deadline, hw, None)
    if args.skip_4bit:
        pass
    elif not cuda:
        result["models"].append({"quantization": "4bit", "skipped": "bitsandbytes 4-bit needs CUDA"})
    elif importlib.util.find_spec("bitsandbytes") is None:
        result["models"].append({"quantization": "4bit", "skipped": "bitsandbytes is not installed"})
    elif time.monotonic() > deadline:
        result["models"].append({"quantization": "4bit", "skipped": "time"})
    else:
        with tempfile.TemporaryDirectory() as folder:
            log("saving and loading again in 4-bit…")
            quantized = load_4bit(model, folder)
            del model
            gc.collect()
            torch.cuda.empty_cache()
            result["models"].append(compare("4-bit", quantized, shape, "4bit", dtype, hw, measured_hw, args, device))
            _variants(result, "4-bit", quantized, device, args, shape, False, deadline, hw, "4bit")
    print(json.dumps(result, indent=2))
    return 0


def _variants(result: dict, label: str, model, device: str, args, shape: Shape, compiled: bool, deadline: float,
              hw, quant: str | None) -> None:
    found = variants(model, device, args, shape.vocab, compiled, deadline)
    result["variants"][label] = found
    result["summary"][label] = summary(found)
    result["measured_decode"][label] = measured_decode(hw, quant, found)


if __name__ == "__main__":
    raise SystemExit(main())
