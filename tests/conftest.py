"""Shared fixtures.

``embedded_backend``: the real embedded model (converted once into the project's
.cache, so later runs load it in seconds). ``transformers_server``: a real
``transformers serve`` of that model on 127.0.0.1 (one per test module). ``scripted``: a backend that replays
given outputs; it stands in for a model only in tests of the engine's control
flow (failures, limits, cancellation), where the point is an exact output.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from envace_demo.models.base import Backend, Constraint, Generation, ModelInfo, Sampling
from envace_demo.prompts import CURRENT_TOOL

ROOT = Path(__file__).resolve().parents[1]
SHARED_BFCL = ROOT.parent / "shared" / "data" / "bfcl"
VENDORED_BFCL = ROOT / "tests" / "data" / "bfcl"


@pytest.fixture(scope="session")
def cache_dir() -> Path:
    path = ROOT / ".cache"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(scope="session")
def embedded_backend(cache_dir):
    from envace_demo.models.loader import load_backend

    return load_backend("embedded", cache_dir=cache_dir, device="cpu")


@pytest.fixture(scope="session")
def embedded_base_backend(cache_dir):
    """The embedded model's base weights (no adapter): the shipped adapter is trained on the
    three example environments, and picks worse among tools it has never seen."""
    from envace_demo.models.loader import load_backend

    return load_backend("embedded", cache_dir=cache_dir, device="cpu", adapter="none")


class ScriptedBackend(Backend):
    """Replays scripted outputs: ``actor`` and ``rehearser`` lists, consumed in order.

    An entry may be a string, or a callable taking the prompt text and returning one.
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
        if on_token:
            on_token(0, out)
        return Generation(out, max(1, len(out) // 4), 10, self.delay)


@pytest.fixture
def scripted():
    return ScriptedBackend


def call_text(name: str, arguments: dict, thinking: str = "plan") -> str:
    return f"<think>{thinking}</think>\n<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def result_text(value) -> str:
    return f"<think>simulate</think>\n<execution_result>\n{json.dumps(value)}\n</execution_result>"


# ---- a real server: transformers serve with the embedded model ----------------------------------


@pytest.fixture(scope="module")
def transformers_server():
    """``transformers serve`` of the embedded model on 127.0.0.1 (the benchmark's own starter);
    yields (url, model folder, process)."""
    from bench.eval_speed import served_model
    from envace_demo.models.embedded import ensure_embedded_model

    if not (Path(sys.executable).parent / "transformers").exists():
        pytest.skip("the transformers CLI is not installed next to this Python")
    folder = ensure_embedded_model(ROOT / ".cache")
    with served_model(ROOT / ".cache", threads=os.cpu_count() or 1) as (url, proc):
        yield url, str(folder), proc


@pytest.fixture
def chat_server():
    """Starts scripted chat-completions servers (``helpers.ChatServer``); closes them after."""
    import helpers  # not at the top: helpers imports this module

    servers = []

    def start(reply, **kwargs):
        servers.append(helpers.ChatServer(reply, **kwargs))
        return servers[-1]

    yield start
    for s in servers:
        s.close()
