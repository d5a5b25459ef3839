"""Which limits a run counts against, and what the user is told (``bot/usage/limits.py``)."""

from __future__ import annotations

from datetime import UTC, datetime

from agent_core import RunRequest
from bot.config import parse_config
from bot.usage.limits import scopes_of

NOW = datetime(2026, 12, 31, 22, 30, tzinfo=UTC)


def request(user: str = "telegram:42", agent: str = "main") -> RunRequest:
    return RunRequest("s", "hi", user, agent_id=agent, channel="telegram")


def test_no_limit_configured_means_nothing_to_check() -> None:
    assert scopes_of(parse_config({}, {}), request(), NOW) == []


def test_a_user_quota_is_per_user_and_channel_per_utc_day() -> None:
    config = parse_config({"usage": {"user_daily_tokens": 1000, "user_daily_usd": 0.5}}, {})
    [scope] = scopes_of(config, request(), NOW)
    assert scope.key == "user:telegram:42:2026-12-31"
    assert (scope.token_limit, scope.usd_limit, scope.user_id) == (1000, 0.5, "telegram:42")
    assert scope.resets_at == datetime(2027, 1, 1, tzinfo=UTC)
    assert scope.reason("tokens") == "usage.user_daily_tokens"
    assert scope.reason("usd") == "usage.user_daily_usd"
    notice = scope.notice("tokens", NOW)
    assert "daily usage limit here (1,000 tokens" in notice
    assert "It resets at 00:00 UTC on 2027-01-01 (in 1 h 30 min)." in notice


def test_admins_are_exempt_from_user_quotas_but_not_from_agent_budgets() -> None:
    config = parse_config(
        {
            "usage": {"user_daily_tokens": 1000},
            "bot": {"admins": ["42"]},
            "agents": {"main": {"budget": {"daily_usd": 5}}},
        },
        {},
    )
    assert [s.kind for s in scopes_of(config, request(), NOW)] == ["agent_daily"]
    assert [s.kind for s in scopes_of(config, request("telegram:7"), NOW)] == [
        "user_daily",
        "agent_daily",
    ]
    channel_admin = parse_config(
        {
            "usage": {"user_daily_tokens": 1000},
            "channels": {"telegram": {"admins": ["telegram:7"]}},
        },
        {},
    )
    assert scopes_of(channel_admin, request("telegram:7"), NOW) == []


def test_agent_budgets_per_day_and_month_name_the_agent_key() -> None:
    config = parse_config(
        {
            "agents": {
                "defaults": {"budget": {"monthly_usd": 100}},
                "helper": {"budget": {"daily_usd": 2, "monthly_usd": 20}},
            }
        },
        {},
    )
    main = scopes_of(config, request(), NOW)
    assert [(s.kind, s.usd_limit) for s in main] == [("agent_monthly", 100.0)]
    daily, monthly = scopes_of(config, request(agent="helper"), NOW)
    assert daily.key == "agent:helper:2026-12-31" and monthly.key == "agent:helper:2026-12"
    assert monthly.since == datetime(2026, 12, 1, tzinfo=UTC)
    assert monthly.resets_at == datetime(2027, 1, 1, tzinfo=UTC)
    assert monthly.reason("usd") == "agents.helper.budget.monthly_usd"
    assert "monthly budget ($20)" in monthly.notice("usd", NOW)
