"""config.yaml (``bot/config/root.py``): interpolation, validation messages naming the key,
checks across keys, and reading the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import ConfigFileError, load_config, parse_config
from bot.config.root import ANTHROPIC_BASE_URL, OPENAI_BASE_URL, interpolate
from tests.paths import ROOT


def problems(data: object, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigFileError) as info:
        parse_config(data, env or {})
    return info.value.problems


class TestParse:
    def test_defaults_match_the_public_interface(self) -> None:
        c = parse_config({}, {})
        assert c.database.url == "sqlite+aiosqlite:///./data/loopgate.db"
        assert (c.server.host, c.server.port) == ("127.0.0.1", 8080)
        assert c.providers.default == "openai"
        assert c.providers.openai.base_url == "https://api.openai.com/v1"
        assert c.providers.openai.model == "gpt-4o-mini"
        assert c.agents.defaults.max_iterations == 20
        assert c.agents.defaults.context_window == 200000
        assert str(c.agents.defaults.workspace) == "data/workspaces"
        assert c.channels.telegram.api_base_url == "https://api.telegram.org"
        assert c.channels.telegram.mode == "polling"
        assert c.channels.slack.api_base_url == "https://slack.com/api/"
        assert c.channels.slack.mode == "socket"
        assert c.channels.zalo.api_base_url == "https://bot-api.zaloplatforms.com"

    def test_env_interpolation_with_and_without_default(self) -> None:
        c = parse_config(
            {
                "providers": {"openai": {"api_key": "${KEY}", "model": "${MODEL:-gpt-x}"}},
                "server": {"port": "${MYPORT:-9001}"},
            },
            {"KEY": "sk-123"},
        )
        assert c.providers.openai.api_key == "sk-123"
        assert c.providers.openai.model == "gpt-x"
        assert c.server.port == 9001

    def test_empty_default_is_allowed(self) -> None:
        c = parse_config({"providers": {"openai": {"api_key": "${OPENAI_API_KEY:-}"}}}, {})
        assert c.providers.openai.api_key == ""

    def test_secret_with_yaml_syntax_is_taken_literally(self) -> None:
        c = parse_config({"channels": {"slack": {"bot_token": "${T}"}}}, {"T": "a: b # c"})
        assert c.channels.slack.bot_token == "a: b # c"

    def test_port_env_overrides(self) -> None:
        assert parse_config({"server": {"port": 1}}, {"PORT": "5000"}).server.port == 5000

    def test_unset_variable_names_key_and_variable(self) -> None:
        assert problems({"channels": {"telegram": {"token": "${TG_TOKEN}"}}}) == [
            "channels.telegram.token: environment variable TG_TOKEN is not set"
        ]

    def test_enabled_channel_without_token(self) -> None:
        msg = problems({"channels": {"telegram": {"enabled": True}}})
        assert msg[0].startswith("channels.telegram.token: field required")

    def test_type_error_and_unknown_key_name_their_path(self) -> None:
        msgs = problems({"server": {"port": "http"}, "channels": {"slack": {"tokn": "x"}}})
        assert any(m.startswith("server.port: ") for m in msgs)
        assert "channels.slack.tokn: unknown key" in msgs

    def test_event_loop_choice(self) -> None:
        assert parse_config({}, {}).server.event_loop == "auto"
        assert (
            parse_config({"server": {"event_loop": "asyncio"}}, {}).server.event_loop == "asyncio"
        )
        assert any(
            m.startswith("server.event_loop: ")
            for m in problems({"server": {"event_loop": "trio"}})
        )

    def test_extra_openai_compatible_provider(self) -> None:
        c = parse_config(
            {
                "providers": {
                    "default": "ollama",
                    "ollama": {"base_url": "http://127.0.0.1:11434/v1", "model": "llama3"},
                }
            },
            {},
        )
        assert c.providers.all()["ollama"].model == "llama3"

    def test_unknown_default_provider(self) -> None:
        assert problems({"providers": {"default": "nope"}})[0].startswith("providers: ")


class TestFiles:
    def test_yaml_syntax_error(self, tmp_path: Path) -> None:
        path = tmp_path / "c.yaml"
        path.write_text("server: [oops\n")
        with pytest.raises(ConfigFileError) as info:
            load_config(path, {})
        assert str(path) in str(info.value) and "not valid YAML" in str(info.value)

    def test_missing_file(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigFileError, match="cannot read file"):
            load_config(tmp_path / "nope.yaml", {})

    def test_bare_off_turns_rate_limits_off(self, tmp_path: Path) -> None:
        # YAML 1.1 reads a bare `off` as false; operators write it unquoted.
        path = tmp_path / "c.yaml"
        path.write_text("channels:\n  telegram: {rate_limit: off}\n  slack: {rate_limit: off}\n")
        channels = load_config(path, {}).channels
        assert channels.telegram.rate_limit == "off" and channels.slack.rate_limit == "off"

    def test_repository_config_yaml_is_valid(self) -> None:
        root = ROOT
        config = load_config(root / "config.yaml", {})
        assert config.server.port == 8080


class TestInterpolate:
    def test_a_whole_variable_is_read_as_a_yaml_scalar(self) -> None:
        env = {"N": "42", "F": "0.5", "B": "true", "S": "[not yaml", "E": ""}
        assert interpolate("${N}", env) == 42
        assert interpolate(" ${F} ", env) == 0.5
        assert interpolate("${B}", env) is True
        assert interpolate("${S}", env) == "[not yaml"  # left as text
        assert interpolate("${E}", env) == ""
        assert interpolate("port ${N}", env) == "port 42"  # part of a text stays text
        assert interpolate("${MISSING:-7}", env) == 7

    def test_every_string_of_the_tree_and_nothing_else(self) -> None:
        tree = {"a": ["${X}", {"b": "${X}-${Y:-y}"}], "n": 3, "none": None, "literal": "$X {X}"}
        assert interpolate(tree, {"X": "x"}) == {
            "a": ["x", {"b": "x-y"}],
            "n": 3,
            "none": None,
            "literal": "$X {X}",
        }

    def test_an_unset_variable_in_a_list_names_its_index(self) -> None:
        with pytest.raises(ConfigFileError) as raised:
            interpolate({"bot": {"admins": ["ok", "${ADMIN}"]}}, {})
        assert raised.value.problems == ["bot.admins.1: environment variable ADMIN is not set"]


class TestParseMore:
    def test_nothing_is_the_defaults_and_a_list_is_an_error(self) -> None:
        assert parse_config(None, {}) == parse_config({}, {})
        with pytest.raises(ConfigFileError) as raised:
            parse_config(["server"], {}, source="c.yaml")
        assert raised.value.problems == ["(top level): expected a mapping of sections"]
        assert "c.yaml" in str(raised.value)

    def test_port_from_the_environment_must_be_a_number(self) -> None:
        assert problems({}, {"PORT": "http"}) == ["PORT: not a port number: 'http'"]

    def test_anthropic_providers_default_to_their_own_url(self) -> None:
        providers = parse_config(
            {
                "providers": {
                    "claude": {"kind": "anthropic", "model": "c"},
                    "proxy": {"kind": "anthropic", "base_url": "http://127.0.0.1:9/"},
                }
            },
            {},
        ).providers.all()
        assert providers["claude"].base_url == ANTHROPIC_BASE_URL
        assert providers["proxy"].base_url == "http://127.0.0.1:9/"
        assert providers["openai"].base_url == OPENAI_BASE_URL
        assert list(providers) == ["openai", "claude", "proxy"]

    def test_a_bad_extra_provider_names_its_key(self) -> None:
        assert problems({"providers": {"local": {"timeout": 0}}}) == [
            "providers.local.timeout: input should be greater than 0"
        ]
        assert problems({"providers": {"local": {"kind": "openai", "modle": "x"}}}) == [
            "providers.local.modle: unknown key"
        ]

    def test_agents_naming_unknown_providers_or_mcp_servers(self) -> None:
        found = problems(
            {
                "agents": {
                    "list": [
                        {"id": "a", "provider": "openai", "fallback_provider": "backup"},
                        {"id": "b", "provider": "gone", "mcp_servers": ["files"]},
                    ]
                }
            }
        )
        assert found == [
            "agents.list.0.fallback_provider: unknown provider 'backup' (defined: openai)",
            "agents.list.1.provider: unknown provider 'gone' (defined: openai)",
            "agents.list.1.mcp_servers: unknown MCP server 'files' "
            "(defined under mcp.servers: none)",
        ]

    def test_errors_of_nested_values_read_like_the_file(self) -> None:
        assert problems({"bot": {"admins": "alice"}, "server": {"host": None}}) == [
            "server.host: input should be a valid string",
            "bot.admins: input should be a valid list",
        ]


class TestDefaultPath:
    def test_no_file_here_is_the_built_in_defaults(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.chdir(tmp_path)
        assert load_config(None, {}) == parse_config({}, {})

    def test_the_config_yaml_here_is_read(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.chdir(tmp_path)
        (tmp_path / "config.yaml").write_text("server:\n  port: ${P:-7001}\n")
        assert load_config(None, {}).server.port == 7001
        assert load_config(None, {"P": "7002"}).server.port == 7002

    def test_an_empty_file_is_the_defaults(self, tmp_path: Path) -> None:
        path = tmp_path / "empty.yaml"
        path.write_text("# nothing yet\n")
        assert load_config(path, {}) == parse_config({}, {})
