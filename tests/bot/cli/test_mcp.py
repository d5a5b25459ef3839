"""``loopgate mcp list`` (``bot/cli/mcp.py``) in-process, against the real demo MCP server
(tests/mcp_servers/demo.py) as a subprocess: each server's state, the tools left after the
allow-list and ``exclude_tools``, the agents that get them, and exit code 1 when an enabled
server is not ready. Over HTTP and from a subprocess it is tested in tests/e2e/test_mcp.py."""

from __future__ import annotations

import io
import json
import sys
from typing import Any

from agent_core.tools import Tool
from bot.cli import mcp as mcp_cli
from bot.config import Config, parse_config
from tests.paths import TESTS

DEMO = str(TESTS / "mcp_servers" / "demo.py")
BROKEN = {"command": sys.executable, "args": ["-c", "exit(3)"], "startup_timeout": 10}


def demo(**options: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [DEMO], "startup_timeout": 20, **options}


def config_with(servers: dict[str, Any], agents: list[dict[str, Any]] | None = None) -> Config:
    data: dict[str, Any] = {"mcp": {"servers": servers}}
    if agents is not None:
        data["agents"] = {"list": agents}
    return parse_config(data, {})


async def listed(config: Config, *, as_json: bool = False) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = await mcp_cli.list_servers(config, as_json=as_json, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


async def test_no_servers_is_a_hint_and_exit_0() -> None:
    code, out, err = await listed(parse_config({}, {}))
    assert (code, err) == (0, "")
    assert out == "no MCP servers configured (add them under mcp.servers in config.yaml)\n"


async def test_a_ready_server_lists_its_allowed_tools_and_a_broken_one_fails() -> None:
    config = config_with(
        {
            "demo": demo(tools=["echo", "add", "pid"], exclude_tools=["pid"]),
            "broken": BROKEN,
            "off": demo(enabled=False),
        }
    )
    code, out, err = await listed(config)
    assert code == 1
    assert err == "loopgate: MCP server(s) not ready: broken\n"
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:4]}
    assert rows["demo"][:5] == ["demo", "stdio", "ready", "2", "main"]
    assert rows["broken"][2:4] == ["failed", "0"]
    assert rows["off"][2:4] == ["disabled", "0"]
    tools = [line.split()[0] for line in out.split("\ndemo:\n")[1].splitlines()[1:]]
    assert sorted(tools) == ["demo__add", "demo__echo"]
    assert "demo__echo  read-only  Echo the text back unchanged." in out


async def test_json_names_the_agents_and_tools_of_each_server() -> None:
    config = config_with(
        {"demo": demo(tools=["echo"]), "off": demo(enabled=False)},
        agents=[{"id": "main", "mcp_servers": ["off"]}, {"id": "helper"}],
    )
    code, out, err = await listed(config, as_json=True)
    assert (code, err) == (0, "")  # a disabled server is not a failure
    servers = {s["name"]: s for s in json.loads(out)["servers"]}
    assert servers["demo"]["state"] == "ready" and servers["demo"]["error"] is None
    assert servers["demo"]["agents"] == ["helper"]
    assert servers["demo"]["tools"] == [
        {"name": "demo__echo", "read_only": True, "description": "Echo the text back unchanged."}
    ]
    assert servers["off"] == {
        "name": "off",
        "transport": "stdio",
        "state": "disabled",
        "error": None,
        "agents": ["main", "helper"],
        "tools": [],
    }


def test_the_default_agent_gets_every_server_unless_it_is_listed() -> None:
    servers = {"x": BROKEN, "y": BROKEN}
    config = config_with(servers, agents=[{"id": "a", "mcp_servers": ["x"]}])
    assert mcp_cli._agents_of(config, "x") == ["main", "a"]
    assert mcp_cli._agents_of(config, "y") == ["main"]
    listed_default = parse_config(
        {
            "mcp": {"servers": servers},
            "agents": {"default": "a", "list": [{"id": "a", "mcp_servers": ["x"]}]},
        },
        {},
    )
    assert mcp_cli._agents_of(listed_default, "y") == []


def test_a_tool_line_keeps_descriptions_on_one_short_line() -> None:
    async def nothing(args: dict[str, Any]) -> str:
        return ""

    long = Tool("t", "word\n  " * 30, {"type": "object"}, nothing, read_only=False)
    name, flag, description = mcp_cli._tool_line(long)
    assert (name, flag) == ("  t", "")
    assert len(description) == 70 and description.endswith("…") and "\n" not in description
    short = Tool("s", "Short.", {"type": "object"}, nothing, read_only=True)
    assert mcp_cli._tool_line(short) == ("  s", "read-only", "Short.")
