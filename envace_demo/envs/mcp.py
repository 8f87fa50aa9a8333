"""Environments backed by MCP servers (a stdio command, or a streamable-HTTP URL).

The tools come from the servers' ``tools/list`` through the same schema loader as
pasted tools; a committed call is a real ``tools/call`` on the server.

The ``mcp`` client is async and the engine is not, so each environment runs its
own event loop on a background thread; every request is bounded by a timeout, so
a server that hangs or dies turns into a raised :class:`MCPServerError` (the
engine records it as an ``environment_error`` step), never a hung episode.

Servers are configured by whoever runs the app (CLI ``--mcp``, ``ENVACE_MCP``),
never by a visitor: :func:`open_configured` only opens servers from that list.

State: a stdio server is a fresh process per connection, so :meth:`reset`
(reconnect) gives a fresh state; an HTTP server keeps whatever state it keeps.
:meth:`state` reads the JSON resource ``envace://state`` where a server offers it
(``examples/mcp_server.py`` does), so success checks work over MCP too.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
import shlex
import sys
import threading
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Sequence, TextIO
from urllib.parse import urlsplit

from envace_demo.envs.base import Environment
from envace_demo.errors import ConfigError, EnvaceError, SchemaError
from envace_demo.redaction import redact_urls, safe_command
from envace_demo.schemas import Tool, load_tools

log = logging.getLogger(__name__)

STATE_URI = "envace://state"
DEFAULT_CALL_TIMEOUT = 30.0
DEFAULT_CONNECT_TIMEOUT = 30.0
MAX_RESPONSE_CHARS = 20_000  # a response goes into prompts: keep a runaway one out
_CLOSE_TIMEOUT = 10.0  # the SDK's stdio shutdown is bounded at ~6 s (close stdin, TERM, KILL)
_MAX_PAGES = 50  # tools/list pagination cap: a server that never stops paging cannot hang us


class MCPServerError(EnvaceError):
    """An MCP server could not be reached, hung, died, or broke the protocol."""


@dataclass(frozen=True)
class ServerSpec:
    """One configured server: a URL (streamable HTTP) or a command line (stdio)."""

    text: str
    url: str | None = None
    command: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        if self.url:
            parts = urlsplit(self.url)
            return f"{parts.hostname}:{parts.port}{parts.path}" if parts.port else f"{parts.hostname}{parts.path}"
        return safe_command(" ".join(self.command))  # no --token value, in either form


def parse_server(text: str) -> ServerSpec:
    """``http(s)://...`` is a streamable-HTTP endpoint; anything else a command line,
    split like a shell would (no shell runs it). A leading ``python``/``python3``
    runs with this interpreter, so a server script sees the same packages."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigError("MCP server: expected a command line or an http(s) URL, got an empty value")
    text = text.strip()
    if text.startswith(("http://", "https://")):
        parts = urlsplit(text)
        if not parts.hostname:
            raise ConfigError(f"MCP server {text!r}: the URL has no host")
        return ServerSpec(text=text, url=text)
    try:
        argv = shlex.split(text)
    except ValueError as err:
        raise ConfigError(f"MCP server {text!r}: cannot split the command line ({err})") from None
    if argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    return ServerSpec(text=text, command=tuple(argv))


def mcp_response(result: Any, max_chars: int = MAX_RESPONSE_CHARS) -> Any:
    """A ``CallToolResult`` as the JSON response the engine records.

    Structured content wins; else text that parses as a JSON object or array;
    else ``{"result": text}``. A tool error becomes the usual ``{"error": {...}}``
    (kept as is when the server already wrote one in that form).
    """
    texts = [block.text for block in result.content if getattr(block, "type", None) == "text"]
    other = [_describe_block(block) for block in result.content if getattr(block, "type", None) != "text"]
    text = "\n".join(texts)
    parsed = _json_or_none(text)
    if result.isError:
        if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
            value: Any = parsed
        else:
            value = {"error": {"code": "TOOL_ERROR", "message": (text or "the tool reported an error")[:300]}}
    elif result.structuredContent is not None:
        value = result.structuredContent
    elif isinstance(parsed, (dict, list)) and not other:
        value = parsed
    else:
        value = {"result": parsed if parsed is not None else text}
        if other:
            value["content"] = other
    encoded = json.dumps(value, ensure_ascii=False)
    if len(encoded) > max_chars:
        return {"result": encoded[:max_chars], "truncated": True, "chars": len(encoded)}
    return value


def _describe_block(block: Any) -> dict:
    # Images, audio and embedded resources: their kind and size, not their bytes.
    data = block.model_dump(by_alias=True, exclude_none=True, mode="json")
    for key in ("data", "blob"):
        if isinstance(data.get(key), str):
            data[key] = f"<{len(data[key])} base64 characters>"
    return data


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text) if text.strip() else None
    except ValueError:
        return None


class _Connection:
    """One server session, owned by a keeper task on the environment's loop."""

    def __init__(self, spec: ServerSpec, call_timeout: float, errlog: TextIO | None):
        self.spec = spec
        self.call_timeout = call_timeout
        self.errlog = errlog
        self.client: Any = None  # the mcp ClientSession, once initialized
        self.info: Any = None  # the server's Implementation (name, version)
        self.instructions: str | None = None
        self.raw_tools: list[dict] = []
        self.has_state = False
        self.failure: str | None = None  # set once the connection is unusable
        self.connected = False
        self.done = threading.Event()  # the keeper has finished, server stopped
        self._closing = asyncio.Event()  # binds to the loop on first use (Python >= 3.10)
        self.keeper: concurrent.futures.Future | None = None

    def transport(self) -> Any:
        """The transport's async context manager, yielding the session's streams first:
        streamable HTTP for a URL, else a stdio server whose stderr goes to ``errlog``."""
        if self.spec.url:
            from mcp.client.streamable_http import streamablehttp_client

            return streamablehttp_client(self.spec.url, timeout=self.call_timeout)
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        cmd, *args = self.spec.command
        params = StdioServerParameters(command=cmd, args=args)
        return stdio_client(params, errlog=_real_file(self.errlog, sys.stderr, sys.__stderr__))

    async def keep(self, ready: concurrent.futures.Future) -> None:
        """Connect, list the tools, then hold the session open until closed.

        The session is entered and left in this one task, as anyio requires; calls
        from other tasks on the same loop share it.
        """
        from mcp import ClientSession

        timeout = timedelta(seconds=self.call_timeout)
        try:
            async with self.transport() as streams, ClientSession(
                streams[0], streams[1], read_timeout_seconds=timeout
            ) as client:
                init = await client.initialize()
                self.client = client
                self.info = init.serverInfo
                self.instructions = init.instructions
                self.raw_tools = await self._list_tools(client)
                self.has_state = await self._offers_state(client, init.capabilities)
                self.connected = True
                ready.set_result(None)
                await self._closing.wait()
        except BaseException as err:  # reported to whoever waits, never raised on the loop
            if not ready.done():
                ready.set_exception(err)
            else:
                self.failure = self.failure or f"the connection ended ({_reason(err)})"
            if isinstance(err, (KeyboardInterrupt, SystemExit)):
                raise
        finally:
            self.client = None
            if self.failure is None:
                self.failure = "the connection is closed"
            self.done.set()

    def close_soon(self) -> None:
        self._closing.set()

    async def _list_tools(self, client: Any) -> list[dict]:
        from mcp.types import PaginatedRequestParams

        tools: list[dict] = []
        cursor = None
        for _ in range(_MAX_PAGES):
            page = await client.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
            tools += [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in page.tools]
            cursor = page.nextCursor
            if cursor is None:
                break
        return tools

    async def _offers_state(self, client: Any, capabilities: Any) -> bool:
        if not getattr(capabilities, "resources", None):
            return False
        try:
            listing = await client.list_resources()
        except Exception:  # a server may advertise resources yet fail to list them
            return False
        return any(str(r.uri) == STATE_URI for r in listing.resources)


def _real_file(*candidates: TextIO | None) -> TextIO:
    """The first stream backed by a file descriptor: a child process's stderr must be
    one (a captured or replaced ``sys.stderr`` often is not)."""
    for stream in candidates:
        try:
            if stream is not None:
                stream.fileno()
                return stream
        except (AttributeError, OSError, ValueError):
            continue
    return open(os.devnull, "w")  # noqa: SIM115 (lives as long as the server process)


def _reason(err: BaseException) -> str:
    inner = getattr(err, "exceptions", None)  # an exception group from a task group
    if inner:
        return _reason(inner[0])
    text = redact_urls(str(err).strip())  # an HTTP error names its URL, query token and all
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


class MCPEnvironment(Environment):
    """The tools of one or more MCP servers as one environment.

    ``servers``: command lines or URLs (see :func:`parse_server`). Tool names must
    be unique across servers. Use as a context manager, or call :meth:`close`.
    """

    name = "mcp"
    description = "Tools served by MCP servers"

    def __init__(
        self,
        servers: str | Sequence[str],
        *,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        max_response_chars: int = MAX_RESPONSE_CHARS,
        errlog: TextIO | None = None,
    ):
        texts = [servers] if isinstance(servers, str) else list(servers)
        if not texts:
            raise ConfigError("MCP environment: no server given")
        if call_timeout <= 0 or connect_timeout <= 0:
            raise ConfigError("MCP environment: call_timeout and connect_timeout must be positive")
        self.specs = [parse_server(t) for t in texts]
        self.call_timeout = call_timeout
        self.connect_timeout = connect_timeout
        self.max_response_chars = max_response_chars
        self.errlog = errlog
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._connections: list[_Connection] = []
        self._tools: list[Tool] = []
        self._routes: dict[str, _Connection] = {}
        self._hints: dict[str, dict[str, Any]] = {}  # tool name -> its MCP annotations
        self._lock = threading.Lock()  # one caller at a time drives connect/close
        self._connect()
        self.name = "mcp:" + "+".join(self._server_name(c) for c in self._connections)
        infos = [c.instructions for c in self._connections]
        self.description = "; ".join(d for d in infos if d) or "Tools served by " + ", ".join(
            s.label for s in self.specs
        )

    # ---- Environment --------------------------------------------------------------

    def tools(self) -> list[Tool]:
        return list(self._tools)

    def writes(self, name: str) -> bool | None:
        """As the server's annotations say: ``readOnlyHint`` true is a read, false a write;
        None where the tool declares neither (MCP's default, "may write", is not assumed)."""
        hint = self._hints.get(name, {}).get("readOnlyHint")
        return None if not isinstance(hint, bool) else not hint

    def additive(self, name: str) -> bool:
        """A write the server declares ``destructiveHint: false``: it only adds."""
        return self.writes(name) is True and self._hints.get(name, {}).get("destructiveHint") is False

    def execute(self, name: str, arguments: dict[str, Any]) -> Any:
        """Call the tool on its server. A tool's own failure is a JSON error response;
        a server that is gone, hangs or breaks the protocol raises MCPServerError."""
        if self._loop is None:
            raise MCPServerError(f"MCP environment {self.name}: closed")
        conn = self._routes.get(name)
        if conn is None:
            known = ", ".join(sorted(self._routes))
            return {"error": {"code": "TOOL_NOT_AVAILABLE", "message": f"no tool named {name!r}; available: {known}"}}
        if conn.failure is not None or conn.client is None:
            raise MCPServerError(f"MCP server {conn.spec.label}: {conn.failure or 'not connected'}")
        try:
            result = self._run(self._call(conn, name, arguments), self.call_timeout + 5)
        except MCPServerError:
            raise
        except TimeoutError:
            conn.failure = f"no answer to {name} within {self.call_timeout:g} s"
            raise MCPServerError(f"MCP server {conn.spec.label}: {conn.failure}") from None
        except Exception as err:
            log.warning("MCP server %s: %s failed", conn.spec.label, name, exc_info=True)  # for the operator
            conn.failure = f"{name} failed: {_reason(err)}"
            raise MCPServerError(f"MCP server {conn.spec.label}: {conn.failure}") from err
        return mcp_response(result, self.max_response_chars)

    def reset(self) -> None:
        """Reconnect: a stdio server starts over as a fresh process."""
        self.close()
        self._connect()

    def state(self) -> dict[str, Any]:
        """The servers' ``envace://state`` resources (one server: its state itself;
        several: by server). Never raises: the engine reads it after a failure too."""
        states: dict[str, Any] = {}
        for conn in self._connections:
            if not conn.has_state:
                continue
            try:
                if conn.failure is not None or conn.client is None:
                    raise MCPServerError(conn.failure or "not connected")
                states[conn.spec.label] = self._run(self._read_state(conn), self.call_timeout + 5)
            except Exception as err:
                log.warning("MCP server %s: state unavailable", conn.spec.label, exc_info=True)
                states[conn.spec.label] = {"error": {"code": "STATE_UNAVAILABLE", "message": _reason(err)}}
        if len(self._connections) == 1:
            return next(iter(states.values()), {})
        return states

    # ---- lifecycle ------------------------------------------------------------------

    def close(self) -> None:
        """Disconnect (a stdio server process is stopped); safe to call twice."""
        with self._lock:
            loop, thread, conns = self._loop, self._thread, self._connections
            self._loop, self._thread, self._connections = None, None, []
            self._routes = {}
        if loop is None:
            return
        for conn in conns:
            loop.call_soon_threadsafe(conn.close_soon)
        for conn in conns:
            if conn.keeper is None:
                continue
            # A connected session winds down on its own (the SDK stops a stdio server
            # in a bounded ~6 s); one still connecting is cancelled, which does the same.
            if not conn.done.wait(_CLOSE_TIMEOUT if conn.connected else 0.2):
                conn.keeper.cancel()
                conn.done.wait(_CLOSE_TIMEOUT)
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(_CLOSE_TIMEOUT)
        if thread is None or not thread.is_alive():
            loop.close()

    def __enter__(self) -> "MCPEnvironment":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- internals ------------------------------------------------------------------

    def _connect(self) -> None:
        with self._lock:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="envace-mcp", daemon=True)
            thread.start()
            self._loop, self._thread = loop, thread
            self._connections = [_Connection(spec, self.call_timeout, self.errlog) for spec in self.specs]
        try:
            for conn in self._connections:
                self._open(conn)
            self._tools, self._routes = self._import_tools(self._connections)
        except BaseException:
            self.close()
            raise

    def _open(self, conn: _Connection) -> None:
        assert self._loop is not None
        ready: concurrent.futures.Future = concurrent.futures.Future()  # thread-safe
        conn.keeper = asyncio.run_coroutine_threadsafe(conn.keep(ready), self._loop)
        try:
            ready.result(self.connect_timeout)
        except concurrent.futures.TimeoutError:
            raise MCPServerError(
                f"MCP server {conn.spec.label}: no answer within {self.connect_timeout:g} s of starting"
            ) from None
        except OSError as err:
            raise MCPServerError(f"MCP server {conn.spec.label}: cannot start or reach it ({_reason(err)})") from None
        except Exception as err:
            log.warning("MCP server %s: cannot connect", conn.spec.label, exc_info=True)
            raise MCPServerError(f"MCP server {conn.spec.label}: cannot connect ({_reason(err)})") from None

    def _import_tools(self, conns: list[_Connection]) -> tuple[list[Tool], dict[str, _Connection]]:
        tools: list[Tool] = []
        routes: dict[str, _Connection] = {}
        for conn in conns:
            for raw in conn.raw_tools:
                if isinstance(raw, dict) and isinstance(raw.get("annotations"), dict):
                    self._hints[str(raw.get("name"))] = raw["annotations"]
            try:
                loaded = load_tools(conn.raw_tools) if conn.raw_tools else []
            except SchemaError as err:
                raise MCPServerError(f"MCP server {conn.spec.label}: its tool schemas are invalid: {err}") from None
            for tool in loaded:
                other = routes.get(tool.original_name)
                if other is not None:
                    raise ConfigError(
                        f"MCP servers {other.spec.label!r} and {conn.spec.label!r} both offer a tool "
                        f"named {tool.original_name!r}; configure one of them"
                    )
                routes[tool.original_name] = conn
                tools.append(tool)
        if not tools:
            raise MCPServerError("MCP environment: the servers offer no tools")
        try:
            load_tools([t.to_openai() for t in tools])  # API-safe names must not collide either
        except SchemaError as err:
            raise ConfigError(f"MCP servers: tool names collide once made API-safe ({err})") from None
        return tools, routes

    def _run(self, coro: Any, timeout: float) -> Any:
        loop = self._loop
        if loop is None:
            coro.close()
            raise MCPServerError("MCP environment: closed")
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError from None

    async def _call(self, conn: _Connection, name: str, arguments: dict[str, Any]) -> Any:
        call = conn.client.call_tool(name, arguments, read_timeout_seconds=timedelta(seconds=self.call_timeout))
        return await asyncio.wait_for(call, self.call_timeout)

    async def _read_state(self, conn: _Connection) -> Any:
        result = await asyncio.wait_for(conn.client.read_resource(STATE_URI), self.call_timeout)
        text = "".join(getattr(c, "text", "") for c in result.contents)
        value = _json_or_none(text)
        if not isinstance(value, dict):
            raise MCPServerError(f"{STATE_URI} is not a JSON object")
        return value

    @staticmethod
    def _server_name(conn: _Connection) -> str:
        return getattr(conn.info, "name", None) or conn.spec.label


def configured_servers(servers: Sequence[str]) -> dict[str, str]:
    """Label -> server text, for the operator's configured servers (for pickers)."""
    return {parse_server(text).label: text for text in servers}


def open_configured(servers: Sequence[str], label: str, **options: Any) -> MCPEnvironment:
    """Open the configured server called ``label``. A visitor may pick among the
    operator's servers; anything else is refused, so no endpoint comes from a visitor."""
    choices = configured_servers(servers)
    if label not in choices:
        raise ConfigError(
            f"no configured MCP server named {label!r}; configured: {', '.join(choices) or 'none'}"
        )
    return MCPEnvironment(choices[label], **options)
