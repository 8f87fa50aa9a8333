"""Shared fixtures, loaded as plugins: one module a concern under ``tests/fixtures``
(``models``: the embedded model and the scripted backend; ``servers``: ``transformers serve``
and scripted chat servers; ``threads``: ``one_thread``). Plain helpers live in ``helpers``.
"""

from __future__ import annotations

from helpers.paths import ROOT, SHARED_BFCL, VENDORED_BFCL
from helpers.scripted import ScriptedBackend, call_text, result_text

pytest_plugins = ["fixtures.models", "fixtures.servers", "fixtures.threads"]

# Tests import these helpers from conftest too.
__all__ = ["ROOT", "SHARED_BFCL", "VENDORED_BFCL", "ScriptedBackend", "call_text", "result_text"]
