"""``loopgate mcp list``: each configured MCP server's state and the tools it offers.

The command starts every enabled server itself (as ``loopgate serve`` does at start-up, lazy
or not), lists what each one offers after the allow-list and ``exclude_tools``, and stops them.
The exit code is 1 when an enabled server could not be started, so deploy scripts can check a
configuration before they roll it out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import TYPE_CHECKING, Any, TextIO

from bot.cli.links import print_table, streams
from bot.config import Config

if TYPE_CHECKING:  # the MCP SDK is imported on use: `loopgate --help` stays quick
    from agent_core.mcp import ServerStatus
    from agent_core.tools import Tool

_DESCRIPTION_CHARS = 70


def _agents_of(config: Config, server: str) -> list[str]:
    """Agents that get the server's tools (an agent without ``mcp_servers`` gets all)."""
    agents = config.agents.list or []
    ids = [a.id for a in agents if a.mcp_servers is None or server in a.mcp_servers]
    if not any(a.id == config.agents.default for a in agents):
        ids.insert(0, config.agents.default)  # the default agent, defined by defaults only
    return ids


def _tool_line(tool: Tool) -> tuple[str, str, str]:
    description = " ".join(tool.description.split())
    if len(description) > _DESCRIPTION_CHARS:
        description = description[: _DESCRIPTION_CHARS - 1] + "…"
    return (f"  {tool.name}", "read-only" if tool.read_only else "", description)


def _as_json(config: Config, statuses: list[ServerStatus], tools: dict[str, list[Tool]]) -> str:
    servers: list[dict[str, Any]] = [
        {
            "name": s.name,
            "transport": s.transport,
            "state": s.state.value,
            "error": s.error,
            "agents": _agents_of(config, s.name),
            "tools": [
                {"name": t.name, "read_only": t.read_only, "description": t.description}
                for t in tools.get(s.name, [])
            ],
        }
        for s in statuses
    ]
    return json.dumps({"servers": servers}, ensure_ascii=False, indent=2)


async def list_servers(
    config: Config, *, as_json: bool = False, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    from agent_core.mcp import McpManager, ServerState

    out, err = streams(out, err)
    if not config.mcp.servers:
        print("no MCP servers configured (add them under mcp.servers in config.yaml)", file=out)
        return 0
    manager = McpManager(config.mcp.specs())
    try:
        await manager.start()
        statuses = manager.statuses()
        tools: dict[str, list[Tool]] = {}
        for status in statuses:
            if status.state is ServerState.READY:
                tools[status.name] = await manager.tools([status.name])
    finally:
        await manager.aclose()
    if as_json:
        print(_as_json(config, statuses, tools), file=out)
    else:
        rows = [("SERVER", "TRANSPORT", "STATE", "TOOLS", "AGENTS", "ERROR")]
        rows += [
            (
                s.name,
                s.transport,
                s.state.value,
                str(len(tools.get(s.name, []))),
                ",".join(_agents_of(config, s.name)) or "-",
                (s.error or "")[:120],
            )
            for s in statuses
        ]
        print_table(rows, out)
        for name, offered in tools.items():
            print(f"\n{name}:", file=out)
            print_table([("  TOOL", "", "DESCRIPTION"), *map(_tool_line, offered)], out)
    failed = [s.name for s in statuses if s.state not in (ServerState.READY, ServerState.DISABLED)]
    if failed:
        print(f"loopgate: MCP server(s) not ready: {', '.join(failed)}", file=err)
        return 1
    return 0


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """``loopgate mcp ...`` on the ``loopgate`` subcommand parser ``sub``."""
    mcp = sub.add_parser("mcp", parents=[common], help="MCP servers and their tools")
    mcp_sub = mcp.add_subparsers(dest="mcp_command", required=True)
    listing = mcp_sub.add_parser(
        "list",
        parents=[common],
        help="start each configured server, show its state and tools, stop it",
    )
    listing.add_argument("--json", action="store_true", help="print JSON instead of tables")


def run(config: Config, args: argparse.Namespace) -> int:
    return asyncio.run(list_servers(config, as_json=args.json))
