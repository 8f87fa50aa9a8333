"""Single-row decoding with jump-forward and prefix reuse (envace_demo/models/row_decoder.py).

Mechanics on a tiny random Llama over the embedded model's tokenizer (never quality):
the row decoder must give what ``model.generate`` gives where no token is forced, reuse
kept prefixes without changing the output, and, under a grammar, write a valid
result in fewer forward passes than tokens.
"""

from __future__ import annotations

import re
import threading

import pytest
from helpers import tiny_backend_over

from envace_demo.calls import parse_execution_result
from envace_demo.models.base import Constraint, Prompt, Sampling
from envace_demo.models.row_decoder import PrefixCache

GREEDY = Sampling(temperature=0.0, max_new_tokens=16, seed=0)
SAMPLED = Sampling(temperature=1.0, top_p=0.9, top_k=20, max_new_tokens=16, seed=5)
RESPONSE = {
    "type": "object",
    "properties": {
        "account_id": {"type": "string", "pattern": "^ACC-[0-9]{4}$"},
        "status": {"type": "string", "enum": ["active", "frozen"]},
        "owner": {"type": "string", "maxLength": 12},
    },
    "required": ["account_id", "status", "owner"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def tokenizer(cache_dir):
    from transformers import AutoTokenizer

    from envace_demo.models import embedded

    return AutoTokenizer.from_pretrained(embedded.ensure_embedded_model(cache_dir))


@pytest.fixture
def tiny(tokenizer):
    return tiny_backend_over(tokenizer, constrained=True, hidden_size=32, heads=2, kv_heads=1, max_position_embeddings=4096)


def _prompt(backend, text: str) -> Prompt:
    return backend.prompt([{"role": "user", "content": text}], thinking=False)


def _both(backend, prompt, sampling, constraint=None):
    """(row decoder's Generation, model.generate's Generation) for one prompt."""
    fast = backend.generate(prompt, sampling, constraint)
    backend.row_decoder = False
    try:
        slow = backend.generate(prompt, sampling, constraint)
    finally:
        backend.row_decoder = True
    return fast, slow


def test_free_rows_decode_as_model_generate_does(tiny):
    tiny.replay_siblings = False  # the sampled row would start from the greedy one's scores
    prompt = _prompt(tiny, "Say something about accounts.")
    for sampling in (GREEDY, SAMPLED):
        fast, slow = _both(tiny, prompt, sampling)
        assert fast.token_ids == slow.token_ids and fast.text == slow.text
        assert (fast.new_tokens, fast.finish_reason) == (16, "length")
    assert tiny.row_stats.forward_passes == 16  # nothing forced without a grammar


def test_a_kept_prefix_is_reused_and_changes_nothing(tiny):
    first = _prompt(tiny, "What is the balance of ACC-1003?")
    gen = tiny.generate(first, GREEDY)
    # The next turn extends the last one: prompt, what was generated, then more.
    follow = Prompt([], text=first.text + gen.text + "<|im_end|>\n<|im_start|>user\nAnd ACC-1001?<|im_end|>\n")
    again = tiny.generate(follow, GREEDY)
    reused = tiny.row_stats.reused_tokens
    assert reused >= len(gen.prompt_ids) - 1  # all but the last prompt token, which may merge with the text
    tiny.row_prefixes.clear()
    fresh = tiny.generate(follow, GREEDY)
    assert tiny.row_stats.reused_tokens == 0
    assert again.token_ids == fresh.token_ids


def test_a_different_prompt_reuses_only_the_shared_head(tiny):
    tiny.generate(_prompt(tiny, "alpha beta gamma"), GREEDY)
    tiny.generate(_prompt(tiny, "delta"), GREEDY)
    head = tiny.tokenizer(_prompt(tiny, "").text, add_special_tokens=False).input_ids
    assert 0 < tiny.row_stats.reused_tokens < len(head) + 3


def test_under_a_grammar_forced_tokens_ride_along(tiny):
    constraint = Constraint(role="rehearser", response_schema=RESPONSE)
    sampling = Sampling(temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=400, seed=3)
    gen = tiny.generate(_prompt(tiny, "Rehearse get_account."), sampling, constraint)
    stats = tiny.row_stats
    assert gen.finish_reason == "stop", gen.text
    value, error = parse_execution_result(gen.text)
    assert error is None, error
    assert list(value) == ["account_id", "status", "owner"] and re.fullmatch(r"ACC-[0-9]{4}", value["account_id"])
    # Keys, quotes and the tags were forced: fewer passes than tokens.
    assert stats.forward_passes < 0.8 * gen.new_tokens


def test_each_token_carries_its_probability_under_the_model_and_grammar(tiny):
    import torch

    prompt = _prompt(tiny, "Say something about accounts.")
    gen = tiny.generate(prompt, GREEDY)
    assert len(gen.token_probs) == len(gen.token_ends) == len(gen.token_ids) == 16
    assert gen.token_ends[-1] == len(gen.text) and gen.token_ends == sorted(gen.token_ends)
    with torch.inference_mode():  # the first token: greedy, so the likeliest, at the model's softmax
        logits = tiny.model(torch.tensor([gen.prompt_ids])).logits[0, -1].float()
    probs = logits.softmax(-1)
    assert gen.token_probs[0] == pytest.approx(float(probs.max()), rel=1e-4)
    assert gen.token_ids[0] == int(probs.argmax())
    # Under a grammar a forced token (a key, a quote, a tag) has probability 1.
    constraint = Constraint(role="rehearser", response_schema=RESPONSE)
    sampling = Sampling(temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=400, seed=3)
    ruled = tiny.generate(_prompt(tiny, "Rehearse get_account."), sampling, constraint)
    forced = len(ruled.token_ids) - tiny.row_stats.forward_passes  # tokens that took no pass of their own
    assert forced > 0 and ruled.token_probs.count(1.0) >= forced
    assert all(0 < p <= 1 for p in ruled.token_probs)


def test_seeded_rows_repeat(tiny):
    constraint = Constraint(role="rehearser", response_schema=RESPONSE)
    sampling = Sampling(temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=200, seed=11)
    prompt = _prompt(tiny, "Rehearse get_account.")
    assert tiny.generate(prompt, sampling, constraint).text == tiny.generate(prompt, sampling, constraint).text


def test_streaming_and_cancel(tiny):
    seen: list[str] = []
    cancel = threading.Event()

    def on_token(row, text):
        seen.append(text)
        if len(seen) == 3:
            cancel.set()

    gen = tiny.generate(_prompt(tiny, "Stream please."), Sampling(max_new_tokens=64, seed=1), on_token=on_token, cancel=cancel)
    assert gen.finish_reason == "cancelled" and gen.new_tokens < 64
    assert len(seen) >= 3 and all(b.startswith(a) for a, b in zip(seen, seen[1:]))
    assert gen.text.startswith(seen[-1])


def test_weights_changing_forgets_the_kept_prefixes(tiny):
    tiny.generate(_prompt(tiny, "keep me"), GREEDY)
    assert tiny.row_prefixes._kept
    tiny.remove_adapter()  # no adapter on: still the moment weights may change
    assert not tiny.row_prefixes._kept


def test_prefix_cache_keeps_the_most_recent_entries():
    class FakeCache:
        def __init__(self, n):
            self.n = n

        def get_seq_length(self):
            return self.n

        def crop(self, count):
            assert count < 0
            self.n += count

    store = PrefixCache(entries=2)
    store.keep([1, 2, 3, 4], FakeCache(4))
    store.keep([1, 9, 9], FakeCache(3))
    store.keep([5, 6], FakeCache(2))  # the oldest goes
    assert store.take([2, 3]) == (None, 0)  # [1, 2, 3, 4] went; nothing else starts with 2
    cache, shared = store.take([1, 9, 7, 7])
    assert shared == 2 and cache.n == 2  # cut back to what the prompts share
    assert store.take([5, 6])[1] == 1  # the last prompt token is left to run
    # Each set of weights keeps its own: the actor's calls never drop the rehearser's head.
    store = PrefixCache(entries=1)
    store.keep([7, 7, 7], FakeCache(3), key="rehearser")
    store.keep([1, 2], FakeCache(2), key="actor")
    store.keep([4, 3], FakeCache(2), key="actor")
    assert store.take([1, 2, 5], key="actor") == (None, 0)  # the older actor entry went
    assert store.take([7, 7, 8], key="rehearser")[1] == 2


def test_on_a_cpu_rows_of_a_batch_decode_one_by_one_with_their_own_seeds(tiny, monkeypatch):
    monkeypatch.setattr(tiny.model, "generate", lambda *a, **k: pytest.fail("a CPU batch went to model.generate"))
    prompt = _prompt(tiny, "Say something about accounts.")
    rows = tiny.generate_many([prompt] * 3, SAMPLED)
    assert len({g.text for g in rows}) > 1  # each row has its own seed
    assert rows[0].token_ids == tiny.generate(prompt, SAMPLED).token_ids  # row 0 keeps the call's seed
    assert tiny.row_stats.reused_tokens > 0  # the shared prompt was prefilled once


def test_a_forced_tag_with_its_own_token_is_left_to_the_model():
    from envace_demo.models.row_draw import _before_tags

    pieces = {1: "x", 2: "</", 3: "think", 4: ">", 5: "\n"}

    def decode(ids):
        return "".join(pieces[i] for i in ids)

    assert _before_tags([1, 2, 3, 4, 5], decode, ("</think>",)) == [1]  # stops before the tag
    assert _before_tags([1, 2], decode, ("</think>",)) == [1]  # and before half of one
    assert _before_tags([1, 5], decode, ("</think>",)) == [1, 5]
    assert _before_tags([1, 2, 3, 4, 5], decode, ()) == [1, 2, 3, 4, 5]


def test_a_larger_cpu_batch_is_decoded_together(tiny, monkeypatch):
    from envace_demo.models.row_decoder import CPU_ROWS

    calls = []
    real = tiny.model.generate
    monkeypatch.setattr(tiny.model, "generate", lambda *a, **k: calls.append(a[0].shape[0]) or real(*a, **k))
    tiny.generate_many([_prompt(tiny, "Say something about accounts.")] * (CPU_ROWS + 1), SAMPLED)
    assert calls == [CPU_ROWS + 1]  # beyond CPU_ROWS one batched pass beats rows one by one


# ---- a value is closed, not cut, when the budget runs short -------------------------------------

LISTING = {
    "type": "object",
    "properties": {"entries": {"type": "array", "items": {"type": "string", "maxLength": 32}, "maxItems": 3},
                   "note": {"type": "string", "maxLength": 32}},
    "required": ["entries", "note"],
    "additionalProperties": False,
}


def _cut_and_closed(tiny, constraint, tokens, seeds=range(4)):
    """(outputs with closing off, outputs with closing on) under a budget too small for the value."""
    outputs = {}
    for closing in (False, True):
        if not closing:
            tiny._closing_ids = []  # no closers: the budget cuts where it falls
        else:
            tiny._closing_ids = None  # found again
        prompt = _prompt(tiny, "Answer.")
        outputs[closing] = [
            tiny.generate(prompt, Sampling(temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=tokens, seed=s), constraint)
            for s in seeds
        ]
    return outputs[False], outputs[True]


def test_a_result_the_budget_would_cut_is_closed_and_parses(tiny):
    constraint = Constraint(role="rehearser", response_schema=LISTING, think_chars=0)
    cut, closed = _cut_and_closed(tiny, constraint, tokens=40)
    assert any(parse_execution_result(g.text)[1] for g in cut)  # the random model runs past 40 tokens
    for gen in closed:
        value, error = parse_execution_result(gen.text)
        assert error is None, gen.text
        assert set(value) == {"entries", "note"} and gen.new_tokens <= 40


def test_a_call_the_budget_would_cut_is_closed_and_parses(tiny):
    from envace_demo.calls import parse_action
    from envace_demo.schemas import load_tools

    (tool,) = load_tools([{"name": "tag", "parameters": {"type": "object", "properties": {
        "labels": {"type": "array", "items": {"type": "string"}}}, "required": ["labels"]}}])
    constraint = Constraint(role="actor", tools=(tool,), require_call=True, think_chars=0)
    cut, closed = _cut_and_closed(tiny, constraint, tokens=48)
    assert any(parse_action(g.text, {"tag"}, require_call=True).error for g in cut)
    for gen in closed:
        action = parse_action(gen.text, {"tag"}, require_call=True, cut=gen.finish_reason == "length")
        assert action.error is None, gen.text
        assert action.calls[0].name == "tag" and isinstance(action.calls[0].arguments["labels"], list)


def test_closers_are_the_closing_characters_and_the_stop_token(tokenizer):
    from envace_demo.models.closing import closable, closing_ids, in_string, value_open

    inside, outside = closing_ids(tokenizer, [tokenizer.eos_token_id], ())
    eos = tokenizer.eos_token_id
    quoted = {tokenizer.decode([i]) for i in inside if i != eos}
    bare = {tokenizer.decode([i]) for i in outside if i != eos}
    assert '"' in quoted and all(t.startswith('"') and set(t) <= set('"]}') for t in quoted)
    assert {"]", "}"} <= bare and all(set(t) <= set("]}") for t in bare)
    assert eos in inside and eos in outside
    assert value_open('<think>\n</think>\n\n<execution_result>\n{"a": [') and not value_open("<think>\nplan")
    assert closable('<tool_call>\n{"name": "x", "arguments": {}}\n</tool_call>') and not closable("<think>\nplan")
    assert in_string('<tool_call>\n{"name": "x", "arguments": {"q": "a \\" b') and not in_string('<tool_call>\n{"a": "b"')


def test_rows_decoded_together_close_their_values_too(tiny):
    constraint = Constraint(role="rehearser", response_schema=LISTING, think_chars=0)
    prompts = [_prompt(tiny, "Answer."), _prompt(tiny, "Answer, please.")]
    tiny.row_decoder = False  # model.generate with a grammar per row
    try:
        for seed in range(2):
            # No forced tokens ride along here: the tags alone take 30 tokens.
            sampling = Sampling(temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=72, seed=seed)
            for gen in tiny.generate_many(prompts, sampling, [constraint, constraint]):
                value, error = parse_execution_result(gen.text)
                assert error is None, gen.text
                assert set(value) == {"entries", "note"}
    finally:
        tiny.row_decoder = True


NOTE = {"type": "object", "properties": {"note": {"type": "string", "maxLength": 40}}, "required": ["note"],
        "additionalProperties": False}


@pytest.mark.parametrize("one_by_one", [True, False])
def test_a_string_the_grammar_leaves_open_is_closed_at_its_bound(tiny, one_by_one):
    """A bound past GRAMMAR_STRING is the decoder's (the row decoder's and the batch's): the
    random model, which would write until its budget, closes the note once it holds 40
    characters; the token that reached the bound may carry a few more."""
    from envace_demo.models.grammar import GRAMMAR_STRING

    assert 40 > GRAMMAR_STRING
    constraint = Constraint(role="rehearser", response_schema=NOTE, think_chars=0, result_string=40)
    longest = max(len(tiny.tokenizer.decode([i])) for i in range(len(tiny.tokenizer)))
    tiny.row_decoder = one_by_one
    try:
        lengths = []
        for seed in range(3):
            sampling = Sampling(temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=160, seed=seed)
            prompts = [_prompt(tiny, "Answer."), _prompt(tiny, "Answer, please.")] if not one_by_one else [
                _prompt(tiny, "Answer.")]
            for gen in tiny.generate_many(prompts, sampling, [constraint] * len(prompts)):
                value, error = parse_execution_result(gen.text)
                assert error is None, gen.text
                lengths.append(len(value["note"]))
    finally:
        tiny.row_decoder = True
    assert max(lengths) >= 40 and all(n < 40 + longest for n in lengths), lengths


def test_open_string_counts_the_characters_of_the_string_the_output_ends_in():
    from envace_demo.models.closing import open_string

    assert open_string('<execution_result>\n{"note": "ab\\ncd') == 5  # the escape counts one
    assert open_string('<execution_result>\n{"note": "ab"') is None
    assert open_string('<execution_result>\n{"no') == 2  # a key is a string too
    assert open_string('<tool_call>\n{"q": "x"}\n</tool_call>\n<execution_result>\n{"a": "') == 0


# ---- sibling replay: rows with one prompt and grammar draw from the first row's scores ----


def _count_passes(backend, monkeypatch) -> list[int]:
    """Counts the forward passes of ``backend``'s model."""
    passes = []
    real = backend.model.forward

    def forward(*args, **kwargs):
        passes.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(backend.model, "forward", forward)
    return passes


def _rows_with_and_without_replay(backend, prompts, sampling, constraint=None):
    constraints = [constraint] * len(prompts)
    backend.row_prefixes.clear()
    replayed = backend.generate_many(prompts, sampling, constraints)
    backend.replay_siblings = False
    backend.row_prefixes.clear()
    try:
        alone = backend.generate_many(prompts, sampling, constraints)
    finally:
        backend.replay_siblings = True
    return replayed, alone


@pytest.mark.parametrize("ruled", [False, True], ids=["free", "grammar"])
def test_sibling_rows_draw_the_tokens_they_would_alone(tiny, ruled):
    """Sampled at temperature 1 on a random model, the siblings soon draw other tokens than
    the first row: each is replayed up to there, then decoded on; tokens and probabilities
    are those of rows decoded each on its own."""
    constraint = Constraint(role="rehearser", response_schema=RESPONSE) if ruled else None
    sampling = Sampling(temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=120 if ruled else 16, seed=7)
    prompt = _prompt(tiny, "Rehearse get_account." if ruled else "Say something about accounts.")
    replayed, alone = _rows_with_and_without_replay(tiny, [prompt] * 3, sampling, constraint)
    assert [g.token_ids for g in replayed] == [g.token_ids for g in alone]
    for mine, own in zip(replayed, alone):
        assert mine.token_probs == pytest.approx(own.token_probs)
    assert len({tuple(g.token_ids) for g in replayed}) > 1  # they parted: the model took over


def test_a_sibling_that_draws_alike_costs_no_model_pass(tiny, monkeypatch):
    constraint = Constraint(role="rehearser", response_schema=RESPONSE)
    sampling = Sampling(temperature=0.0, max_new_tokens=120, seed=7)
    prompt = _prompt(tiny, "Rehearse get_account.")
    passes = _count_passes(tiny, monkeypatch)
    replayed, alone = _rows_with_and_without_replay(tiny, [prompt] * 3, sampling, constraint)
    assert [g.token_ids for g in replayed] == [g.token_ids for g in alone]
    assert tiny.row_stats.forward_passes > 0  # the last row, replay off: decoded
    passes.clear()
    tiny.row_prefixes.clear()
    tiny.generate_many([prompt] * 3, sampling, [constraint] * 3)
    with_replay = len(passes)
    assert tiny.row_stats.forward_passes == 0  # the last row, replayed: no pass of its own
    passes.clear()
    tiny.replay_siblings = False
    tiny.row_prefixes.clear()
    try:
        tiny.generate_many([prompt] * 3, sampling, [constraint] * 3)
    finally:
        tiny.replay_siblings = True
    without = len(passes)
    one_row = without - 1  # the shared prefix once, then three rows' passes
    assert with_replay == 1 + one_row // 3 and without == 1 + 3 * (one_row // 3)
    # The next call still finds the shared prompt kept.
    tiny.generate(prompt, sampling, constraint)
    assert tiny.row_stats.reused_tokens > 0


def test_a_later_call_replays_an_earlier_row_until_the_weights_change(tiny, monkeypatch):
    """Parallel's lead imagined run goes first, alone; the others, later, replay its scores."""
    constraint = Constraint(role="rehearser", response_schema=RESPONSE)
    sampling = Sampling(temperature=0.0, max_new_tokens=120, seed=7)
    prompt = _prompt(tiny, "Rehearse get_account.")
    first = tiny.generate(prompt, sampling, constraint)
    passes = _count_passes(tiny, monkeypatch)
    again = tiny.generate_many([prompt] * 2, sampling, [constraint] * 2)
    assert [g.token_ids for g in again] == [first.token_ids] * 2 and passes == []
    tiny.row_prefixes.clear()  # what the backend does when its weights change (adapters, training)
    assert tiny.generate(prompt, sampling, constraint).token_ids == first.token_ids and passes
    # A smaller token budget closes the values sooner, and no grammar draws freely: each
    # parts from the recorded ids where it draws otherwise, and the model goes on from there.
    for budget, ruled in ((60, constraint), (120, None)):
        passes.clear()
        sampling = Sampling(temperature=0.0, max_new_tokens=budget, seed=7)
        replayed = tiny.generate(prompt, sampling, ruled)
        assert passes
        tiny.replay_siblings = False
        try:
            assert replayed.token_ids == tiny.generate(prompt, sampling, ruled).token_ids
        finally:
            tiny.replay_siblings = True


def test_an_episode_replays_only_its_own_rows(tiny):
    """What an episode costs is its own: rows recorded before it (Compare's other side, on
    the same prompts) are forgotten when it starts."""
    from envace_demo.engine import Episode, EpisodeConfig
    from envace_demo.tasks import Task

    gen = tiny.generate(_prompt(tiny, "Say something about accounts."), GREEDY)
    key = (None, tuple(gen.prompt_ids))  # no adapter: the weights' key is None
    assert tiny.row_prefixes.trace(key) is not None
    events = Episode(tiny, Task(name="t", prompt="hi", tools=[]), EpisodeConfig(mode="none")).run()
    next(events)  # the episode has started
    events.close()
    assert tiny.row_prefixes.trace(key) is None
