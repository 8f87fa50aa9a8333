"""A tiny random model for mechanics only, never quality: ``tiny_llama`` (a 2-layer Llama),
``tiny_tokenizer`` (a byte-level BPE with the Qwen3 chat template), ``tiny_backend_over`` and
``tiny_random_backend``; the pick-a-letter tasks it is trained on (``TOOLS_JSON``, ``TOOLS``,
``TRAIN``, ``HELDOUT``, ``CONFIG``) and ``teach_format``, a few SFT steps on them."""

from __future__ import annotations

from envace_demo.prompts import Conversation, actor_prompt, rehearser_messages, rehearser_prompt
from envace_demo.record import ToolCall
from envace_demo.schemas import load_tools
from envace_demo.tasks import Task
from envace_demo.train.config import TrainConfig

TOOLS_JSON = [
    {
        "name": "pick",
        "description": "Pick a letter.",
        "parameters": {
            "type": "object",
            "properties": {"choice": {"type": "string", "enum": ["a", "b"]}},
            "required": ["choice"],
        },
        "response": {
            "type": "object",
            "properties": {"picked": {"type": "string", "enum": ["a", "b"]}},
            "required": ["picked"],
        },
    }
]
TOOLS = load_tools(TOOLS_JSON)


def task(name: str, letter: str, split: str = "train") -> Task:
    return Task(
        name=name,
        prompt=f"pick {letter}",
        tools=TOOLS,
        check={"includes_calls": [{"pick": {"choice": [letter]}}]},
        split=split,
    )


TRAIN = [task("t-a", "a"), task("t-b", "b")]
HELDOUT = [task("h-a", "a", "heldout")]
CONFIG = TrainConfig(
    steps=2,
    group_size=4,
    prompts_per_step=2,
    lr=5e-2,
    max_new_tokens=40,
    micro_batch=4,
    eval_samples=1,
    eval_rehearsals=1,
)


def tiny_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from envace_demo.models.embedded import qwen3_chat_template

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = [
        '<tool_call>\n{"name": "pick", "arguments": {"choice": "a"}}\n</tool_call>',
        "<execution_result>",
    ] * 20
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = qwen3_chat_template()
    return fast


def teach_format(model, tokenizer, backend) -> None:
    """A few SFT steps on one prompt: calls pick "a" or "b" evenly, results echo the choice."""
    import torch

    t = TRAIN[0]
    examples = []
    prompt = actor_prompt(backend, Conversation(t.prompt), t.tools).text
    for letter in "ab":
        call = ToolCall("pick", {"choice": letter})
        text = f'<tool_call>\n{{"name": "pick", "arguments": {{"choice": "{letter}"}}}}\n</tool_call>'
        examples.append((prompt, text))
        messages = rehearser_messages(t.tools, [], Conversation(t.prompt), text, call, t.tools[0])
        examples.append(
            (
                rehearser_prompt(backend, messages).text,
                f'<execution_result>\n{{"picked": "{letter}"}}\n</execution_result>',
            )
        )
    encoded = []
    for prompt, completion in examples:
        p = tokenizer(prompt, add_special_tokens=False).input_ids
        c = tokenizer(completion, add_special_tokens=False).input_ids + [tokenizer.eos_token_id]
        encoded.append((torch.tensor([p + c]), torch.tensor([[-100] * len(p) + c])))  # loss on the completion
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-2)
    model.train()
    for _ in range(25):
        for ids, labels in encoded:
            model(input_ids=ids, labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()


def tiny_llama(vocab_size: int, hidden_size: int = 64, heads: int = 4, kv_heads: int = 2, layers: int = 2, **config):
    """A random Llama of 2 layers (or ``layers``) for mechanics only, never quality, seeded:
    the one tiny-model builder."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(
        LlamaConfig(
            vocab_size=vocab_size,
            hidden_size=hidden_size,
            intermediate_size=2 * hidden_size,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=kv_heads,
            **config,
        )
    )


def tiny_backend_over(tokenizer, constrained: bool = False, **config):
    """``tiny_llama`` behind a TransformersBackend with ``tokenizer``."""
    from envace_demo.models.transformers_backend import TransformersBackend

    model = tiny_llama(
        len(tokenizer), eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, **config
    )
    return TransformersBackend(model, tokenizer, model_id="tiny-random", constrained=constrained)


def tiny_random_backend():
    """The tiny model over the tiny tokenizer, constrained decoding on."""
    return tiny_backend_over(tiny_tokenizer(), constrained=True)
