"""The backend interface every model engine implements."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Literal

if TYPE_CHECKING:
    from envace_demo.schemas import Tool


@dataclass(frozen=True)
class Sampling:
    """Sampling parameters; defaults are the EnvACE model card's. The command line's
    sampling flags take their defaults and help from here."""

    temperature: float = field(default=0.6, metadata={"help": "sampling temperature; 0 = greedy"})
    top_p: float = field(default=0.95, metadata={"help": "nucleus sampling: the smallest set of tokens with this mass"})
    top_k: int = field(default=20, metadata={"help": "sample among the k likeliest tokens; 0 = no limit"})
    max_new_tokens: int = field(default=512, metadata={"help": "new tokens per generation"})
    seed: int | None = field(default=None, metadata={"help": "seed of the sampling (the same seed, the same samples)"})


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


@dataclass
class Generation:
    text: str
    new_tokens: int
    prompt_tokens: int
    seconds: float
    finish_reason: Literal["stop", "length", "cancelled"] = "stop"


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
    """A chat model. Subclasses implement ``render`` and ``generate``."""

    #: Whether constrained decoding is available in this backend.
    supports_constraints: bool = False
    #: Whether the first actor turn must call a tool: a small model that was never
    #: trained on the contract answers in prose unless made to call.
    requires_first_call: bool = False

    @property
    @abstractmethod
    def info(self) -> ModelInfo: ...

    @abstractmethod
    def render(
        self,
        messages: list[dict],
        tools: list[dict] | None = None,
        enable_thinking: bool = True,
    ) -> str:
        """The prompt text for ``messages`` (chat template, generation prompt added).

        ``tools`` are in OpenAI function format.
        """

    @abstractmethod
    def generate(
        self,
        prompt: str,
        sampling: Sampling,
        n: int = 1,
        constraint: Constraint | None = None,
        on_token: StreamCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> list[Generation]:
        """``n`` samples continuing ``prompt``, in one batch where the engine can."""

    def generate_many(
        self,
        prompts: list[str],
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
            gens = self.generate(
                prompt, replace(sampling, seed=seed), n=1, constraint=constraint, on_token=stream, cancel=cancel
            )
            out.append(gens[0])
        return out

    def count_tokens(self, text: str) -> int:
        return len(text) // 4
