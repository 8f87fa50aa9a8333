"""LoRA adapters on a loaded transformers model: put on, taken off, asked about.

peft injects the adapter's layers into the base modules; taking it off unloads them
and restores the base weights exactly, so applying is reversible.

An adapter folder may hold a second adapter for the rehearser in ``rehearser/`` (the
method's "noshare" variant: each role with weights of its own, on one base model; peft
saves a second adapter named ``rehearser`` in that very folder). Both are loaded; a
rehearser prompt is served with the rehearser's, every other with the folder's own.
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path

from envace_demo.errors import ConfigError, ModelError
from envace_demo.models.row_decoder import PrefixCache

ACTOR_WEIGHTS = "default"  # peft's name for the adapter at the folder's root
REHEARSER_WEIGHTS = "rehearser"  # the rehearser's own adapter, in the folder of that name


def rehearser_adapter(adapter_dir: Path) -> Path | None:
    """The rehearser's own adapter inside ``adapter_dir``, or None (one adapter serves both roles)."""
    inner = Path(adapter_dir) / REHEARSER_WEIGHTS
    return inner if (inner / "adapter_config.json").is_file() else None


def role_weights(model) -> bool:
    """Whether ``model`` holds an adapter of the rehearser's own beside the actor's."""
    return REHEARSER_WEIGHTS in (getattr(model, "peft_config", None) or {})


# A rehearser with an adapter of its own learnt the real responses alone (cross-entropy on
# them): its likeliest prediction is its best, and sampling it only adds errors, such as
# a refusal rehearsed as going through (bench/RESULTS.md, held-out tasks). Its rehearsals
# are greedy unless the run asks for another temperature.
OWN_REHEARSER_TEMPERATURE = 0.0


def rehearse_temperature(backend) -> float | None:
    """The temperature ``backend``'s rehearsals default to: greedy where a rehearser adapter
    of its own serves them, else None (the acting temperature, as EnvACE was evaluated)."""
    return OWN_REHEARSER_TEMPERATURE if backend.info.extra.get("rehearser_adapter") else None


# Written by a recipe whose rehearser states the deciding facts before its result
# (``facts.py``): the reasoning bound it needs under a grammar.
REASONING_FILE = "reasoning.json"


def rehearser_think_chars(backend) -> int | None:
    """The reasoning bound ``backend``'s rehearser adapter was trained with (its
    ``reasoning.json``), or None (the run's own bound)."""
    import json

    folder = backend.info.extra.get("rehearser_adapter") or backend.info.extra.get("adapter")
    path = Path(folder) / REASONING_FILE if folder else None
    if path is None or not path.is_file():
        return None
    try:
        return int(json.loads(path.read_text(encoding="utf-8"))["think_chars"])
    except (ValueError, KeyError, TypeError) as err:
        raise ConfigError(f"{path}: expected {{\"think_chars\": <characters>}} ({err})") from err


def write_reasoning(adapter_dir: Path, think_chars: int) -> None:
    """Mark ``adapter_dir`` as a rehearser that reasons within ``think_chars`` characters."""
    import json

    (Path(adapter_dir) / REASONING_FILE).write_text(json.dumps({"think_chars": think_chars}) + "\n", encoding="utf-8")


def shared_weights(model) -> None:
    """Drop ``model``'s rehearser adapter (training goes on from the actor's adapter, one
    for both roles: the rollouts' log-probs are those of the weights being trained)."""
    if role_weights(model):
        model.set_adapter(ACTOR_WEIGHTS)
        model.delete_adapter(REHEARSER_WEIGHTS)


class LoraAdapters:
    """Adapter methods of a backend that holds ``model`` and ``model_id``, and serializes
    generation with ``_lock`` (swapping weights waits for a running generation)."""

    model: object
    model_id: str
    _lock: threading.Lock
    _adapter: Path | None
    row_prefixes: PrefixCache  # kept key/values: computed by the old weights, so cleared

    @property
    def adapter(self) -> Path | None:
        """The folder of the adapter the model is served with, or None."""
        return self._adapter

    def apply_adapter(self, adapter_dir: Path) -> None:
        """Serve with the LoRA adapter saved in ``adapter_dir`` (replacing any other)."""
        from peft import PeftModel

        adapter_dir = Path(adapter_dir)
        if not (adapter_dir / "adapter_config.json").is_file():
            raise ConfigError(f"{adapter_dir}: no LoRA adapter here (adapter_config.json missing)")
        with self._lock:
            self.row_prefixes.clear()  # whatever happens below, the weights change
            base = self.model.unload() if isinstance(self.model, PeftModel) else self.model
            self._adapter = None
            rehearser = rehearser_adapter(adapter_dir)
            model = None
            try:
                model = PeftModel.from_pretrained(base, str(adapter_dir))
                if rehearser is not None:
                    model.load_adapter(str(rehearser), adapter_name=REHEARSER_WEIGHTS, is_trainable=False)
                    model.set_adapter(ACTOR_WEIGHTS, inference_mode=True)
            except (OSError, ValueError, RuntimeError) as err:
                self.model = model.unload() if model is not None else base  # the base weights as they were
                raise ModelError(f"{adapter_dir}: cannot apply this adapter to {self.model_id}: {err}") from err
            self.model = model.eval()
            self._adapter = adapter_dir

    def weights_for(self, prompt) -> str | None:
        """The adapter that serves ``prompt``: the rehearser's own for a rehearser prompt,
        the actor's for any other; None where one set of weights serves both roles."""
        if not role_weights(self.model):
            return None
        return REHEARSER_WEIGHTS if getattr(prompt, "role", "actor") == "rehearser" else ACTOR_WEIGHTS

    @contextlib.contextmanager
    def serving(self, weights: str | None):
        """The context a generation on ``weights`` (from :meth:`weights_for`) runs in: that
        adapter active, the actor's again after (the caller holds the lock)."""
        if weights is None or weights == ACTOR_WEIGHTS:
            yield
            return
        self.model.set_adapter(weights, inference_mode=True)
        try:
            yield
        finally:
            self.model.set_adapter(ACTOR_WEIGHTS, inference_mode=True)

    def remove_adapter(self) -> None:
        """Back to the base weights (a no-op without an adapter)."""
        from peft import PeftModel

        with self._lock:
            self.row_prefixes.clear()  # whatever happens below, the weights change
            if isinstance(self.model, PeftModel):
                self.model = self.model.unload().eval()
            self._adapter = None


class BaseWeights:
    """A served model's base weights, beside its adapter: every generation runs with the
    adapter switched off (peft's ``disable_adapter``) under the backend's own lock, so the
    two can take turns on one copy of the weights (Compare's base side). Everything else is the backend's; only the kept key/values are its own,
    as they differ without the adapter."""

    def __init__(self, backend):
        self._backend = backend
        self.row_prefixes = PrefixCache()

    def __getattr__(self, name: str):
        return getattr(self._backend, name)

    @property
    def model_id(self) -> str:
        return getattr(self._backend, "base_model_id", None) or self._backend.model_id

    @property
    def adapter(self) -> None:
        return None

    @property
    def info(self):
        from dataclasses import replace

        info = self._backend.info
        extra = {k: v for k, v in info.extra.items() if k not in ("adapter", "rehearser_adapter")}
        return replace(info, model_id=self.model_id, extra={**extra, "adapter_off": True})

    def weights_for(self, prompt) -> None:
        return None  # every adapter is off: the backend's ``serving(None)`` changes nothing

    def generate(self, *args, **kwargs):
        return type(self._backend).generate(self, *args, **kwargs)

    def generate_many(self, *args, **kwargs):
        return type(self._backend).generate_many(self, *args, **kwargs)

    def _decode(self, *args, **kwargs):
        return type(self._backend)._decode(self, *args, **kwargs)

    def _weights(self):
        """The context a generation runs in: the adapter off (nothing to do without one)."""
        from peft import PeftModel

        model = self._backend.model
        return model.disable_adapter() if isinstance(model, PeftModel) else contextlib.nullcontext()


def without_adapter(backend):
    """``backend``'s base weights beside its adapter (:class:`BaseWeights`)."""
    if getattr(backend, "adapter", None) is None or not hasattr(backend, "base_weights"):
        raise ConfigError(
            f"{backend.info.model_id} serves no adapter: there are no base weights to run apart from it"
        )
    return backend.base_weights()
