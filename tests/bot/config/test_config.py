"""config.yaml: interpolation, validation messages naming the key, the CLI's check-config."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bot.config import ConfigFileError, load_config, parse_config
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


class TestCheckConfigCommand:
    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "bot", "check-config", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )

    def test_invalid_file_exits_non_zero_naming_the_key(self, tmp_path: Path) -> None:
        path = tmp_path / "bad.yaml"
        path.write_text("channels:\n  telegram:\n    enabled: true\n")
        done = self.run("--config", str(path))
        assert done.returncode == 2
        assert "channels.telegram.token: field required" in done.stderr

    def test_valid_file_exits_zero(self, tmp_path: Path) -> None:
        path = tmp_path / "ok.yaml"
        path.write_text("server:\n  port: 9999\n")
        done = self.run("--config", str(path))
        assert done.returncode == 0, done.stderr
        assert "configuration OK" in done.stdout
