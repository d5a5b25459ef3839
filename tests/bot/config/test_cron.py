"""``cron.*``, ``agents.<id>.timezone`` and ``agents.<id>.heartbeat``: defaults, durations, and
errors that name the bad key."""

from __future__ import annotations

from datetime import time

import pytest

from bot.config import ConfigFileError, parse_config
from bot.config.cron import active_hours


def test_defaults() -> None:
    cron = parse_config({}, {}).cron
    assert (cron.timezone, cron.max_jobs_per_user, cron.min_interval) == ("UTC", 20, 60.0)
    assert (cron.history_turns, cron.catch_up) == (0, 3600.0)
    assert parse_config({}, {}).agents.list == []  # no heartbeat unless configured


def test_durations_and_zone() -> None:
    cron = parse_config(
        {"cron": {"timezone": "Europe/Berlin", "min_interval": "5m", "catch_up": "2h"}}, {}
    ).cron
    assert (cron.timezone, cron.min_interval, cron.catch_up) == ("Europe/Berlin", 300.0, 7200.0)


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"cron": {"timezone": "Mars/Olympus"}}, r"cron\.timezone"),
        ({"cron": {"max_jobs_per_user": 0}}, r"cron\.max_jobs_per_user"),
        ({"cron": {"min_interval": "soon"}}, r"cron\.min_interval"),
        ({"cron": {"history_turns": -1}}, r"cron\.history_turns"),
        ({"cron": {"catch_up": "-1h"}}, r"cron\.catch_up"),
        ({"cron": {"timezon": "UTC"}}, r"cron\.timezon"),
        ({"agents": {"main": {"timezone": "Nowhere"}}}, r"agents\.list\.0\.timezone"),
        (
            {"agents": {"main": {"heartbeat": {"every": "30m", "chat": "123"}}}},
            r"agents\.list\.0\.heartbeat\.chat",
        ),
        (
            {"agents": {"main": {"heartbeat": {"chat": "telegram:1", "active_hours": "8-22"}}}},
            r"agents\.list\.0\.heartbeat\.active_hours",
        ),
        (
            {"agents": {"main": {"heartbeat": {"chat": "telegram:1", "every": 0}}}},
            r"agents\.list\.0\.heartbeat\.every",
        ),
    ],
)
def test_bad_values_name_the_key(data: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigFileError, match=key):
        parse_config(data, {})


def test_heartbeat() -> None:
    config = parse_config(
        {
            "agents": {
                "main": {
                    "timezone": "Asia/Tokyo",
                    "heartbeat": {
                        "every": "30m",
                        "chat": "telegram:42",
                        "active_hours": "08:00-22:00",
                    },
                }
            },
            "channels": {"telegram": {"enabled": True, "token": "123:abc"}},
        },
        {},
    )
    [agent] = config.agents.list
    assert agent.timezone == "Asia/Tokyo"
    assert agent.heartbeat is not None
    assert (agent.heartbeat.every, agent.heartbeat.chat) == (1800.0, "telegram:42")
    assert "NO_REPLY" in agent.heartbeat.message


def test_a_heartbeat_in_a_channel_that_is_not_enabled_names_its_key() -> None:
    beat = {"every": "30m", "chat": "slack:C1"}
    with pytest.raises(ConfigFileError) as caught:
        parse_config(
            {
                "agents": {"main": {"heartbeat": beat}},
                "channels": {"telegram": {"enabled": True, "token": "123:abc"}},
            },
            {},
        )
    assert caught.value.problems == [
        "agents.list.0.heartbeat.chat: channel 'slack' is not enabled (enabled: web, telegram)"
    ]


def test_active_hours() -> None:
    assert active_hours("08:00-22:00") == (time(8), time(22))
    assert active_hours(" 22:30 - 6:00 ") == (time(22, 30), time(6))
    for bad in ("8-22", "25:00-26:00", "08:00"):
        with pytest.raises(ValueError, match="active_hours"):
            active_hours(bad)
