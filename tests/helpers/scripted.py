"""Scripted models: they stand in for a model only where the point is an exact output.

- ``ScriptedBackend``: replays given outputs (the ``scripted`` fixture hands out the class);
- ``PacedBackend``: a ``ScriptedBackend`` whose generations take the time a pace gives them;
- ``RuleBackend``: answers by what the user asked, thread-safe, for the app's fault and
  public-mode tests; ``BALANCE``, ``PREDICTED``, ``ANSWER``: what it says;
- ``call_text``, ``result_text``: an actor's call and a rehearser's result as a model writes them;
  ``sure``: a generation of a text whose every token (one per character) had probability ``p``;
- ``record_calls``: the committed calls of an exported record;
- ``ConstrainedBackend``: a ``ScriptedBackend`` that keeps each generation's constraint, and
  ``constrained_episode``: one episode without rehearsal on a real environment, run with it.
"""

from __future__ import annotations

import json
import threading
import time

from envace_demo.engine import EpisodeConfig, run_episode
from envace_demo.envs.registry import create
from envace_demo.models.base import Backend, Constraint, Generation, ModelInfo, Sampling
from envace_demo.prompts import CURRENT_TOOL
from envace_demo.tasks import Task


def call_text(name: str, arguments: dict, thinking: str = "plan") -> str:
    return f"<think>{thinking}</think>\n<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def result_text(value) -> str:
    return f"<think>simulate</think>\n<execution_result>\n{json.dumps(value)}\n</execution_result>"


def sure(text: str, p: float) -> Generation:
    """``text`` as a decoder that reports probabilities returns it: one token per character,
    each of probability ``p`` (so the rehearser's certainty of its outcome is ``p``)."""
    return Generation(text, len(text), 10, 0.0, token_probs=[p] * len(text), token_ends=list(range(1, len(text) + 1)))


def record_calls(record: dict) -> list[dict]:
    """The committed calls of an exported record, in order (each call sits in its turn)."""
    return [c for turn in record["turns"] for c in turn["calls"]]


class ScriptedBackend(Backend):
    """Replays scripted outputs: ``actor`` and ``rehearser`` lists, consumed in order.

    An entry may be a string, a ``Generation`` (returned as it is, probabilities and all),
    or a callable taking the prompt text and returning one.
    ``delay`` makes each generation take that long (and honour ``cancel``).
    """

    supports_constraints = False

    def __init__(self, actor=(), rehearser=(), delay: float = 0.0):
        self.actor = list(actor)
        self.rehearser = list(rehearser)
        self.delay = delay
        self.prompts: list[str] = []

    @property
    def info(self) -> ModelInfo:
        return ModelInfo(model_id="scripted", device="cpu", dtype="none")

    def render(self, messages, tools=None, enable_thinking=True) -> str:
        return json.dumps({"messages": messages, "tools": tools}, ensure_ascii=False)

    def generate(self, prompt, sampling: Sampling, constraint: Constraint | None = None,
                 on_token=None, cancel: threading.Event | None = None):
        text = prompt.text
        self.prompts.append(text)
        queue = self.rehearser if CURRENT_TOOL in text else self.actor
        deadline = time.monotonic() + self.delay
        while time.monotonic() < deadline:
            if cancel is not None and cancel.is_set():
                return Generation("", 0, 1, self.delay, "cancelled")
            time.sleep(0.01)
        if not queue:
            raise AssertionError("script exhausted")
        item = queue.pop(0)
        out = item(text) if callable(item) else item
        if isinstance(out, Generation):
            return out
        if on_token:
            on_token(0, out)
        return Generation(out, max(1, len(out) // 4), 10, self.delay)


class ConstrainedBackend(ScriptedBackend):
    """``ScriptedBackend`` that says it honours constraints and keeps each generation's
    (``constraints``), so a test can read the grammar the engine asked for."""

    supports_constraints = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.constraints = []

    def generate(self, prompt, sampling, constraint=None, on_token=None, cancel=None):
        self.constraints.append(constraint)
        return super().generate(prompt, sampling, constraint, on_token, cancel)


def constrained_episode(prompt: str, actor, env_name: str = "library", **config):
    """One episode without rehearsal of ``prompt`` on a fresh real ``env_name``, the actor
    scripted by a ``ConstrainedBackend``: (record, backend, environment)."""
    env = create(env_name)
    backend = ConstrainedBackend(actor=actor)
    traj = run_episode(backend, Task("t", prompt, env.tools()), EpisodeConfig(mode="none", **config), env)
    return traj, backend, env


class PacedBackend(ScriptedBackend):
    """``ScriptedBackend`` whose every generation takes ``pace(prompt_text, committing)``
    seconds (honouring cancel), where ``committing`` turns true at the first prompt that
    carries the rehearsal memory (the committed run's first actor turn) and stays so."""

    def __init__(self, actor=(), rehearser=(), pace=lambda text, committing: 0.0):
        super().__init__(actor, rehearser)
        self.pace = pace
        self.committing = False

    def generate(self, prompt, sampling, constraint=None, on_token=None, cancel=None):
        self.committing = self.committing or "Rehearsal memory" in prompt.text
        self.delay = self.pace(prompt.text, self.committing)
        return super().generate(prompt, sampling, constraint, on_token, cancel)


# What RuleBackend says: look up ACC-1003, predict its balance, answer.
BALANCE = call_text("get_account", {"account_id": "ACC-1003"})
ANSWER = "<think>done</think>\nThe balance of ACC-1003 is 310.25 USD."
PREDICTED = result_text({"account_id": "ACC-1003", "balance": 300.0})


class RuleBackend(Backend):
    """Answers by what the user asked: "EXPLODE" raises, "FOREVER" streams until stopped,
    anything else looks up ACC-1003 and answers. Thread-safe: sessions share it."""

    supports_constraints = False

    def __init__(self, secret_message: str = ""):
        self.secret_message = secret_message

    @property
    def info(self) -> ModelInfo:
        return ModelInfo(model_id="rules", device="cpu", dtype="none")

    def render(self, messages, tools=None, enable_thinking=True) -> str:
        return json.dumps({"messages": messages, "tools": tools}, ensure_ascii=False)

    def generate(self, prompt, sampling: Sampling, constraint=None, on_token=None, cancel=None):
        text = prompt.text
        if "EXPLODE" in text:
            raise RuntimeError(f"the model crashed {self.secret_message}".strip())
        if "FOREVER" in text:
            out = "<think>"
            while not (cancel is not None and cancel.is_set()):
                out += "hmm "
                if on_token:
                    on_token(0, out)
                time.sleep(0.01)
            return Generation(out, len(out), 10, 0.0, "cancelled")
        if CURRENT_TOOL in text:
            return Generation(PREDICTED, 8, 10, 0.01)
        return Generation(ANSWER if '"role": "tool"' in text else BALANCE, 8, 10, 0.01)
