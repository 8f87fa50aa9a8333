"""A local model run with transformers ``model.generate`` (CPU or CUDA).

``generate_many`` decodes different prompts in one batched ``generate``: their
common token prefix is prefilled once, each row's remainder is padded in after it
(:mod:`envace_demo.models.decoding`). Seeds are applied to a forked torch RNG, so a
seeded call is reproducible and leaves the process's global random state untouched.
A LoRA adapter can be put on and taken off the loaded weights (``apply_adapter``).
"""

from __future__ import annotations

import contextlib
import threading
import time

from envace_demo.errors import ModelError
from envace_demo.models.adapters import BaseWeights, LoraAdapters, rehearser_adapter, role_weights
from envace_demo.models.base import Backend, Constraint, Generation, ModelInfo, Prompt, Sampling, StreamCallback
from envace_demo.models.batch_decoder import decode_batch
from envace_demo.models.closing import closing_ids
from envace_demo.models.decoding import prefix_prefill
from envace_demo.models.grammar import MAX_CALLS, MAX_THINK_CHARS, GrammarCache
from envace_demo.models.pretrained import CPU_AUTO_DTYPE, OFFLINE_HINT, load_pretrained, stop_token_ids
from envace_demo.models.row_decoder import PrefixCache, decode_rows, row_by_row
from envace_demo.models.thinking import budget_processors

__all__ = ["CPU_AUTO_DTYPE", "OFFLINE_HINT", "TransformersBackend"]


class TransformersBackend(LoraAdapters, Backend):
    """A causal LM with a chat template, from :meth:`load` or a model and tokenizer in memory.

    ``constrained``: whether ``generate`` enforces a ``Constraint`` (xgrammar; when False a
    constraint is ignored). ``compile_decode``: a static cache and a compiled decoding step
    (:mod:`batch_decoder`; it pays on a GPU, not on a CPU). Rows that share a prompt prefix
    prefill it once (``share_prefill``); a row on a recent row's prompt replays it while it
    draws alike (``replay_siblings``, :mod:`.replay`); each is off only to measure it. One
    ``generate`` runs at a time per backend; adapters (:class:`LoraAdapters`) wait for it.
    """

    row_decoder = True  # single rows (all rows on a CPU) skip forced tokens, reuse prefixes
    share_prefill = True
    replay_siblings = True
    compile_backend = "inductor"  # torch.compile's backend for ``compile_decode``
    constraint_note: str | None = None  # why constraints asked for are off (an EnvACE model)

    def __init__(
        self,
        model,
        tokenizer,
        *,
        model_id: str,
        quantization: str | None = None,
        constrained: bool = False,
        max_think_chars: int = MAX_THINK_CHARS,
        max_calls: int = MAX_CALLS,
        compile_decode: bool = False,
    ):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.model_id = model_id
        self.quantization = quantization
        self.supports_constraints = constrained
        self.max_think_chars = max_think_chars
        self.max_calls = max_calls
        self.compile_decode = compile_decode
        self.stop_ids = stop_token_ids(model, tokenizer)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.stop_ids[0]
        self._lock = threading.Lock()
        self._grammars: GrammarCache | None = None
        self._adapter = None
        self.row_prefixes, self.row_stats = PrefixCache(), None  # row_stats: the last row's costs
        # Tags with a special token of their own (Qwen3's <tool_call>, <think>): never forced in pieces.
        self.tag_texts = tuple(t for t in tokenizer.get_added_vocab() if t.startswith("<") and "|" not in t)

    @classmethod
    def load(
        cls,
        model: str,
        *,
        quantization: str | None = None,
        dtype: str = "auto",
        device: str = "auto",
        chat_template: str | None = None,
        constrained: bool = False,
        local_files_only: bool = False,
        model_id: str | None = None,
        max_think_chars: int = MAX_THINK_CHARS,
        max_calls: int = MAX_CALLS,
        device_map: str = "auto",
        compile_decode: bool = False,
    ) -> TransformersBackend:
        """Load ``model`` (a hub id or a local folder).

        ``device_map`` (CUDA): ``"auto"`` spreads a model over the GPUs present; ZeroGPU
        wants ``"cuda"``, placed at once with no memory survey of a GPU it only emulates.
        ``dtype="auto"``: bfloat16 on CUDA, ``CPU_AUTO_DTYPE`` on CPU.
        ``quantization``: "4bit" (NF4) or "8bit" with bitsandbytes, CUDA only.
        ``chat_template``: template text replacing the tokenizer's own.
        ``model_id``: the name shown in ``info`` (default: ``model``).
        ``max_think_chars``, ``max_calls``: bounds of constrained outputs (see grammar).
        ``compile_decode``: a compiled decoding step over a static cache (GPU).
        """
        lm, tokenizer = load_pretrained(
            model,
            quantization=quantization,
            dtype=dtype,
            device=device,
            chat_template=chat_template,
            local_files_only=local_files_only,
            device_map=device_map,
        )
        return cls(
            lm,
            tokenizer,
            model_id=model_id or model,
            quantization=quantization,
            constrained=constrained,
            max_think_chars=max_think_chars,
            max_calls=max_calls,
            compile_decode=compile_decode,
        )

    # ------------------------------------------------------------------ Backend

    @property
    def info(self) -> ModelInfo:
        try:
            memory = self.model.get_memory_footprint() / 2**20
        except (AttributeError, RuntimeError):
            memory = None
        extra = {"engine": "transformers", "constrained": self.supports_constraints}
        if self.constraint_note:
            extra["constraints_off"] = self.constraint_note
        if self._adapter is not None:
            extra["adapter"] = str(self._adapter)
            if role_weights(self.model):
                extra["rehearser_adapter"] = str(rehearser_adapter(self._adapter))
        return ModelInfo(
            model_id=self.model_id,
            device=str(self.model.device),
            dtype=str(self.model.dtype).removeprefix("torch."),
            quantization=self.quantization,
            memory_mb=round(memory, 1) if memory is not None else None,
            extra=extra,
        )

    def render(
        self, messages: list[dict], tools: list[dict] | None = None, enable_thinking: bool = True
    ) -> str:
        from jinja2 import TemplateError

        try:
            return self.tokenizer.apply_chat_template(
                messages,
                tools=tools or None,
                enable_thinking=enable_thinking,
                add_generation_prompt=True,
                tokenize=False,
            )
        except (TemplateError, ValueError, TypeError) as err:
            raise ModelError(
                f"chat template of {self.model_id}: cannot render these messages: {err}"
            ) from err

    def forget_replays(self) -> None:
        self.row_prefixes.clear_traces()

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def generate(
        self,
        prompt: Prompt,
        sampling: Sampling,
        constraint: Constraint | None = None,
        on_token: StreamCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Generation:
        return self._decode([prompt], sampling, [constraint], on_token, cancel)[0]

    def generate_many(
        self,
        prompts: list[Prompt],
        sampling: Sampling,
        constraints: list[Constraint | None] | None = None,
        on_token: StreamCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> list[Generation]:
        """One sample per prompt, all rows in one batched ``generate``; row i follows
        ``constraints[i]`` (None: free). The prompts' common prefix is prefilled once."""
        constraints = list(constraints) if constraints is not None else [None] * len(prompts)
        if len(constraints) != len(prompts):
            raise ModelError(f"generate_many: {len(prompts)} prompts but {len(constraints)} constraints")
        if not prompts:
            return []
        return self._decode(prompts, sampling, constraints, on_token, cancel)

    # ------------------------------------------------------------------ decoding

    def _decode(
        self,
        prompts: list[Prompt],
        sampling: Sampling,
        constraints: list[Constraint | None],
        on_token: StreamCallback | None,
        cancel: threading.Event | None,
    ) -> list[Generation]:
        if sampling.max_new_tokens < 1:
            raise ModelError(f"generate: max_new_tokens must be at least 1, got {sampling.max_new_tokens}")
        # Rows decode together when they share the weights and the sampling: each role on its
        # own adapter, or at its own temperature, is one call per group.
        groups: dict[tuple[str | None, Sampling], list[int]] = {}
        for row, prompt in enumerate(prompts):
            groups.setdefault((self.weights_for(prompt), sampling.for_role(prompt.role)), []).append(row)
        if len(groups) > 1:
            return self._decode_apart(groups, prompts, constraints, on_token, cancel)
        weights, sampling = next(iter(groups))
        texts = [self.prompt_text(p) for p in prompts]
        with self._lock, self._weights(), self.serving(weights):
            start = time.perf_counter()
            encoded = [self.tokenizer(text, add_special_tokens=False).input_ids for text in texts]
            if cancel is not None and cancel.is_set():
                return [Generation("", 0, len(ids), 0.0, "cancelled", prompt_ids=ids) for ids in encoded]
            if row_by_row(self, len(encoded)):
                return decode_rows(self, encoded, sampling, constraints, on_token, cancel)  # row_decoder.py
            return decode_batch(self, encoded, sampling, constraints, on_token, cancel, start)  # batch_decoder.py

    def _decode_apart(self, groups: dict[tuple[str | None, Sampling], list[int]], prompts, constraints, on_token,
                      cancel):
        """``_decode`` of each group of rows (their indices) in turn, back in the rows' order."""
        from dataclasses import replace

        out: list[Generation | None] = [None] * len(prompts)
        for k, ((_, sampling), rows) in enumerate(groups.items()):
            mine = sampling if sampling.seed is None else replace(sampling, seed=sampling.seed + 7919 * k)
            stream = (lambda r, text, rows=rows: on_token(rows[r], text)) if on_token is not None else None
            gens = self._decode([prompts[r] for r in rows], mine, [constraints[r] for r in rows], stream, cancel)
            for r, gen in zip(rows, gens):
                out[r] = gen
        return out

    def _weights(self):
        """The context a generation runs in (a :class:`BaseWeights` view turns its adapter off)."""
        return contextlib.nullcontext()

    def base_weights(self) -> BaseWeights:
        """This model without its adapter, for runs beside the adapted one (one view, kept)."""
        if getattr(self, "_base_view", None) is None:
            self._base_view = BaseWeights(self)
        return self._base_view

    def thinking_budget(self, sampling: Sampling, prompt_tails: list[list[int]]) -> list:
        """The reasoning budget's processor (``thinking.budget_processors``); ``prompt_tails``:
        each row's last prompt ids (a template may open the thought there)."""
        return budget_processors(self.tokenizer, sampling.think_tokens, prompt_tails)

    def _prefill(self, encoded: list[list[int]]):
        """(cache, ids, attention mask) of the batch (a hook: the training policy reuses
        prefixes across calls)."""
        return prefix_prefill(self.model, self.pad_id, encoded, share=self.share_prefill)

    def closing_ids(self) -> tuple[list[int], list[int]]:
        """The ids that close a constrained value, (in a string, outside one)
        (``closing.closing_ids``), found once."""
        if getattr(self, "_closing_ids", None) is None:
            self._closing_ids = closing_ids(self.tokenizer, self.stop_ids, self.tag_texts)
        return self._closing_ids

    def _grammar_cache(self) -> GrammarCache | None:
        """None when constraints are off; built on the first constrained call (compiling
        the vocabulary takes seconds)."""
        if not self.supports_constraints:
            return None
        if self._grammars is None:
            vocab = self.model.config.get_text_config().vocab_size
            self._grammars = GrammarCache(self.tokenizer, vocab_size=vocab, stop_token_ids=self.stop_ids,
                                          max_think_chars=self.max_think_chars, max_calls=self.max_calls)
        return self._grammars
