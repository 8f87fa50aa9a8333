"""The shipped LoRA adapter: found, chosen with ``--adapter demo-cpu`` (not by default:
it is not yet better than the base model), and it changes what the real embedded model
writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envace_demo.cli import build_parser
from envace_demo.cli import flags
from envace_demo.models import embedded
from envace_demo.models.loader import EMBEDDED, adapter_for
from envace_demo.settings import Settings
from helpers import tiny_random_backend


def test_the_package_ships_the_demo_cpu_adapter_with_its_card():
    folder = embedded.shipped_adapter()
    assert folder is not None and folder.name == "demo-cpu"
    assert (folder / "adapter_model.safetensors").stat().st_size < 20 * 2**20
    card = (folder / "README.md").read_text(encoding="utf-8")
    for needed in ("SmolLM2-135M-Instruct", "train --recipe demo-cpu", "held-out"):
        assert needed in card
    config = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8"))
    assert config["base_model_name_or_path"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert config["peft_type"] == "LORA" and config["r"] == 8


def test_which_adapter_a_model_gets(tmp_path):
    # Opt-in until a trained adapter beats the base model on the held-out tasks.
    assert adapter_for(EMBEDDED, None) is None
    assert adapter_for(EMBEDDED, "demo-cpu") == embedded.shipped_adapter()
    assert adapter_for(EMBEDDED, "none") is None and adapter_for(EMBEDDED, "None") is None
    assert adapter_for(EMBEDDED, str(tmp_path)) == tmp_path
    assert adapter_for("Qwen/Qwen3-8B", None) is None
    assert adapter_for("Qwen/Qwen3-8B", str(tmp_path)) == tmp_path


def test_the_setting_comes_from_the_environment_and_the_flag():
    assert Settings.from_env({}).adapter is None
    assert Settings.from_env({"ENVACE_ADAPTER": "none"}).adapter == "none"
    for command in (["run", "--env", "bank", "--task", "check-balance"], ["train", "--env", "bank", "--out", "x"]):
        args = build_parser().parse_args([*command, "--adapter", "none"])
        assert flags.settings_from(args).adapter == "none"
        args = build_parser().parse_args(command)
        assert flags.settings_from(args).adapter is None


def test_a_folder_without_an_adapter_is_refused_by_name(tmp_path):
    from envace_demo.errors import ConfigError
    from envace_demo.models.loader import _with_adapter

    with pytest.raises(ConfigError, match="no LoRA adapter here"):
        _with_adapter(tiny_random_backend(), Path(tmp_path))


@pytest.mark.slow
def test_the_embedded_model_loads_with_the_adapter_and_it_changes_the_output(cache_dir):
    import torch

    from envace_demo.models.base import Sampling
    from envace_demo.models.loader import load_backend
    from envace_demo.prompts import Conversation, actor_prompt
    from envace_demo.tasks import find_task

    backend = load_backend("embedded", cache_dir=cache_dir, device="cpu", adapter="demo-cpu")
    assert backend.adapter is not None and backend.adapter.name == "demo-cpu"
    info = backend.info
    assert info.model_id == "embedded (SmolLM2-135M-Instruct) + demo-cpu adapter"
    assert info.extra["adapter"].endswith("demo-cpu")
    task = find_task("bank", "check-balance")
    prompt = actor_prompt(backend, Conversation(task.prompt), task.tools)
    greedy = Sampling(temperature=0.0, max_new_tokens=24)
    trained = backend.generate(prompt, greedy).text
    ids = torch.tensor([backend.tokenizer(prompt.text, add_special_tokens=False).input_ids])
    with torch.no_grad():
        with_adapter = backend.model(input_ids=ids).logits[0, -1]
        with backend.model.disable_adapter():
            base = backend.model(input_ids=ids).logits[0, -1]
    assert not torch.allclose(with_adapter, base, atol=1e-3)
    backend.remove_adapter()
    assert backend.adapter is None
    assert backend.generate(prompt, greedy).text != trained


@pytest.mark.slow
def test_the_base_weights_run_beside_the_adapter_on_one_copy(cache_dir):
    """Compare's base side: generations with the adapter switched off, taking turns with
    the adapted ones on the same loaded weights; each keeps its own output."""
    from envace_demo.errors import ConfigError
    from envace_demo.models.adapters import without_adapter
    from envace_demo.models.base import Sampling
    from envace_demo.models.loader import load_backend
    from envace_demo.prompts import Conversation, actor_prompt
    from envace_demo.tasks import find_task

    backend = load_backend("embedded", cache_dir=cache_dir, device="cpu", adapter="demo-cpu")
    task = find_task("bank", "check-balance")
    prompt = actor_prompt(backend, Conversation(task.prompt), task.tools)
    greedy = Sampling(temperature=0.0, max_new_tokens=24)
    trained = backend.generate(prompt, greedy).text
    base_view = without_adapter(backend)
    assert base_view.info.model_id == "embedded (SmolLM2-135M-Instruct)" and "adapter" not in base_view.info.extra
    base = base_view.generate(prompt, greedy).text
    assert backend.generate(prompt, greedy).text == trained  # the adapter is on again
    assert backend.adapter is not None
    backend.remove_adapter()
    assert backend.generate(prompt, greedy).text == base  # what the view wrote is the base model's
    assert base != trained
    with pytest.raises(ConfigError, match="serves no adapter"):
        without_adapter(backend)
