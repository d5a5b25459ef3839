"""The ``cron:`` section (scheduled jobs, docs/scheduling.md) and an agent's ``heartbeat``."""

from __future__ import annotations

import re
from datetime import time
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, field_validator

from bot.config.base import Duration, StrictModel

_HOURS = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*$")


def check_time_zone(value: str) -> str:
    """An IANA zone name (``Europe/Berlin``) or ``UTC``; anything else is a config error."""
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {value!r} (an IANA name, e.g. Europe/Berlin)") from exc
    return value


class CronConfig(StrictModel):
    timezone: str = "UTC"
    """The zone of schedules without an offset and of the prompt's Time section; an agent's
    ``timezone`` overrides it."""
    max_jobs_per_user: int = Field(20, ge=1)
    """Active jobs one user may have (all chats); a further ``add`` is a tool error."""
    min_interval: Duration = 60.0
    """A repeating job may run at most this often (``every 30s`` is refused with 1m)."""
    history_turns: int = Field(0, ge=0)
    """Past turns of its chat a job's run sees; 0: every run starts fresh."""
    catch_up: Duration = 3600.0
    """A run missed while the service was down is still made at start-up if it is at most
    this late; an older one is recorded as missed and the user is told once."""

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        return check_time_zone(value)


class HeartbeatConfig(StrictModel):
    """``agents.<id>.heartbeat``: the agent runs its HEARTBEAT.md checklist on a schedule and
    says something only when there is something to say (NO_REPLY otherwise)."""

    every: Duration = Field(1800.0, gt=0)
    chat: str = Field(pattern=r"^[A-Za-z0-9_-]+:.+$")
    """``<channel>:<chat id>``, e.g. ``telegram:123456``: where the agent speaks."""
    chat_type: str = Field("direct", pattern=r"^(direct|group)$")
    active_hours: str | None = None
    """``08:00-22:00`` in the agent's time zone (may pass midnight: ``22:00-06:00``); outside
    them a beat is skipped. Unset: always."""
    message: str = (
        "Heartbeat: read HEARTBEAT.md in your workspace and go through its checklist. If "
        "nothing needs the user's attention, answer exactly NO_REPLY."
    )

    @field_validator("active_hours")
    @classmethod
    def _hours(cls, value: str | None) -> str | None:
        if value is not None:
            active_hours(value)
        return value


def active_hours(value: str) -> tuple[time, time]:
    """``"08:00-22:00"`` → (08:00, 22:00); raises ValueError for anything else."""
    match = _HOURS.match(value)
    if match is None:
        raise ValueError(f"active_hours {value!r}: write HH:MM-HH:MM, e.g. 08:00-22:00")
    h1, m1, h2, m2 = (int(part) for part in match.groups())
    try:
        return time(h1, m1), time(h2, m2)
    except ValueError as exc:
        raise ValueError(f"active_hours {value!r}: {exc}") from exc
