"""What a model costs: ``providers.<name>.pricing`` when set, else the genai-prices table.

genai-prices (pydantic's table of LLM prices, a package updated with each release) is read in
a child process, once per model, off the event loop (``_table_lookup.py``): the table is ~10 MiB
once built, and the service keeps only the few floats it needs. Only a tiered price (by context
length), which the table must compute per call, loads it in the service.
A model neither the config nor the table knows has no price, and its calls cost ``None``: an
unknown cost is not a free one.

The table is matched by the provider's name when it is one of the table's providers
(``openai``, ``anthropic``...), else by its ``base_url`` (OpenRouter, Groq...); a local server
(Ollama, vLLM) matches neither and is priced only by config.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from agent_core import Usage
from bot.config import PricingConfig, ProviderConfig

log = structlog.get_logger(__name__)

PER_MTOK = 1_000_000
CONFIG_SOURCE = "config"
_LOOKUP = Path(__file__).with_name("_table_lookup.py")
LOOKUP_TIMEOUT = 60.0
"""Seconds for the child to build the table and answer (~0.3 s here)."""


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens, and where it came from (``config`` or ``genai-prices X.Y.Z``)."""

    input_per_mtok: float
    output_per_mtok: float
    cached_input_per_mtok: float
    source: str
    table_price: Any = None
    """The table's own price when it is tiered (by context length): computed by the table."""
    cache_write_per_mtok: float | None = None
    """Input written to the prompt cache; None: billed as plain input."""

    def cost(self, usage: Usage) -> float:
        if self.table_price is not None:
            return _table_cost(self.table_price, usage)
        cached, written = _cache_parts(usage)
        fresh = usage.input_tokens - cached - written
        write_price = self.input_per_mtok
        if self.cache_write_per_mtok is not None:
            write_price = self.cache_write_per_mtok
        return (
            fresh * self.input_per_mtok
            + cached * self.cached_input_per_mtok
            + written * write_price
            + usage.output_tokens * self.output_per_mtok
        ) / PER_MTOK

    def note(self) -> str:
        """The price in words, for the prompt's Runtime section."""
        return (
            f"${_num(self.input_per_mtok)}/Mtok input, ${_num(self.output_per_mtok)}/Mtok "
            f"output, ${_num(self.cached_input_per_mtok)}/Mtok cached input ({self.source})"
        )


def configured_price(pricing: PricingConfig) -> Price:
    cached = pricing.cached_input_per_mtok
    return Price(
        pricing.input_per_mtok,
        pricing.output_per_mtok,
        pricing.input_per_mtok if cached is None else cached,
        CONFIG_SOURCE,
        cache_write_per_mtok=pricing.cache_write_per_mtok,
    )


def _cache_parts(usage: Usage) -> tuple[int, int]:
    """(read from, written to) the prompt cache, within the input a provider reported."""
    cached = min(usage.cached_input_tokens, usage.input_tokens)
    return cached, min(usage.cache_write_tokens, usage.input_tokens - cached)


class PriceBook:
    """Prices by (provider name, model), looked up once each."""

    def __init__(self, providers: dict[str, ProviderConfig]) -> None:
        self._providers = providers
        self._known: dict[tuple[str, str], Price | None] = {}
        # One lookup per model at a time: a burst of first calls must not start a child each
        # (150 children at once starved a cluster's lease renewals and doubled its answers).
        self._looking: dict[tuple[str, str], asyncio.Lock] = {}

    def cached(self, provider: str, model: str) -> tuple[bool, Price | None]:
        """(found, price) without looking anything up: for the hot path."""
        key = (provider, model)
        if key in self._known:
            return True, self._known[key]
        return False, None

    async def price(self, provider: str, model: str) -> Price | None:
        key = (provider, model)
        if key in self._known:
            return self._known[key]
        async with self._looking.setdefault(key, asyncio.Lock()):
            if key not in self._known:
                await self._look_up(key)
        self._looking.pop(key, None)
        return self._known[key]

    async def _look_up(self, key: tuple[str, str]) -> None:
        provider, model = key
        config = self._providers.get(provider)
        if config is not None and config.pricing is not None:
            self._known[key] = configured_price(config.pricing)
            return
        base_url = config.base_url if config is not None else None
        try:
            found = await asyncio.to_thread(table_price, provider, base_url, model)
        except Exception as exc:  # a broken table prices nothing; it fails no run
            log.warning("usage.price_table_failed", model=model, error=repr(exc))
            found = None
        if found is None:  # documented (cost null), not a fault: once per model
            log.info("usage.unpriced_model", provider=provider, model=model)
        self._known[key] = found


def table_price(provider: str, base_url: str | None, model: str) -> Price | None:
    """The model's price in genai-prices, or None when the table doesn't know it."""
    done = subprocess.run(
        [sys.executable, str(_LOOKUP), provider, base_url or "", model],
        capture_output=True,
        text=True,
        timeout=LOOKUP_TIMEOUT,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"price lookup failed: {done.stderr.strip()[-500:]}")
    found: dict[str, Any] | None = json.loads(done.stdout)
    if found is None:
        return None
    if found["tiered"]:
        return _table_price_here(provider, base_url, model)
    cached = found["cached_input"]
    return Price(
        found["input"],
        found["output"],
        found["input"] if cached is None else cached,
        f"genai-prices {found['version']}",
        cache_write_per_mtok=found.get("cache_write"),
    )


def _table_price_here(provider: str, base_url: str | None, model: str) -> Price | None:
    """A tiered price: the table itself, in this process, computes each call's cost."""
    import genai_prices
    from genai_prices import Usage as TableUsage
    from genai_prices import calc_price

    probe = TableUsage(input_tokens=1, output_tokens=1)
    for where in ({"provider_id": provider}, {"provider_api_url": base_url}):
        if not next(iter(where.values())):
            continue
        try:
            found = calc_price(probe, model, **where)
        except LookupError:
            continue
        return _from_table(found.model_price, f"genai-prices {genai_prices.__version__}")
    return None


def _from_table(model_price: Any, source: str) -> Price:
    from decimal import Decimal

    parts = [model_price.input_mtok, model_price.output_mtok, model_price.cache_read_mtok]
    parts.append(getattr(model_price, "cache_write_mtok", None))
    flat = all(value is None or isinstance(value, Decimal) for value in parts)
    input_mtok = _base(parts[0])
    return Price(
        input_mtok,
        _base(parts[1]),
        input_mtok if parts[2] is None else _base(parts[2]),
        source,
        table_price=None if flat else model_price,
        cache_write_per_mtok=None if parts[3] is None else _base(parts[3]),
    )


def _base(value: Any) -> float:
    """A flat price, or the first tier of a tiered one (the note's figure)."""
    if value is None:
        return 0.0
    return float(getattr(value, "base", value))


def _table_cost(model_price: Any, usage: Usage) -> float:
    from genai_prices import Usage as TableUsage

    cached, written = _cache_parts(usage)
    table_usage = TableUsage(
        input_tokens=usage.input_tokens,
        cache_read_tokens=cached,
        cache_write_tokens=written,
        output_tokens=usage.output_tokens,
    )
    return float(model_price.calc_price(table_usage)["total_price"])


def _num(value: float) -> str:
    return f"{value:.4f}".rstrip("0").rstrip(".") if value else "0"
