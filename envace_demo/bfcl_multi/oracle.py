"""A backend that replays BFCL multi-turn ground truth: the harness's upper bound.

For the actor it finds the entry from the conversation (the user messages so far and the
tools offered), then answers each user turn with that turn's ground-truth calls as one
actor step (the project's ``<tool_call>`` blocks) and, once they have run, a plain answer;
a turn whose ground truth is empty (miss_func before its functions arrive, miss_param
before the user gives the value) gets the plain answer at once. For the rehearser it
writes a well-formed success result (it predicts nothing).

A base entry and its long_context twin share their whole conversation while their ground
truths differ for 18 entries: :meth:`OracleBackend.bind` narrows the entries to a run's
tasks (``eval --suite`` does), and a conversation still ambiguous is refused.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Iterable

from envace_demo.bfcl_multi import data
from envace_demo.calls import format_call
from envace_demo.errors import ModelError, TaskError
from envace_demo.models.base import Backend, Constraint, Generation, ModelInfo, Prompt, Sampling, StreamCallback
from envace_demo.prompts import CURRENT_TOOL
from envace_demo.record import ToolCall
from envace_demo.schemas import find_tool

ANSWER = "Done."
_THOUGHT = "<think>\nReplaying the ground truth of user turn {turn} of {id}.\n</think>\n\n"
REHEARSAL = (
    "<think>\nThe oracle replays the ground truth; it does not predict tool results.\n</think>\n"
    '<execution_result>\n{"status": "ok"}\n</execution_result>'
)


def _names(tools: Iterable[Any]) -> frozenset[str]:
    out = set()
    for tool in tools or ():
        fn = tool.get("function", tool) if isinstance(tool, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            out.add(fn["name"])
    return frozenset(out)


class OracleBackend(Backend):
    """Replays the ground truth of the BFCL multi-turn entry each conversation is on."""

    supports_constraints = False
    requires_first_call = False

    def __init__(self, entries: Iterable[Any] | None = None):
        self._lock = threading.Lock()
        self._ids: tuple[str, ...] | None = None
        self._index: dict[str, list[str]] | None = None
        if entries is not None:
            self.bind(entries)

    # ---- which entries -------------------------------------------------------------------------

    def bind(self, entries: Iterable[Any]) -> None:
        """Only these entries (ids, or tasks whose name is one; other tasks are passed over)
        are candidates."""
        ids = []
        for item in entries:
            name = item if isinstance(item, str) else getattr(item, "name", None)
            try:
                data.category_of(name)
            except (TaskError, AttributeError):
                continue  # not a BFCL multi-turn entry
            ids.append(name)
        with self._lock:
            self._ids, self._index = tuple(dict.fromkeys(ids)), None

    def _candidates(self, first: str) -> list[str]:
        with self._lock:
            if self._index is None:
                ids = self._ids if self._ids is not None else [i for c in data.CATEGORIES for i in data.entry_ids(c)]
                index: dict[str, list[str]] = {}
                for i in ids:
                    index.setdefault(data.user_turns(i)[0], []).append(i)
                self._index = index
            return list(self._index.get(first, []))

    def entry_for(
        self, users: list[str], offered: frozenset[str], results: list[Any] | None = None
    ) -> tuple[str, list[ToolCall]]:
        """(entry id, the ground-truth calls of user turn ``len(users) - 1``) for a
        conversation with these user messages and offered tool names; ``results``: the tool
        responses so far, which tell apart entries whose conversations are the same."""
        k = len(users) - 1
        found = [i for i in self._candidates(users[0])
                 if len(data.user_turns(i)) > k and data.user_turns(i)[: k + 1] == users]
        if not found:
            raise ModelError("oracle: this conversation is not a BFCL multi-turn entry's (or not among those bound)")
        fitting = [i for i in found if _offered_at(i, k) == offered]
        found = fitting or found  # an engine that does not add tools yet still gets its calls
        answers = {i: data.ground_truth_calls(i)[k] for i in found}
        if results is not None and any(a != answers[found[0]] for a in answers.values()):
            # Twins (base / long_context): the tool results so far tell them apart.
            found = [i for i in found if _replays(i, k, results)] or found
            answers = {i: answers[i] for i in found}
        first = answers[found[0]]
        if any(a != first for a in answers.values()):
            raise ModelError(f"oracle: entries {', '.join(found)} share this conversation but not their ground "
                             "truth; bind the oracle to one of them (run one category at a time)")
        return found[0], first

    # ---- the backend ----------------------------------------------------------------------------

    @property
    def info(self) -> ModelInfo:
        return ModelInfo(model_id="oracle", device="cpu", dtype="none", extra={"replays": "BFCL multi-turn ground truth"})

    def render(self, messages: list[dict], tools: list[dict] | None = None, enable_thinking: bool = True) -> str:
        return json.dumps({"messages": messages, "tools": tools}, ensure_ascii=False)

    def act(self, messages: list[dict], tools: list[dict] | None) -> str:
        """The actor's output for this conversation."""
        users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
        if not users:
            raise ModelError("oracle: the conversation has no user message")
        if any(m.get("role") == "assistant" for m in messages[users[-1] + 1:]):
            return ANSWER  # this turn's step has run
        texts = [messages[i].get("content") or "" for i in users]
        entry_id, calls = self.entry_for(texts, _names(tools), _tool_results(messages))
        if not calls:
            return ANSWER
        offered = data.tools(data.all_docs(entry_id))
        blocks = [format_call(ToolCall(find_tool(offered, c.name).name, c.arguments)) for c in calls]
        return _THOUGHT.format(turn=len(users) - 1, id=entry_id) + "\n".join(blocks)

    def generate(
        self,
        prompt: Prompt,
        sampling: Sampling,
        constraint: Constraint | None = None,
        on_token: StreamCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Generation:
        if cancel is not None and cancel.is_set():
            return Generation("", 0, 0, 0.0, "cancelled")
        last = prompt.messages[-1].get("content") if prompt.messages else None
        if prompt.role == "rehearser" or (isinstance(last, str) and CURRENT_TOOL in last):
            text = REHEARSAL
        else:
            text = self.act(prompt.messages, prompt.tools)
        if on_token is not None:
            on_token(0, text)
        return Generation(text, max(1, len(text) // 4), len(prompt.text or "") // 4, 0.0)


def _offered_at(entry_id: str, turn: int) -> frozenset[str]:
    """The API-safe names of the tools offered at user turn ``turn``."""
    offered, missed = data.function_docs(entry_id)
    docs = offered + [d for k in sorted(missed) if k <= turn for d in missed[k]]
    return frozenset(t.name for t in data.tools(docs))


def _tool_results(messages: list[dict]) -> list[Any]:
    """The tool messages' contents, parsed where they are JSON."""
    out = []
    for m in messages:
        if m.get("role") == "tool":
            try:
                out.append(json.loads(m.get("content") or "null"))
            except ValueError:
                out.append(m.get("content"))
    return out


def _replays(entry_id: str, turn: int, results: list[Any]) -> bool:
    """Whether the ground truth of the turns before ``turn``, run on the entry's own backends,
    gives ``results`` (the responses the conversation shows)."""
    from envace_demo.bfcl_multi.environment import BFCLMultiTurnEnvironment

    env = BFCLMultiTurnEnvironment(entry_id)
    produced = [env.execute(c.name, c.arguments) for calls in data.ground_truth_calls(entry_id)[:turn] for c in calls]
    return produced == results
