"""The shipped LoRA adapter: found, served by default with the embedded model (``--adapter
none`` turns it off), and it changes what the real embedded model writes."""

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
    # The actor's adapter at the root, the rehearser's own in rehearser/ (the noshare variant).
    from envace_demo.models.adapters import rehearser_adapter

    for adapter in (folder, rehearser_adapter(folder)):
        assert adapter is not None and (adapter / "adapter_model.safetensors").stat().st_size < 20 * 2**20
        config = json.loads((adapter / "adapter_config.json").read_text(encoding="utf-8"))
        assert config["base_model_name_or_path"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
        assert config["peft_type"] == "LORA" and config["r"] == 16
    assert "--roles rehearser" in card


def test_which_adapter_a_model_gets(tmp_path):
    # The embedded model's default: the trained adapter (it beats the base model on the held-out tasks).
    assert adapter_for(EMBEDDED, None) == embedded.shipped_adapter()
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
    assert info.extra["rehearser_adapter"].endswith("demo-cpu/rehearser")
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


@pytest.mark.slow
def test_the_model_tab_switches_the_adapter_and_compare_sets_base_against_trained(embedded_backend, tmp_path):
    """On the real embedded model: Apply serves the shipped adapter, Compare's base | trained
    runs both sides on the same task and seed (the base side with the adapter off), and
    Apply "none" takes it off again; public mode refuses to switch."""
    import gradio as gr

    from envace_demo.ui import build_app
    from envace_demo.ui.common import AppContext
    from envace_demo.ui.holder import ModelHolder
    from envace_demo.ui.model_tab import switch_adapter
    from envace_demo.ui.options import UIOptions
    from envace_demo.ui.session import Session

    served = embedded_backend.adapter  # the session's model: put back as it was
    settings = Settings(max_steps=1, max_new_tokens=48)
    holder = ModelHolder(settings, loader=lambda s: embedded_backend)
    holder.start()
    holder.wait(timeout=120)
    ctx = AppContext(settings, UIOptions.from_settings(settings), holder)
    try:
        assert "demo-cpu adapter" in switch_adapter(ctx, "demo-cpu") and embedded_backend.adapter is not None
        demo = build_app(settings, holder=holder)
        (run_compare,) = [f.fn for f in demo.fns.values() if getattr(f.fn, "__name__", "") == "run_compare"]
        session = Session(folder=tmp_path)
        list(run_compare(session, "bank", "check-balance", "none", 1, "weights", 0.6, 0.95, 20, 48, 0, False, 1))
        assert set(session.compared) == {"base", "trained"}
        base, trained = session.compared["base"], session.compared["trained"]
        assert base.model["model_id"] == "embedded (SmolLM2-135M-Instruct)" and base.model.get("adapter_off")
        assert trained.model["model_id"].endswith("+ demo-cpu adapter")
        assert base.seed == trained.seed and base.mode == trained.mode == "none"  # rehearsal is not what differs
        demo.close()
        assert "ev-status-info" in switch_adapter(ctx, "none") and embedded_backend.adapter is None
        public = AppContext(settings, UIOptions.from_settings(settings.replace(public=True)), holder)
        with pytest.raises(gr.Error, match="public mode"):
            switch_adapter(public, "demo-cpu")
    finally:
        if served is not None:
            embedded_backend.apply_adapter(served)
        else:
            embedded_backend.remove_adapter()
