"""A backend over any OpenAI-compatible chat-completions server (vLLM, SGLang,
``transformers serve``) through the ``openai`` client.

A chat server renders its own prompts, so this backend's prompts carry no text: their
messages (as standard chat messages, see :func:`chat_messages`) and tools are sent as
they are, and the trajectory record keeps them as JSON (``Prompt.shown``).

The server's answer is turned back into the text a local model would have
written, so the engine's parser works unchanged: ``reasoning_content`` becomes
``<think>…</think>`` and each entry of ``tool_calls`` a ``<tool_call>`` block.
Text the server did not parse (no reasoning or tool parser configured) passes
through as it came.

Only standard request fields are sent by default (``transformers serve`` rejects
others with HTTP 422); ``extras=True`` adds ``top_k`` and ``chat_template_kwargs``,
which vLLM and SGLang accept. ``generate_many`` sends its rows as concurrent
requests (not every server honours ``n``). Cancelling
closes the open streams, which tells the server to stop generating.

A request that fails in a way that may pass (no connection, HTTP 408/409/429/5xx,
a stream cut off) is sent again after a backoff (``retries`` times, doubling from
``backoff`` seconds); what still fails is a ``ModelError``.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import replace
from typing import Any

from envace_demo.errors import ConfigError, ModelError
from envace_demo.models.base import Backend, Constraint, Generation, ModelInfo, Prompt, Sampling, StreamCallback
from envace_demo.redaction import Redactor, public_url

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 300.0  # seconds without a byte from the server before a request fails
MAX_CONCURRENT = 16  # requests in flight for one generate() call
DEFAULT_RETRIES = 3
DEFAULT_BACKOFF_S = 0.5
_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
_POLL_S = 0.05


class _Transient(ModelError):
    """A failure worth another try (see the module's docstring)."""


class OpenAIBackend(Backend):
    """``base_url``: the server's API root (e.g. ``http://127.0.0.1:8000/v1``).
    ``model``: the served model name; None picks the only model the server lists.
    ``extras``: also send ``top_k`` and ``chat_template_kwargs`` (vLLM, SGLang).
    ``extra_body``: further engine-specific fields, sent as given.
    """

    supports_constraints = False

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        extras: bool = False,
        extra_body: dict | None = None,
        max_retries: int = 0,
        retries: int = DEFAULT_RETRIES,
        backoff: float = DEFAULT_BACKOFF_S,
    ):
        from openai import OpenAI

        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"base_url={base_url!r}: expected an http(s) URL such as http://127.0.0.1:8000/v1")
        self.base_url = base_url.rstrip("/")  # for the client only: it may hold credentials
        # What records, messages and logs show: server and path, no user info, no query;
        # an error text of the HTTP client passes through the same redaction.
        self.shown_url = public_url(self.base_url)
        self._redact = Redactor(secrets=(api_key or "",), servers=((self.base_url, self.shown_url),))
        self.extras = extras
        self.extra_body = dict(extra_body or {})
        if retries < 0 or backoff < 0:
            raise ConfigError(f"retries and backoff must not be negative, got {retries} and {backoff}")
        # Our own retries, not the client's (max_retries): they also cover a stream cut
        # off midway, and their backoff ends at once when the request is cancelled.
        self.retries, self.backoff = retries, backoff
        # Servers of one's own often need no key; the client insists on one.
        self.client = OpenAI(base_url=self.base_url, api_key=api_key or "none", timeout=timeout, max_retries=max_retries)
        self.model = model or self._served_model()

    # ---- Backend --------------------------------------------------------------------

    @property
    def info(self) -> ModelInfo:
        return ModelInfo(
            model_id=self.model,
            device="remote",
            dtype="unknown",
            extra={"engine": "openai", "base_url": self.shown_url, "constrained": False},
        )

    def prompt(self, messages: list[dict], tools: list[dict] | None = None, thinking: bool = True) -> Prompt:
        """The chat as this server takes it: standard messages, no rendered text."""
        return Prompt(chat_messages(messages), tools or None, thinking)

    def generate(
        self,
        prompt: Prompt,
        sampling: Sampling,
        constraint: Constraint | None = None,  # not enforceable over the API; ignored
        on_token: StreamCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Generation:
        return self._rows([(prompt, sampling)], on_token, cancel)[0]

    def generate_many(
        self,
        prompts: list[Prompt],
        sampling: Sampling,
        constraints: list[Constraint | None] | None = None,  # not enforceable over the API
        on_token: StreamCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> list[Generation]:
        """One sample per prompt, all requests in flight at once (row i seeded as the
        base class does, so results do not depend on which engine batches)."""
        if constraints is not None and len(constraints) != len(prompts):
            raise ValueError(f"generate_many: {len(prompts)} prompts but {len(constraints)} constraints")
        rows = []
        for i, prompt in enumerate(prompts):
            seed = None if sampling.seed is None else sampling.seed + 1_000_003 * i
            rows.append((prompt, replace(sampling, seed=seed)))
        return self._rows(rows, on_token, cancel)

    def _rows(
        self,
        rows: list[tuple[Prompt, Sampling]],
        on_token: StreamCallback | None,
        cancel: threading.Event | None,
    ) -> list[Generation]:
        """Stream each (prompt, sampling) row on its own thread; row i reports as row i.
        One row failing for good stops the others."""
        rows = [(prompt, sampling.for_role(prompt.role)) for prompt, sampling in rows]
        cancel = cancel or threading.Event()
        halt = threading.Event()  # cancelled, or another row failed: stop every row
        streams: dict[int, Any] = {}
        lock = threading.Lock()

        def row(index: int) -> Generation:
            prompt, sampling = rows[index]
            stream_cb = (lambda _, text: on_token(index, text)) if on_token is not None else None
            return self._retrying_row(prompt, sampling, index, stream_cb, halt, streams, lock)

        n = len(rows)
        with ThreadPoolExecutor(max_workers=min(n, MAX_CONCURRENT), thread_name_prefix="envace-openai") as pool:
            futures = [pool.submit(row, i) for i in range(n)]
            pending = set(futures)
            while pending:
                done, pending = wait(pending, timeout=_POLL_S, return_when=FIRST_EXCEPTION)
                failed = any(f.exception() is not None for f in done)
                if not halt.is_set() and (failed or cancel.is_set()):
                    halt.set()
                    with lock:
                        open_streams = list(streams.values())
                    for stream in open_streams:
                        _close_quietly(stream)  # the row's read ends; the server stops generating
            for f in futures:
                if f.exception() is not None:
                    raise f.exception()
            return [f.result() for f in futures]

    # ---- one request ----------------------------------------------------------------

    def _body(self, prompt: Prompt, sampling: Sampling) -> dict:
        messages = chat_messages(prompt.messages)  # as given when built by prompt()
        if not prompt.thinking and not self.extras:
            messages = _no_think(messages)  # Qwen3's soft switch: a standard-field way to turn thinking off
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_tokens": sampling.max_new_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if prompt.tools:
            body["tools"] = prompt.tools
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        extra: dict[str, Any] = {}
        if self.extras:
            extra["top_k"] = sampling.top_k
            extra["chat_template_kwargs"] = {"enable_thinking": bool(prompt.thinking)}
        extra.update(self.extra_body)
        if extra:
            body["extra_body"] = extra
        return body

    def _retrying_row(
        self,
        prompt: Prompt,
        sampling: Sampling,
        slot: int,
        on_token: StreamCallback | None,
        halt: threading.Event,
        streams: dict[int, Any],
        lock: threading.Lock,
    ) -> Generation:
        attempt = 0
        while True:
            try:
                return self._stream_row(prompt, sampling, slot, on_token, halt, streams, lock)
            except _Transient as err:
                if attempt >= self.retries:
                    tries = f" (after {attempt + 1} tries)" if attempt else ""
                    raise ModelError(f"{err}{tries}") from err
                # halt.wait: a cancel (or another row's failure) ends the backoff at once.
                if halt.wait(self.backoff * 2**attempt):
                    return Generation("", 0, 0, 0.0, "cancelled")
                attempt += 1

    def _stream_row(
        self,
        prompt: Prompt,
        sampling: Sampling,
        slot: int,
        on_token: StreamCallback | None,
        halt: threading.Event,
        streams: dict[int, Any],
        lock: threading.Lock,
    ) -> Generation:
        import openai

        started = time.monotonic()
        reply = _Reply()
        if halt.is_set():
            return Generation("", 0, 0, 0.0, "cancelled")
        try:
            stream = self.client.chat.completions.create(**self._body(prompt, sampling))
            with lock:
                streams[slot] = stream
            if halt.is_set():
                _close_quietly(stream)
            with stream:
                for chunk in stream:
                    if reply.add(chunk) and on_token is not None:
                        on_token(slot, reply.text())
        except openai.APIStatusError as err:
            kind = _Transient if err.status_code in _RETRY_STATUS else ModelError
            raise kind(self._redact(f"{self.shown_url}: model {self.model!r}: {_status_message(err)}")) from err
        except Exception as err:  # transport errors of the client's HTTP library, broken streams
            if not halt.is_set():
                log.warning("request to %s failed", self.shown_url, exc_info=True)  # for the operator
                raise _Transient(self._redact(f"{self.shown_url}: the request failed ({type(err).__name__}: {err})")) from err
        finally:
            with lock:
                streams.pop(slot, None)
        if reply.finish is None and not halt.is_set():
            # Servers end every reply with a finish_reason; a stream without one was cut off.
            raise _Transient(f"{self.shown_url}: the reply stream ended before the reply did (did the server stop?)")
        text = reply.text()
        finish = "cancelled" if halt.is_set() and reply.finish is None else reply.finish_reason()
        new_tokens = reply.completion_tokens if reply.completion_tokens is not None else self.count_tokens(text)
        prompt_tokens = reply.prompt_tokens if reply.prompt_tokens is not None else self.count_tokens(
            json.dumps(prompt.messages, ensure_ascii=False)
        )
        return Generation(text, new_tokens, prompt_tokens, time.monotonic() - started, finish)

    def _served_model(self) -> str:
        import openai

        try:
            names = [m.id for m in self.client.models.list()]
        except openai.APIError as err:
            raise ModelError(
                self._redact(
                    f"{self.shown_url}: cannot list the served models ({type(err).__name__}: {err}); "
                    "is the server up? Or name the model (--model / ENVACE_MODEL)"
                )
            ) from err
        if len(names) != 1:
            raise ConfigError(
                f"{self.shown_url} serves {len(names)} models ({', '.join(names) or 'none'}); "
                "name one with --model / ENVACE_MODEL"
            )
        return names[0]


# ---- request side ---------------------------------------------------------------------


def chat_messages(messages: list[dict]) -> list[dict]:
    """The engine's messages as standard chat-completions messages.

    Reasoning goes back into the assistant content as ``<think>…</think>`` (Qwen3
    templates split it out again, and no extra field is needed); tool calls get ids
    and JSON-string arguments; each tool message answers the next pending id.
    """
    out: list[dict] = []
    pending: list[str] = []
    counter = 0
    for msg in messages:
        role = msg.get("role")
        if role == "assistant":
            content = msg.get("content") or ""
            thinking = msg.get("reasoning_content")
            if thinking:
                content = f"<think>\n{thinking}\n</think>\n\n{content}"
            item: dict[str, Any] = {"role": "assistant", "content": content}
            calls = []
            for call in msg.get("tool_calls") or []:
                fn = call.get("function", call)
                args = fn.get("arguments", {})
                counter += 1
                calls.append(
                    {
                        "id": call.get("id") or f"call_{counter}",
                        "type": "function",
                        "function": {
                            "name": fn.get("name"),
                            "arguments": args if isinstance(args, str) else json.dumps(args, ensure_ascii=False),
                        },
                    }
                )
            if calls:
                item["tool_calls"] = calls
            pending = [c["id"] for c in calls]
            out.append(item)
        elif role == "tool":
            if pending:
                call_id = pending.pop(0)
            else:
                counter += 1
                call_id = f"call_{counter}"
            content = msg.get("content")
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": msg.get("tool_call_id") or call_id,
                    "content": content if isinstance(content, str) else json.dumps(content, ensure_ascii=False),
                }
            )
        else:
            out.append({"role": role, "content": msg.get("content") or ""})
    return out


def _no_think(messages: list[dict]) -> list[dict]:
    out = [dict(m) for m in messages]
    for msg in reversed(out):
        if msg["role"] == "user":
            msg["content"] = f"{msg['content']} /no_think"
            break
    return out


# ---- response side --------------------------------------------------------------------


class _Reply:
    """Accumulates a streamed chat completion (choice 0)."""

    def __init__(self) -> None:
        self.reasoning = ""
        self.content = ""
        self.calls: dict[int, dict[str, str]] = {}
        self.finish: str | None = None
        self.completion_tokens: int | None = None
        self.prompt_tokens: int | None = None

    def add(self, chunk: Any) -> bool:
        """Take one chunk; True when the visible text changed."""
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.completion_tokens = usage.completion_tokens
            self.prompt_tokens = usage.prompt_tokens
        changed = False
        for choice in getattr(chunk, "choices", None) or []:
            if choice.index != 0:
                continue
            delta = choice.delta
            extra = getattr(delta, "model_extra", None) or {}
            # vLLM and transformers send reasoning_content; newer vLLM sends reasoning.
            reasoning = extra.get("reasoning_content") or extra.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                self.reasoning += reasoning
                changed = True
            if delta.content:
                self.content += delta.content
                changed = True
            for call in delta.tool_calls or []:
                slot = self.calls.setdefault(call.index, {"name": "", "arguments": ""})
                if call.function is not None:
                    slot["name"] += call.function.name or ""
                    slot["arguments"] += call.function.arguments or ""
                changed = True
            if choice.finish_reason:
                self.finish = choice.finish_reason
        return changed

    def text(self) -> str:
        """The reply as the model's raw text: reasoning, content, then the calls."""
        parts = []
        if self.reasoning.strip():
            parts.append(f"<think>\n{self.reasoning.strip()}\n</think>\n\n")
        parts.append(self.content)
        blocks = []
        for _, call in sorted(self.calls.items()):
            try:
                args: Any = json.loads(call["arguments"]) if call["arguments"].strip() else {}
            except ValueError:
                args = call["arguments"]  # left for the parser to report (JSON_DECODE_ERROR)
            payload = json.dumps({"name": call["name"], "arguments": args}, ensure_ascii=False)
            blocks.append(f"<tool_call>\n{payload}\n</tool_call>")
        if blocks:
            sep = "\n" if self.content and not self.content.endswith("\n") else ""
            parts.append(sep + "\n".join(blocks))
        return "".join(parts)

    def finish_reason(self) -> str:
        return "length" if self.finish == "length" else "stop"


def _status_message(err: Any) -> str:
    detail = ""
    try:
        body = err.response.json()
        detail = body.get("detail") or body.get("error", {}).get("message") or ""
    except (ValueError, AttributeError):
        detail = getattr(err, "message", "") or ""
    hint = ""
    if err.status_code == 422:
        hint = " (the server rejects a field; engine-specific fields are sent only with extras on)"
    elif err.status_code == 401:
        hint = " (set the API key: ENVACE_API_KEY)"
    return f"HTTP {err.status_code}: {str(detail)[:300]}{hint}"


def _close_quietly(stream: Any) -> None:
    """Close a stream another thread is reading. Closing the response alone waits
    for the next chunk (after a long prefill, seconds); shutting the socket down
    wakes the blocked read at once and drops the connection, so the server stops."""
    try:
        network = stream.response.extensions.get("network_stream")
        sock = network.get_extra_info("socket") if network is not None else None
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
    except (AttributeError, OSError):
        pass
    try:
        stream.close()
    except Exception:  # racing the reader thread; it stops either way
        pass
