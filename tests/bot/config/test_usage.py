"""``usage:``, ``providers.<name>.pricing`` and ``agents.<id>.budget`` (``bot/config/usage.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from bot.config import ConfigFileError, parse_config


def problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigFileError) as caught:
        parse_config(data, {})
    return caught.value.problems


def test_the_defaults_limit_nothing_and_price_by_table() -> None:
    config = parse_config({}, {})
    assert (config.usage.user_daily_tokens, config.usage.user_daily_usd) == (0, 0.0)
    assert config.providers.openai.pricing is None
    assert config.agents.defaults.budget.daily_usd == 0.0


def test_every_key_as_the_docs_spell_it() -> None:
    config = parse_config(
        {
            "usage": {"user_daily_tokens": 200000, "user_daily_usd": "0.5"},
            "providers": {
                "openai": {
                    "pricing": {
                        "input_per_mtok": 3,
                        "output_per_mtok": 15,
                        "cached_input_per_mtok": 0.3,
                    }
                }
            },
            "agents": {"main": {"budget": {"daily_usd": 5, "monthly_usd": 100}}},
        },
        {},
    )
    assert config.usage.user_daily_usd == 0.5
    pricing = config.providers.openai.pricing
    assert pricing is not None and pricing.cached_input_per_mtok == 0.3
    budget = config.agents.list[0].budget
    assert budget is not None and (budget.daily_usd, budget.monthly_usd) == (5.0, 100.0)


def test_bad_values_name_their_key() -> None:
    assert problems({"usage": {"user_daily_tokens": -1}}) == [
        "usage.user_daily_tokens: input should be greater than or equal to 0"
    ]
    assert problems({"usage": {"user_daily_token": 5}}) == ["usage.user_daily_token: unknown key"]
    assert problems({"providers": {"openai": {"pricing": {"input_per_mtok": 1}}}}) == [
        "providers.openai.pricing.output_per_mtok: field required"
    ]
    assert problems({"agents": {"main": {"budget": {"weekly_usd": 1}}}}) == [
        "agents.list.0.budget.weekly_usd: unknown key"
    ]
