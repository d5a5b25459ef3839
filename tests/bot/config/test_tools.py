"""config.yaml: ``mcp.servers``, ``skills.paths``, ``agents.<id>.mcp_servers`` and the
``agents.<id>`` form of an agent entry; errors name the bad key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.config import ConfigFileError, parse_config
from bot.redaction import secrets_of


def problems(data: dict[str, Any], env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigFileError) as info:
        parse_config(data, env or {})
    return str(info.value)


class TestMcpServers:
    def test_stdio_and_http_servers(self) -> None:
        config = parse_config(
            {
                "mcp": {
                    "servers": {
                        "files": {
                            "command": "npx",
                            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"],
                            "env": {"DEBUG": "1"},
                            "tools": ["read_file"],
                            "timeout": "30s",
                        },
                        "tracker": {
                            "url": "https://mcp.example.com/mcp",
                            "headers": {"Authorization": "Bearer ${TRACKER_TOKEN}"},
                            "exclude_tools": ["delete_issue"],
                        },
                        "legacy": {"url": "http://127.0.0.1:9000/sse", "transport": "sse"},
                        "off": {"command": "x", "enabled": False},
                    },
                    "startup": "lazy",
                }
            },
            {"TRACKER_TOKEN": "tok-secret-123"},
        )
        specs = {s.name: s for s in config.mcp.specs()}
        assert specs["files"].kind == "stdio" and specs["files"].timeout == 30.0
        assert specs["files"].tools == ("read_file",)
        assert specs["tracker"].kind == "streamable_http"
        assert specs["tracker"].headers == {"Authorization": "Bearer tok-secret-123"}
        assert specs["tracker"].exclude_tools == ("delete_issue",)
        assert specs["legacy"].kind == "sse"
        assert not specs["off"].enabled
        assert config.mcp.enabled == ["files", "tracker", "legacy"]
        assert config.mcp.startup == "lazy"
        assert "Bearer tok-secret-123" in secrets_of(config)  # masked in logs

    def test_a_server_needs_exactly_one_of_command_and_url(self) -> None:
        text = problems({"mcp": {"servers": {"x": {"command": "a", "url": "http://h/mcp"}}}})
        assert "mcp.servers.x: set either command" in text
        assert "mcp.servers.y: set either command" in problems({"mcp": {"servers": {"y": {}}}})

    def test_keys_of_the_other_transport_are_refused(self) -> None:
        text = problems({"mcp": {"servers": {"x": {"url": "http://h/mcp", "args": ["a"]}}}})
        assert "mcp.servers.x: args: only for stdio servers" in text
        text = problems({"mcp": {"servers": {"x": {"command": "a", "headers": {"k": "v"}}}}})
        assert "headers and transport are only for HTTP servers" in text

    def test_bad_names_urls_and_timeouts(self) -> None:
        assert "'__' separates" in problems({"mcp": {"servers": {"a__b": {"command": "x"}}}})
        assert "mcp.servers.bad name" in problems(
            {"mcp": {"servers": {"bad name": {"command": "x"}}}}
        )
        assert "mcp.servers.x.url" in problems({"mcp": {"servers": {"x": {"url": "ftp://h"}}}})
        assert "mcp.servers.x.timeout" in problems(
            {"mcp": {"servers": {"x": {"command": "a", "timeout": 0}}}}
        )
        assert "mcp.servers.x.tool" in problems(
            {"mcp": {"servers": {"x": {"command": "a", "tool": ["typo"]}}}}
        )

    def test_unset_variable_names_the_key(self) -> None:
        data = {"mcp": {"servers": {"x": {"url": "http://h", "headers": {"A": "${NOPE}"}}}}}
        assert "mcp.servers.x.headers.A: environment variable NOPE is not set" in problems(data)


class TestAgentsPickServers:
    def test_agents_by_id_form_with_mcp_servers(self) -> None:
        config = parse_config(
            {
                "mcp": {"servers": {"files": {"command": "a"}, "web": {"command": "b"}}},
                "agents": {
                    "defaults": {"mcp_inline_max": 10},
                    "list": [{"id": "main"}],
                    "support": {"mcp_servers": ["files"], "model": "m2"},
                },
            },
            {},
        )
        agents = {a.id: a for a in config.agents.list}
        assert agents["main"].mcp_servers is None  # default: every enabled server
        assert agents["support"].mcp_servers == ["files"]
        assert agents["support"].model == "m2"
        assert config.agents.defaults.mcp_inline_max == 10

    def test_inline_max_default_is_the_specs(self) -> None:
        assert parse_config({}, {}).agents.defaults.mcp_inline_max == 40

    def test_unknown_server_is_named(self) -> None:
        text = problems(
            {
                "mcp": {"servers": {"files": {"command": "a"}}},
                "agents": {"main": {"mcp_servers": ["fiels"]}},
            }
        )
        assert "agents.list.0.mcp_servers: unknown MCP server 'fiels'" in text
        assert "files" in text

    def test_an_agent_defined_twice_is_refused(self) -> None:
        text = problems({"agents": {"list": [{"id": "main"}], "main": {"model": "x"}}})
        assert "agent 'main' is defined both" in text

    def test_typo_in_an_agent_by_id_is_still_an_unknown_key(self) -> None:
        assert "mcp_server" in problems({"agents": {"main": {"mcp_server": ["x"]}}})


def test_skills_paths(tmp_path: Path) -> None:
    config = parse_config({"skills": {"paths": [str(tmp_path)]}}, {})
    assert config.skills.paths == [tmp_path]
    assert parse_config({}, {}).skills.paths == []
