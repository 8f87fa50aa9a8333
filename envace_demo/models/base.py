"""The backend interface every model engine implements."""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Literal

from envace_demo.errors import ModelError

if TYPE_CHECKING:
    from envace_demo.schemas import Tool


@dataclass(frozen=True)
class Sampling:
    """Sampling parameters; defaults are the EnvACE model card's. The command line's
    sampling flags take their defaults and help from here."""

    temperature: float = field(default=0.6, metadata={"help": "sampling temperature; 0 = greedy"})
    top_p: float = field(default=0.95, metadata={"help": "nucleus sampling: the smallest set of tokens with this mass"})
    top_k: int = field(default=20, metadata={"help": "sample among the k likeliest tokens; 0 = no limit"})
    max_new_tokens: int = field(default=512, metadata={"help": "new tokens per generation, reasoning included"})
    seed: int | None = field(default=None, metadata={"help": "seed of the sampling (the same seed, the same samples)"})
    think_tokens: int | None = field(
        default=None,
        metadata={"help": "reasoning budget in tokens: a longer thought is closed by the engine and the answer "
                  "keeps the rest of max_new_tokens; default: none (the reasoning may use them all)"},
    )
    rehearse_temperature: float | None = field(
        default=None,
        metadata={"help": "temperature of the rehearser's generations (0 = its likeliest prediction); "
                  "default: the model's own (EnvACE: the acting temperature, as the paper evaluated)"},
    )

    def __post_init__(self) -> None:
        if self.think_tokens is not None and not 0 < self.think_tokens < self.max_new_tokens:
            raise ModelError(
                f"think_tokens={self.think_tokens}: must be positive and below max_new_tokens "
                f"({self.max_new_tokens}), which also holds the answer"
            )

    def for_role(self, role: str) -> Sampling:
        """The sampling a ``role`` prompt is decoded with: the rehearser's own temperature
        where one is set (the actor's candidates are meant to differ; the world's response
        is one, and its likeliest prediction is the faithful one)."""
        if role != "rehearser" or self.rehearse_temperature is None or self.rehearse_temperature == self.temperature:
            return self
        return replace(self, temperature=self.rehearse_temperature)

    @classmethod
    def taken_from(cls, source: object, **overrides: object) -> "Sampling":
        """The sampling values that ``source`` (parsed flags, a Playground request) holds
        under these fields' names, ``overrides`` replacing some."""
        from dataclasses import fields

        # A holder without a field (an older request, a form without that control) keeps its default.
        taken = {f.name: getattr(source, f.name, f.default) for f in fields(cls) if f.name not in overrides}
        return cls(**taken, **overrides)


@dataclass(frozen=True)
class Constraint:
    """What constrained decoding must enforce, independent of the engine.

    actor:     optional free reasoning in <think>…</think>, then either
               <tool_call> blocks whose JSON names one of ``tools`` with
               schema-valid arguments, or (unless ``require_call``) a free answer.
    rehearser: optional free reasoning, then
               <execution_result>\\n{JSON}\\n</execution_result> where the JSON
               follows ``response_schema`` when given, else any object/array of
               bounded depth and length.
    """

    role: Literal["actor", "rehearser"]
    tools: tuple["Tool", ...] = ()
    require_call: bool = False
    response_schema: dict | None = None
    # Reasoning bound in characters, below the engine's own; 0: no reasoning (a slow
    # machine's budget: a small model's reasoning is the costliest part of a rehearsal).
    think_chars: int | None = None
    # Characters a free string of a rehearsed result may hold; None: the grammar's default
    # (grammar.MAX_RESULT_STRING; a trained rehearser gets more, grammar.result_string).
    result_string: int | None = None
    # Characters a free answer may hold; None: unbounded. An imagined run's answer is never
    # shown to the committed actor (only which calls to make), so it is cut to its first words.
    answer_chars: int | None = None
    # Text the rehearser's reasoning must open with (``facts.stated_facts``: the deciding
    # facts its context holds, stated); the reasoning then goes on freely from it.
    think_lead: str | None = None


@dataclass(frozen=True)
class Prompt:
    """What a generation continues: a chat, and its rendered text where the engine
    renders one (a chat-completions server takes the messages and renders them itself).

    ``tools``: OpenAI function format, or None. ``thinking``: reasoning on. ``role``: who
    writes the continuation (a backend with weights of its own for the rehearser serves
    its prompts with them).
    Build it with :meth:`Backend.prompt`, which fills ``text`` for engines that need it.
    """

    messages: list[dict]
    tools: list[dict] | None = None
    thinking: bool = True
    text: str | None = None
    role: Literal["actor", "rehearser"] = "actor"

    def shown(self) -> str:
        """The prompt as the trajectory record keeps it: the rendered text, or, for an
        engine that takes messages, the request's messages and tools as JSON."""
        if self.text is not None:
            return self.text
        request = {"messages": self.messages, "tools": self.tools, "enable_thinking": self.thinking}
        return json.dumps(request, ensure_ascii=False)


@dataclass
class Generation:
    """One sample. ``token_ids``: the sampled ids, through the stop token when the
    sample ended on one; ``prompt_ids``: the prompt's ids. Both are empty where the
    engine does not report them (a chat server)."""

    text: str
    new_tokens: int
    prompt_tokens: int
    seconds: float
    finish_reason: Literal["stop", "length", "cancelled"] = "stop"
    prompt_ids: list[int] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    # Each token's probability under the model (and grammar), and where it ends in ``text``
    # (characters): empty where the decoder does not report them (a batch, a chat server).
    token_probs: list[float] = field(default_factory=list)
    token_ends: list[int] = field(default_factory=list)


# Called as tokens arrive: (row index within the batch, text so far of that row).
StreamCallback = Callable[[int, str], None]


@dataclass
class ModelInfo:
    model_id: str
    device: str
    dtype: str
    quantization: str | None = None
    memory_mb: float | None = None
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "model_id": self.model_id,
            "device": self.device,
            "dtype": self.dtype,
            "quantization": self.quantization,
            "memory_mb": self.memory_mb,
            **self.extra,
        }


class Backend(ABC):
    """A chat model. Subclasses implement ``generate``, and ``render`` when the engine
    decodes from text."""

    #: Whether constrained decoding is available in this backend.
    supports_constraints: bool = False
    #: Whether the first actor turn must call a tool: a small model that was never
    #: trained on the contract answers in prose unless made to call.
    requires_first_call: bool = False

    @property
    @abstractmethod
    def info(self) -> ModelInfo: ...

    def render(
        self,
        messages: list[dict],
        tools: list[dict] | None = None,
        enable_thinking: bool = True,
    ) -> str:
        """The prompt text for ``messages`` (chat template, generation prompt added).

        ``tools`` are in OpenAI function format.
        """
        raise ModelError(f"{self.info.model_id}: this engine takes chat messages and renders no prompt text")

    def prompt(self, messages: list[dict], tools: list[dict] | None = None, thinking: bool = True) -> Prompt:
        """The prompt of ``messages``, its text rendered (engines that take messages override this)."""
        return Prompt(messages, tools or None, thinking, self.render(messages, tools or None, thinking))

    def prompt_text(self, prompt: Prompt) -> str:
        """``prompt``'s text: as given, else rendered now."""
        if prompt.text is not None:
            return prompt.text
        return self.render(prompt.messages, prompt.tools, prompt.thinking)

    @abstractmethod
    def generate(
        self,
        prompt: Prompt,
        sampling: Sampling,
        constraint: Constraint | None = None,
        on_token: StreamCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Generation:
        """One sample continuing ``prompt``."""

    def generate_many(
        self,
        prompts: list[Prompt],
        sampling: Sampling,
        constraints: list[Constraint | None] | None = None,
        on_token: StreamCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> list[Generation]:
        """One sample for each of ``prompts`` (row i: ``prompts[i]`` under
        ``constraints[i]``); ``on_token`` gets the row index. Engines that can decode
        different prompts together override this; the default calls ``generate`` once
        per prompt (a seeded call gives row i its own seed)."""
        constraints = constraints if constraints is not None else [None] * len(prompts)
        if len(constraints) != len(prompts):
            raise ValueError(f"generate_many: {len(prompts)} prompts but {len(constraints)} constraints")
        out: list[Generation] = []
        for row, (prompt, constraint) in enumerate(zip(prompts, constraints)):
            if cancel is not None and cancel.is_set():
                out.append(Generation("", 0, 0, 0.0, "cancelled"))
                continue
            seed = None if sampling.seed is None else sampling.seed + 1_000_003 * row
            stream = (lambda _, text, row=row: on_token(row, text)) if on_token is not None else None
            mine = replace(sampling.for_role(prompt.role), seed=seed)
            out.append(self.generate(prompt, mine, constraint=constraint, on_token=stream, cancel=cancel))
        return out

    def count_tokens(self, text: str) -> int:
        return len(text) // 4

    def forget_replays(self) -> None:
        """Forget the rows kept for later rows on the same prompt to replay (a backend that
        keeps none: nothing to do). An episode starts with this: what it costs is its own."""


class BackendWrapper(Backend):
    """A backend in front of another (``inner``): whatever it does not override goes to
    ``inner`` (the recorder of training rollouts, the coalescer of concurrent episodes)."""

    def __init__(self, inner: Backend):
        self.inner = inner
        self.supports_constraints = inner.supports_constraints
        self.requires_first_call = inner.requires_first_call

    @property
    def info(self) -> ModelInfo:
        return self.inner.info

    def render(self, messages: list[dict], tools: list[dict] | None = None, enable_thinking: bool = True) -> str:
        return self.inner.render(messages, tools, enable_thinking)

    def prompt(self, messages: list[dict], tools: list[dict] | None = None, thinking: bool = True) -> Prompt:
        return self.inner.prompt(messages, tools, thinking)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def forget_replays(self) -> None:
        self.inner.forget_replays()

    def generate(self, prompt, sampling, constraint=None, on_token=None, cancel=None) -> Generation:
        return self.inner.generate(prompt, sampling, constraint=constraint, on_token=on_token, cancel=cancel)
