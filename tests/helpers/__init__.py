"""Helpers shared by the tests, one module a concern (fixtures live in ``tests/fixtures``);
every name is importable from ``helpers`` itself.

- ``paths``: ``ROOT``, ``SHARED_BFCL``, ``VENDORED_BFCL``;
- ``scripted``: ``ScriptedBackend``, ``PacedBackend`` (generations that take the time a pace
  gives them, for the engine's time budget), ``RuleBackend`` (thread-safe, for the app's fault
  and public-mode tests) and what it says, ``call_text``, ``result_text``, ``record_calls``;
- ``app``: ``free_port``, ``LaunchedApp`` (``python app.py`` in a subprocess, through
  ``bench.app_process``), ``serve`` (the app in this process with a given backend);
- ``gradio_http``: ``handler_index``, ``event_index``, ``call_handler``, ``QueuedCall``: the
  app's handlers called over plain HTTP, as a page calls them;
- ``chat``: ``ChatServer``, ``STANDARD``, ``call_deltas``, ``text_deltas``: a scripted
  OpenAI-compatible chat server (the ``chat_server`` fixture starts them);
- ``space``: ``front_matter``, ``pins``, ``space_install_args``: the Space's README front
  matter and its one install command;
- ``tiny``: ``tiny_llama``, ``tiny_tokenizer``, ``tiny_backend_over``, ``tiny_random_backend``,
  ``teach_format``: a 2-layer random Llama (mechanics only, never quality) and the
  pick-a-letter tasks it is trained on.
"""

from helpers.app import LaunchedApp, built_app, free_port, serve
from helpers.chat import STANDARD, ChatServer, call_deltas, text_deltas
from helpers.gradio_http import QueuedCall, call_handler, event_index, handler_index
from helpers.paths import ROOT, SHARED_BFCL, VENDORED_BFCL
from helpers.scripted import (
    ANSWER,
    BALANCE,
    PREDICTED,
    PacedBackend,
    RuleBackend,
    ScriptedBackend,
    call_text,
    record_calls,
    result_text,
)
from helpers.space import SPACE_EXTRAS, ZEROGPU_PYTHON, ZEROGPU_TORCH, front_matter, pins, space_install_args
from helpers.tiny import (
    CONFIG,
    HELDOUT,
    TOOLS,
    TOOLS_JSON,
    TRAIN,
    task,
    teach_format,
    tiny_backend_over,
    tiny_llama,
    tiny_random_backend,
    tiny_tokenizer,
)

__all__ = [
    "ANSWER",
    "BALANCE",
    "CONFIG",
    "HELDOUT",
    "PREDICTED",
    "ROOT",
    "SHARED_BFCL",
    "SPACE_EXTRAS",
    "STANDARD",
    "TOOLS",
    "TOOLS_JSON",
    "TRAIN",
    "VENDORED_BFCL",
    "ZEROGPU_PYTHON",
    "ZEROGPU_TORCH",
    "ChatServer",
    "LaunchedApp",
    "PacedBackend",
    "QueuedCall",
    "RuleBackend",
    "ScriptedBackend",
    "call_deltas",
    "call_handler",
    "call_text",
    "event_index",
    "free_port",
    "front_matter",
    "handler_index",
    "pins",
    "record_calls",
    "result_text",
    "serve",
    "built_app",
    "space_install_args",
    "task",
    "teach_format",
    "text_deltas",
    "tiny_backend_over",
    "tiny_llama",
    "tiny_random_backend",
    "tiny_tokenizer",
]
