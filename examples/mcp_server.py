"""A runnable MCP server that serves one of the demo's built-in environments.

    python examples/mcp_server.py                    # bank, over stdio
    python examples/mcp_server.py --env files        # another environment
    python examples/mcp_server.py --http 8765        # streamable HTTP on 127.0.0.1:8765/mcp

Point the demo at it with ``--mcp "python examples/mcp_server.py"`` (or the URL).

mcp 2 renamed FastMCP to ``MCPServer``, which derives each tool's schema from a
Python signature. Here the tools already exist as JSON Schemas
(``examples/<env>/tools.json``), so this uses the SDK's low-level ``Server`` and
serves them unchanged: the model sees exactly the schemas of the built-in
environment, and a call returns exactly what the built-in environment returns.

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
import mcp_types as types
from mcp.server.lowlevel import Server

# Run as a script from a checkout: make the package importable without installing it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envace_demo.envs.base import Environment  # noqa: E402
from envace_demo.envs.registry import ENVIRONMENTS, create  # noqa: E402

STATE_URI = "envace://state"


def _is_error(response: Any) -> bool:
    return isinstance(response, dict) and set(response) == {"error"}


def build_server(env: Environment) -> Server:
    """An MCP server whose tools are ``env``'s tools, executed against ``env``."""
    tools = [
        types.Tool(
            name=tool.original_name,
            description=tool.description,
            input_schema=tool.parameters,
            # MCP output schemas describe an object; others stay undeclared.
            output_schema=tool.response if (tool.response or {}).get("type") == "object" else None,
        )
        for tool in env.tools()
    ]

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        response = env.execute(params.name, dict(params.arguments or {}))
        text = json.dumps(response, ensure_ascii=False)
        if _is_error(response):
            # A domain failure: an MCP tool error whose text is the environment's JSON error.
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
        structured = response if isinstance(response, dict) else None
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structured_content=structured
        )

    async def list_resources(ctx, params) -> types.ListResourcesResult:
        resource = types.Resource(uri=STATE_URI, name="state", mime_type="application/json")
        return types.ListResourcesResult(resources=[resource])

    async def read_resource(ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        if str(params.uri) != STATE_URI:
            raise ValueError(f"unknown resource {params.uri}")
        text = json.dumps(env.state(), ensure_ascii=False)
        contents = types.TextResourceContents(uri=STATE_URI, mime_type="application/json", text=text)
        return types.ReadResourceResult(contents=[contents])

    return Server(
        f"envace-{env.name}",
        description=env.description,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
    )


async def _serve_stdio(server: Server) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def _serve_http(server: Server, port: int) -> None:
    import uvicorn

    # 127.0.0.1 only; the SDK adds DNS-rebinding protection for a loopback host.
    app = server.streamable_http_app(host="127.0.0.1")
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
