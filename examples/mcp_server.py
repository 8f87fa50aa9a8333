"""A runnable MCP server that serves one of the demo's built-in environments.

    python examples/mcp_server.py                    # bank, over stdio
    python examples/mcp_server.py --env files        # another environment
    python examples/mcp_server.py --http 8765        # streamable HTTP on 127.0.0.1:8765/mcp

Point the demo at it with ``--mcp "python examples/mcp_server.py"`` (or the URL).

FastMCP derives each tool's schema from a Python signature. Here the tools already
exist as JSON Schemas (``examples/<env>/tools.json``), so this uses the SDK's
low-level ``Server`` (mcp 1.x) and serves them unchanged: the model sees exactly the
schemas of the built-in environment, and a call returns exactly what the built-in
environment returns.

The state lives in this process (one stdio client = one fresh state). Besides the
tools, the server offers the environment's state as the JSON resource
``envace://state``, which the demo reads for its success checks.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.helper_types import ReadResourceContents

# Run as a script from a checkout: make the package importable without installing it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envace_demo.envs.base import Environment  # noqa: E402
from envace_demo.envs.registry import ENVIRONMENTS, create  # noqa: E402

STATE_URI = "envace://state"


def _is_error(response: Any) -> bool:
    return isinstance(response, dict) and set(response) == {"error"}


def _annotations(env: Environment, name: str) -> types.ToolAnnotations | None:
    """What the environment declares of a tool: whether it only reads, and whether a write
    only adds (a client can then tell a question's reads from writes nobody asked for)."""
    writes = env.writes(name)
    if writes is None:
        return None
    return types.ToolAnnotations(readOnlyHint=not writes, destructiveHint=None if not writes else not env.additive(name))


def build_server(env: Environment) -> Server:
    """An MCP server whose tools are ``env``'s tools, executed against ``env``."""
    tools = [
        types.Tool(
            name=tool.original_name,
            description=tool.description,
            inputSchema=tool.parameters,
            # MCP output schemas describe an object; others stay undeclared.
            outputSchema=tool.response if (tool.response or {}).get("type") == "object" else None,
            annotations=_annotations(env, tool.original_name),
        )
        for tool in env.tools()
    ]
    server: Server = Server(f"envace-{env.name}", instructions=env.description)

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return tools

    # The environment checks arguments itself and answers with its own JSON error, exactly
    # as the built-in one does; the SDK's check would answer with its own text instead.
    @server.call_tool(validate_input=False)
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        response = env.execute(name, dict(arguments or {}))
        text = json.dumps(response, ensure_ascii=False)
        if _is_error(response):
            # A domain failure: an MCP tool error whose text is the environment's JSON error.
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)], isError=True)
        structured = response if isinstance(response, dict) else None
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structuredContent=structured
        )

    @server.list_resources()
    async def list_resources() -> list[types.Resource]:
        return [types.Resource(uri=STATE_URI, name="state", mimeType="application/json")]

    @server.read_resource()
    async def read_resource(uri: Any) -> list[ReadResourceContents]:
        if str(uri) != STATE_URI:
            raise ValueError(f"unknown resource {uri}")
        text = json.dumps(env.state(), ensure_ascii=False)
        return [ReadResourceContents(content=text, mime_type="application/json")]

    return server


async def _serve_stdio(server: Server) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


class _Endpoint:
    """The session manager as a raw ASGI endpoint: starlette wraps a plain function
    as request -> response, which a streaming MCP session is not."""

    def __init__(self, manager: Any):
        self.manager = manager

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.manager.handle_request(scope, receive, send)


def _serve_http(server: Server, port: int) -> None:
    import uvicorn
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.routing import Route

    # 127.0.0.1 only, with DNS-rebinding protection (what FastMCP sets up for a loopback host).
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*"],
    )
    manager = StreamableHTTPSessionManager(app=server, security_settings=security)
    app = Starlette(routes=[Route("/mcp", endpoint=_Endpoint(manager))], lifespan=lambda _: manager.run())
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="bank", choices=sorted(ENVIRONMENTS), help="environment to serve")
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT/mcp")
    args = parser.parse_args(argv)
    server = build_server(create(args.env))
    if args.http is not None:
        _serve_http(server, args.http)
    else:
        anyio.run(_serve_stdio, server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
