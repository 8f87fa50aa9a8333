"""The simulated world behind a server: the schema's tools, the real examples, a cache of
answers, and each session's history (no transport here, no ``mcp`` import).

An answer is decided in this order: the engine's certain answer (validation), an identical
call already answered (the cache: the examples, then every answer the model gave, shared by
all sessions as MirrorAPI shares its cache), then the model's rehearsal. A session's earlier
calls and answers are the conversation the rehearser sees, so what it said stays said.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any, Callable

from envace_demo.models.base import Backend
from envace_demo.record import ToolCall
from envace_demo.schemas import Tool
from envace_demo.simulate.pairs import Pair, call_key
from envace_demo.simulate.rehearse import Answer, RehearsalSettings, ask_model, certain, resolved


class SimulatedWorld:
    """Answers calls of ``tools``. ``load`` gives the model (called once, on the first
    call that needs it or by :meth:`preload`); ``examples`` are real (call, result) pairs;
    ``cache`` off makes every call a fresh rehearsal (examples still feed the prompt)."""

    def __init__(
        self,
        tools: list[Tool],
        load: Callable[[], Backend],
        settings: RehearsalSettings | None = None,
        examples: list[Pair] = (),  # type: ignore[assignment]
        cache: bool = True,
    ):
        self.tools = list(tools)
        self.settings = settings or RehearsalSettings()
        self.examples = [(resolved(c, self.tools)[0], r) for c, r in examples]
        self.use_cache = cache
        self._examples = {call_key(c) for c, _ in self.examples}
        self.cache: dict[str, Any] = {call_key(c): r for c, r in self.examples} if cache else {}
        self._load = load
        self._backend: Future = Future()
        self._loading = threading.Lock()
        self._lock = threading.Lock()  # one answer at a time: the cache, histories and the model

    def remember(self, pairs: list[Pair]) -> None:
        """Answers already given (a caller's history): an identical call gets the same one."""
        if self.use_cache:
            for call, result in pairs:
                self.cache.setdefault(call_key(resolved(call, self.tools)[0]), result)

    def preload(self) -> None:
        """Start loading the model in the background (the server answers tools/list meanwhile)."""
        threading.Thread(target=self._resolve_backend, name="envace-simulate-load", daemon=True).start()

    def backend(self) -> Backend:
        """The model, loaded now if nobody has started it; a failed load raises its error each time."""
        self._resolve_backend()
        return self._backend.result()

    def _resolve_backend(self) -> None:
        with self._loading:
            if self._backend.done():
                return
            try:
                self._backend.set_result(self._load())
            except BaseException as err:  # kept for every later call
                self._backend.set_exception(err)

    def answer(self, history: list[Pair], name: str, arguments: Any) -> Answer:
        """Answer one call of the session whose history is ``history`` (appended to, unless
        the rehearsal failed: a failure is the simulator's, not the world's)."""
        call, tool = resolved(ToolCall(name, {} if arguments is None else arguments), self.tools)
        with self._lock:
            answer = certain(call, tool)
            key = call_key(call)
            if answer is None and key in self.cache:
                answer = Answer(call, self.cache[key], "example" if key in self._examples else "cache")
            if answer is None:
                assert tool is not None  # certain() answers for an unknown tool
                backend = self.backend()
                answer = ask_model(backend, self.tools, call, tool, history, self.examples, self.settings)
                if self.use_cache and not answer.failed:
                    self.cache[key] = answer.response
            if not answer.failed:
                history.append((call, answer.response))
        return answer
