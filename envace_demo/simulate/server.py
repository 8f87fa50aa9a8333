"""The simulated world as an MCP server: the ``mcp`` SDK's low-level ``Server`` with the
engine's rehearsal behind every tool (``envs/mcp.py`` is the SDK's client with the engine
in front).

The tools are listed as the schema declares them (API-safe names; a declared object
response becomes the tool's ``outputSchema``). An answer that is a result comes back as
JSON text and structured content; an error, whether the contract's ``error_tool_call``
(validation), the tool's own domain failure or a rehearsal that failed twice, comes back
as an MCP tool error (``isError``) whose text is ``{"error": {"code", "message", ...}}``.

Each MCP session (one stdio client, one streamable-HTTP session) keeps its own history;
the cache is shared (``world.py``).
"""

from __future__ import annotations

import io
import json
import logging
import os
import sys
import weakref
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server

from envace_demo.errors import ConfigError, EnvaceError
from envace_demo.schemas import Tool
from envace_demo.simulate.pairs import Pair
from envace_demo.simulate.rehearse import Answer
from envace_demo.simulate.world import SimulatedWorld

log = logging.getLogger(__name__)

NAME = "envace-simulate"
INSTRUCTIONS = (
    "Simulated tools: no real system is behind them. Every answer is a language model's rehearsal of "
    "what the tool would return, consistent within this session; identical calls return identical answers."
)
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def mcp_tools(tools: list[Tool]) -> list[types.Tool]:
    """The schema's tools as MCP tools; a declared object response is the output schema
    (MCP output schemas describe objects; other declared shapes are only checked here)."""
    return [
        types.Tool(
            name=tool.name,
            description=tool.description,
            inputSchema=tool.parameters,
            outputSchema=tool.response if (tool.response or {}).get("type") == "object" else None,
        )
        for tool in tools
    ]


def error_payload(response: dict) -> dict:
    """An error answer as MCP error text: ``{"error": {...}}``, the contract's
    ``error_tool_call`` moved under ``error`` with its code, message and details."""
    if "error_tool_call" in response:
        return {"error": response["error_tool_call"]}
    return response


def to_result(answer: Answer) -> types.CallToolResult:
    """One answer as the MCP result."""
    response = answer.response
    if answer.is_error:
        text = json.dumps(error_payload(response), ensure_ascii=False)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], isError=True)
    text = json.dumps(response, ensure_ascii=False)
    structured = response if isinstance(response, dict) else None
    content = [types.TextContent(type="text", text=text)]
    return types.CallToolResult(content=content, structuredContent=structured)


def _failure(code: str, message: str) -> types.CallToolResult:
    text = json.dumps({"error": {"code": code, "message": message}}, ensure_ascii=False)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], isError=True)


def build_server(world: SimulatedWorld) -> Server:
    """An MCP server answering every call of ``world.tools`` from ``world``."""
    server: Server = Server(NAME, instructions=INSTRUCTIONS)
    listed = mcp_tools(world.tools)
    histories: weakref.WeakKeyDictionary[Any, list[Pair]] = weakref.WeakKeyDictionary()

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return listed

    # The world checks arguments itself and answers with the contract's error (the SDK's
    # own check would answer with its text instead); it also checks the output's shape.
    @server.call_tool(validate_input=False)
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        history = histories.setdefault(server.request_context.session, [])
        try:
            answer = await anyio.to_thread.run_sync(world.answer, history, name, arguments)
        except EnvaceError as err:  # the model failed to load or to run
            log.warning("%s: %s", name, err)
            return _failure("SIMULATOR_ERROR", str(err))
        log.info(
            "%s %s -> %s%s", name, json.dumps(arguments, ensure_ascii=False)[:200], answer.source,
            f" ({answer.attempts} attempt(s), {answer.seconds:.1f} s)" if answer.attempts else "",
        )
        return to_result(answer)

    return server


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as (host, port)."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--http {text!r}: expected HOST:PORT, e.g. 127.0.0.1:8765")
    return host, int(port)


def serve_stdio(world: SimulatedWorld) -> None:
    """Serve over stdin/stdout until the client closes stdin. The protocol keeps the real
    stdout; everything else written there (a library's print, a progress bar) goes to stderr."""
    from mcp.server.stdio import stdio_server

    sys.stdout.flush()
    protocol = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    out = anyio.wrap_file(io.TextIOWrapper(os.fdopen(protocol, "wb"), encoding="utf-8"))
    server = build_server(world)

    async def run() -> None:
        async with stdio_server(stdout=out) as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(run)


class _Endpoint:
    """The session manager as a raw ASGI endpoint (a streaming MCP session is not a
    request -> response function, which is what starlette makes of a plain one)."""

    def __init__(self, manager: Any):
        self.manager = manager

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.manager.handle_request(scope, receive, send)


def http_app(world: SimulatedWorld, host: str) -> Any:
    """The streamable-HTTP ASGI app, at ``/mcp``. On a loopback host it refuses other Host
    and Origin headers (DNS rebinding), as FastMCP does; elsewhere the operator chose to expose it."""
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.routing import Route

    security = None
    if host in _LOOPBACK:
        names = ["127.0.0.1", "localhost", "[::1]"]
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[f"{n}:*" for n in names],
            allowed_origins=[f"http://{n}:*" for n in names],
        )
    manager = StreamableHTTPSessionManager(app=build_server(world), security_settings=security)
    return Starlette(routes=[Route("/mcp", endpoint=_Endpoint(manager))], lifespan=lambda _: manager.run())


def serve_http(world: SimulatedWorld, host: str, port: int) -> None:
    """Serve streamable HTTP at ``http://HOST:PORT/mcp`` until interrupted."""
    import uvicorn

    shown = f"[{host}]" if ":" in host else host
    print(f"simulated MCP server: http://{shown}:{port}/mcp", file=sys.stderr, flush=True)
    uvicorn.run(http_app(world, host), host=host, port=port, log_level="warning")

