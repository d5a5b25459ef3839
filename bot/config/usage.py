"""Usage accounting, prices and limits (docs/usage.md): ``usage:``, ``providers.<name>.pricing``
and ``agents.<id>.budget``."""

from __future__ import annotations

from pydantic import Field

from bot.config.base import StrictModel


class PricingConfig(StrictModel):
    """``providers.<name>.pricing``: USD per million tokens, over the price table."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)
    cached_input_per_mtok: float | None = Field(None, ge=0)
    """Input read from the provider's prompt cache; unset: billed as ``input_per_mtok``."""
    cache_write_per_mtok: float | None = Field(None, ge=0)
    """Input written to the provider's prompt cache (Anthropic: 1.25x input for a 5-minute
    cache); unset: billed as ``input_per_mtok``."""


class BudgetConfig(StrictModel):
    """``agents.<id>.budget``: what one agent may spend, all users together (0: unlimited)."""

    daily_usd: float = Field(0.0, ge=0)
    """Per UTC day."""
    monthly_usd: float = Field(0.0, ge=0)
    """Per calendar month (UTC)."""


class UsageConfig(StrictModel):
    """``usage:``: per-user quotas, per user and channel, per UTC day (0: unlimited); the
    users in ``bot.admins`` or ``channels.<name>.admins`` are exempt."""

    user_daily_tokens: int = Field(0, ge=0)
    """Input plus output tokens."""
    user_daily_usd: float = Field(0.0, ge=0)
    """Calls to a model whose price is unknown count for no USD."""
