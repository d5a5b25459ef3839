"""Which limits a run's model calls count against, their periods and the notice when one is hit.

A limit is a :class:`Scope`: a counter (one user on one channel today, one agent today, one
agent this month), its caps in tokens and USD (0: none), the period it counts and when it
resets. Days and months are UTC, like the hourly rollup they are seeded from.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from agent_core import RunRequest
from bot.config import BudgetConfig, Config

Unit = Literal["tokens", "usd"]


@dataclass(frozen=True, slots=True)
class Scope:
    key: str
    """The counter's name, unique per period: ``user:<user id>:2026-12-05``."""
    kind: Literal["user_daily", "agent_daily", "agent_monthly"]
    since: datetime
    resets_at: datetime
    token_limit: int = 0
    usd_limit: float = 0.0
    agent_id: str | None = None
    """Counts this agent's usage (agent budgets); None: every agent's."""
    user_id: str | None = None
    """Counts this user's usage (user quotas); None: every user's."""

    def reason(self, unit: Unit) -> str:
        """The configuration key of the limit hit: what the trace and the inbox say."""
        if self.kind == "user_daily":
            return f"usage.user_daily_{unit}"
        period = "daily" if self.kind == "agent_daily" else "monthly"
        return f"agents.{self.agent_id}.budget.{period}_usd"

    def notice(self, unit: Unit, now: datetime) -> str:
        """The one message the user gets."""
        resets = f"It resets at {self.resets_at:%H:%M} UTC on {self.resets_at:%Y-%m-%d}"
        resets += f" (in {_duration(self.resets_at - now)})."
        if self.kind == "user_daily":
            amount = f"{self.token_limit:,} tokens" if unit == "tokens" else f"${self.usd_limit:g}"
            return (
                f"You have reached your daily usage limit here ({amount}, counting answers "
                f"in progress), so I can't answer this now. {resets}"
            )
        period = "daily" if self.kind == "agent_daily" else "monthly"
        return (
            f"This assistant has reached its {period} budget (${self.usd_limit:g}), so I can't "
            f"answer this now. {resets}"
        )


def day_start(now: datetime) -> datetime:
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def month_start(now: datetime) -> datetime:
    return day_start(now).replace(day=1)


def next_month(start: datetime) -> datetime:
    return (start + timedelta(days=32)).replace(day=1)


def is_admin(config: Config, request: RunRequest) -> bool:
    """Listed in ``bot.admins`` or ``channels.<name>.admins`` (``id`` or ``channel:id``)."""
    channel_admins = getattr(getattr(config.channels, request.channel, None), "admins", [])
    admins = {*config.bot.admins, *channel_admins}
    sender = request.user_id.removeprefix(f"{request.channel}:")
    return request.user_id in admins or sender in admins


def agent_budget(config: Config, agent_id: str) -> BudgetConfig:
    agent = next((a for a in config.agents.list if a.id == agent_id), None)
    if agent is not None and agent.budget is not None:
        return agent.budget
    return config.agents.defaults.budget


def scopes_of(config: Config, request: RunRequest, now: datetime) -> list[Scope]:
    """The limits ``request``'s calls count against at ``now`` (none: nothing to check)."""
    scopes: list[Scope] = []
    today = day_start(now)
    tomorrow = today + timedelta(days=1)
    usage = config.usage
    if (usage.user_daily_tokens or usage.user_daily_usd) and not is_admin(config, request):
        scopes.append(
            Scope(
                f"user:{request.user_id}:{today:%Y-%m-%d}",
                "user_daily",
                today,
                tomorrow,
                token_limit=usage.user_daily_tokens,
                usd_limit=usage.user_daily_usd,
                user_id=request.user_id,
            )
        )
    budget = agent_budget(config, request.agent_id)
    agent = request.agent_id
    if budget.daily_usd:
        scopes.append(
            Scope(
                f"agent:{agent}:{today:%Y-%m-%d}",
                "agent_daily",
                today,
                tomorrow,
                usd_limit=budget.daily_usd,
                agent_id=agent,
            )
        )
    if budget.monthly_usd:
        month = month_start(now)
        scopes.append(
            Scope(
                f"agent:{agent}:{month:%Y-%m}",
                "agent_monthly",
                month,
                next_month(month),
                usd_limit=budget.monthly_usd,
                agent_id=agent,
            )
        )
    return scopes


def _duration(delta: timedelta) -> str:
    minutes = max(int(delta.total_seconds() // 60), 1)
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    return f"{hours} h {minutes} min" if hours else f"{minutes} min"
