"""``evolution:`` (the schedule) and ``agents.<id>.evolution_guardrails`` (the safety limits).

Only pydantic here: :mod:`bot.config.agents` imports this module, so it must not import the
config, the storage or the service.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator

from bot.config.base import Duration, StrictModel

DEFAULT_SCHEDULE = "daily"
# "daily" runs at 03:00 UTC: a quiet hour for most deployments, and after midnight's traffic.
NAMED_SCHEDULES = {"daily": "0 3 * * *", "hourly": "0 * * * *"}
_INTERVAL = re.compile(r"^\s*\d+(?:\.\d+)?\s*(ms|s|m|h|d)\s*$")

SOUL_PARAMS = frozenset({"soul", "SOUL.md"})
"""Names in ``locked_params`` that lock SOUL.md (prompt section 7 is then not shown)."""


class EvolutionGuardrails(StrictModel):
    """Safety limits of one agent's evolution (the spec's AdaptationGuardrails)."""

    max_delta_per_cycle: float = Field(0.1, gt=0, le=1)
    """Most a numeric parameter may change in one suggestion, relative to its current value."""
    min_data_points: int = Field(100, ge=1)
    """Runs of the agent in the window before any rule may suggest anything."""
    rollback_on_drop_pct: float = Field(20.0, gt=0, le=100)
    """An applied change whose quality score drops more than this (percent) is rolled back."""
    locked_params: list[str] = Field(default_factory=list)
    """Never changed: a parameter name (``max_iterations``), ``system_prompt``,
    ``disabled_tools``, or ``soul`` / ``SOUL.md`` (the agent's own style updates)."""

    @property
    def soul_locked(self) -> bool:
        return not SOUL_PARAMS.isdisjoint(self.locked_params)


class EvolutionConfig(StrictModel):
    """When the suggestion engine runs and over which window of runs."""

    enabled: bool = True
    """False: no scheduled cycles (``loopgate evolution run`` still runs one)."""
    schedule: str = DEFAULT_SCHEDULE
    """``daily`` (03:00 UTC), ``hourly``, a 5-field cron expression in UTC (``0 3 * * *``),
    or an interval (``6h``, ``30m``)."""
    window: Duration = Field(7 * 86_400.0, gt=0)
    """Metrics cover the runs of this long ago until now (``7d``, ``36h``...)."""

    @field_validator("schedule")
    @classmethod
    def _valid_schedule(cls, value: Any) -> Any:
        schedule_kind(value)
        return value


def schedule_kind(schedule: str) -> tuple[str, str]:
    """``("cron", expression)`` or ``("interval", duration)``; ValueError when neither."""
    text = schedule.strip()
    if text in NAMED_SCHEDULES:
        return "cron", NAMED_SCHEDULES[text]
    if _INTERVAL.match(text):
        return "interval", text
    fields = text.split()
    if len(fields) != 5 or not all(re.fullmatch(r"[\d*/,\-A-Za-z]+", f) for f in fields):
        raise ValueError(
            f"{schedule!r} is not a schedule: use daily, hourly, a cron expression "
            "(minute hour day month weekday, e.g. '0 3 * * *') or an interval ('6h')"
        )
    return "cron", text
