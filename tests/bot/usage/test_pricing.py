"""Prices from config and from the genai-prices table (``bot/usage/pricing.py``)."""

from __future__ import annotations

import genai_prices
import pytest

from agent_core import Usage
from bot.config import PricingConfig, ProviderConfig
from bot.usage.pricing import PriceBook, configured_price, table_price


def test_a_configured_price_bills_cached_input_at_its_own_rate() -> None:
    price = configured_price(
        PricingConfig(input_per_mtok=3, output_per_mtok=15, cached_input_per_mtok=0.3)
    )
    cost = price.cost(Usage(input_tokens=10_000, output_tokens=1_000, cached_input_tokens=4_000))
    assert cost == pytest.approx((6_000 * 3 + 4_000 * 0.3 + 1_000 * 15) / 1e6)
    assert price.source == "config"
    assert price.note() == "$3/Mtok input, $15/Mtok output, $0.3/Mtok cached input (config)"


def test_cached_input_without_its_own_price_costs_as_input() -> None:
    price = configured_price(PricingConfig(input_per_mtok=1, output_per_mtok=2))
    assert price.cost(Usage(1_000_000, 0, 500_000)) == pytest.approx(1.0)


def test_input_written_to_the_prompt_cache_is_billed_at_its_own_rate() -> None:
    # Anthropic's cache_creation_input_tokens: part of the input, priced apart.
    pricing = PricingConfig(
        input_per_mtok=3, output_per_mtok=15, cached_input_per_mtok=0.3, cache_write_per_mtok=3.75
    )
    usage = Usage(input_tokens=10_000, output_tokens=0, cached_input_tokens=4_000)
    usage.cache_write_tokens = 5_000
    cost = configured_price(pricing).cost(usage)
    assert cost == pytest.approx((1_000 * 3 + 4_000 * 0.3 + 5_000 * 3.75) / 1e6)
    # Without a price of its own, as plain input; never more than the input reported.
    plain = configured_price(PricingConfig(input_per_mtok=3, output_per_mtok=15))
    assert plain.cost(usage) == pytest.approx(10_000 * 3 / 1e6)
    usage.cache_write_tokens = 50_000
    assert configured_price(pricing).cost(usage) == pytest.approx(
        (4_000 * 0.3 + 6_000 * 3.75) / 1e6
    )


def test_the_table_bills_anthropic_cache_writes_as_it_does() -> None:
    price = table_price("anthropic", None, "claude-sonnet-4-5")
    assert price is not None and price.cache_write_per_mtok == pytest.approx(3.75)
    usage = Usage(100_000, 1_000, 20_000)
    usage.cache_write_tokens = 50_000
    expected = genai_prices.calc_price(
        genai_prices.Usage(
            input_tokens=100_000,
            output_tokens=1_000,
            cache_read_tokens=20_000,
            cache_write_tokens=50_000,
        ),
        "claude-sonnet-4-5",
        provider_id="anthropic",
    ).total_price
    assert price.cost(usage) == pytest.approx(float(expected))
    assert price.cost(usage) > price.cost(Usage(100_000, 1_000, 20_000))


def test_the_table_prices_a_known_model_by_provider_name_and_names_its_version() -> None:
    price = table_price("openai", "http://127.0.0.1:1/v1", "gpt-4o-mini")
    assert price is not None
    assert price.source == f"genai-prices {genai_prices.__version__}"
    usage = Usage(1_000_000, 1_000_000, 200_000)
    expected = genai_prices.calc_price(
        genai_prices.Usage(
            input_tokens=1_000_000, output_tokens=1_000_000, cache_read_tokens=200_000
        ),
        "gpt-4o-mini",
        provider_id="openai",
    ).total_price
    assert price.cost(usage) == pytest.approx(float(expected))


def test_the_table_matches_a_provider_by_its_base_url() -> None:
    price = table_price("my-gateway", "https://api.anthropic.com", "claude-sonnet-4-5")
    assert price is not None and price.input_per_mtok == pytest.approx(3.0)
    # a tiered price (by context length) is computed by the table itself
    long = Usage(300_000, 0)
    assert price.cost(long) == pytest.approx(300_000 * 6 / 1e6)


def test_a_model_nobody_knows_has_no_price() -> None:
    assert table_price("openai", None, "surely-not-a-model") is None
    assert table_price("ollama", "http://127.0.0.1:11434/v1", "llama3.1") is None


async def test_config_wins_over_the_table_and_lookups_are_remembered() -> None:
    providers = {
        "openai": ProviderConfig(
            model="gpt-4o-mini", pricing=PricingConfig(input_per_mtok=9, output_per_mtok=9)
        ),
        "local": ProviderConfig(base_url="http://127.0.0.1:11434/v1"),
    }
    book = PriceBook(providers)
    assert book.cached("openai", "gpt-4o-mini") == (False, None)
    configured = await book.price("openai", "gpt-4o-mini")
    assert configured is not None and configured.source == "config"
    assert await book.price("local", "llama3.1") is None
    assert book.cached("local", "llama3.1") == (True, None)


async def test_a_burst_of_first_calls_looks_a_model_up_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The table is read in a child process: fifty runs starting together must not start fifty
    children (that burst starved a cluster's lease renewals and doubled its answers)."""
    import asyncio
    import time

    from bot.usage import pricing

    looked_up: list[str] = []

    def slow_lookup(provider: str, base_url: str | None, model: str) -> None:
        looked_up.append(model)
        time.sleep(0.05)  # a child process takes a while; the others arrive meanwhile

    monkeypatch.setattr(pricing, "table_price", slow_lookup)
    book = PriceBook({})
    prices = await asyncio.gather(*(book.price("openai", "m") for _ in range(50)))
    assert prices == [None] * 50
    assert looked_up == ["m"]
    assert await book.price("openai", "other") is None
    assert looked_up == ["m", "other"]
