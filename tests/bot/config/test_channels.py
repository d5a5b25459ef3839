"""bot/config/channels.py: the channels section of config.yaml (Slack and Telegram keys)."""

from __future__ import annotations

import pytest

from bot.config import ConfigFileError, parse_config


class TestConfig:
    def test_defaults(self) -> None:
        slack = parse_config({}, {}).channels.slack
        assert slack.reply_in_thread is True and slack.assistant_status is True
        assert slack.rate_limit != "off"
        assert (slack.rate_limit.per_second, slack.rate_limit.burst) == (1.0, 4)

    @pytest.mark.parametrize("value", [False, "off"])
    def test_rate_limit_off(self, value: object) -> None:
        config = parse_config({"channels": {"slack": {"rate_limit": value}}}, {})
        assert config.channels.slack.rate_limit == "off"

    def test_bad_rate_limit_names_the_key(self) -> None:
        with pytest.raises(ConfigFileError, match=r"channels\.slack\.rate_limit"):
            parse_config({"channels": {"slack": {"rate_limit": {"per_second": 0}}}}, {})

    def test_http_mode_requires_the_signing_secret(self) -> None:
        data = {"channels": {"slack": {"enabled": True, "bot_token": "x", "mode": "http"}}}
        with pytest.raises(ConfigFileError, match=r"channels\.slack\.signing_secret"):
            parse_config(data, {})


def test_config_keys() -> None:
    config = parse_config(
        {"channels": {"telegram": {"enabled": True, "token": "t", "rate_limit": False}}}, {}
    )
    assert config.channels.telegram.rate_limit == "off"
    default = parse_config({}, {}).channels.telegram
    assert default.allowed_updates == ["message"]
    assert default.rate_limit != "off" and default.rate_limit.per_group_per_minute == 20
