"""What a scheduled job's ``schedule`` means: parsing the four forms and finding the next run.

The forms (the ``cron`` tool's public interface):

- ``in 30s`` / ``in 10m`` / ``in 2h`` / ``in 1d``: once, that long from now;
- ``at 2026-12-05T09:00``: once, ISO 8601; without an offset the time is in the job's zone;
- ``every 30m``: repeating, every that long from when the job was made;
- a five-field cron expression (``0 9 * * 1-5``): repeating, in the job's time zone.

Cron expressions are croniter's (standard crontab semantics, Sunday = 0), time zones are
zoneinfo's; nothing here parses them by hand. A bad schedule raises :class:`ScheduleError`,
whose message tells the model what to write instead.

Occurrence times are exact and reproducible from the stored schedule alone: two processes
that compute the next run of one job get the same instant, which is what makes a scheduled
occurrence's identity (job id, scheduled time) the same everywhere.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agent_core.errors import AgentError

FORMATS = (
    "'in 30s' / 'in 10m' / 'in 2h' / 'in 1d' (once), 'at 2026-12-05T09:00' (once, ISO 8601), "
    "'every 30m' (repeating) or a five-field cron expression such as '0 9 * * 1-5' (repeating)"
)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}
_RELATIVE = re.compile(r"^(in|every)\s+(\d+)\s*([smhd])$", re.IGNORECASE)
_AT = re.compile(r"^at\s+(\S.*)$", re.IGNORECASE)
_CRON_FIELDS = 5
_CRON_GAPS_CHECKED = 24
"""Consecutive runs of a cron expression compared for ``min_interval``: enough to find the
short gap of ``0,1 9 * * *`` or ``*/5 9-17 * * 1-5``."""


class ScheduleError(AgentError, ValueError):
    """A schedule the job can't have; the message says why and what to write instead."""


class ScheduleKind(enum.StrEnum):
    ONCE = "once"
    EVERY = "every"
    CRON = "cron"


def time_zone(name: str) -> ZoneInfo:
    """The zone named ``name`` (an IANA name such as ``Europe/Berlin``, or ``UTC``)."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ScheduleError(f"unknown time zone {name!r} (use an IANA name)") from exc


@dataclass(frozen=True, slots=True)
class Schedule:
    """A parsed schedule. ``spec`` is what is stored: the UTC instant (once), the interval in
    seconds (every) or the expression (cron); ``anchor`` is when an interval counts from."""

    kind: ScheduleKind
    spec: str
    timezone: str
    text: str
    anchor: datetime | None = None

    @property
    def repeating(self) -> bool:
        return self.kind is not ScheduleKind.ONCE

    @property
    def zone(self) -> ZoneInfo:
        return time_zone(self.timezone)

    def first_run(self, now: datetime) -> datetime | None:
        """The first run after ``now`` (a ``once`` schedule's own time, even if past)."""
        if self.kind is ScheduleKind.ONCE:
            return datetime.fromisoformat(self.spec)
        return self.next_after(now)

    def next_after(self, after: datetime) -> datetime | None:
        """The first run strictly after ``after`` (UTC); None when there is no more."""
        if self.kind is ScheduleKind.ONCE:
            at = datetime.fromisoformat(self.spec)
            return at if at > after else None
        if self.kind is ScheduleKind.EVERY:
            step = timedelta(seconds=int(self.spec))
            anchor = self.anchor or after
            if after < anchor:
                return anchor + step
            # On the anchor's grid, so every process computes the same instants.
            return anchor + step * ((after - anchor) // step + 1)
        from croniter import croniter  # imported when a cron expression is used: ~5 MiB

        runs = croniter(self.spec, after.astimezone(self.zone))
        return runs.get_next(datetime).astimezone(UTC)

    def describe(self, at: datetime | None) -> str:
        """A run time as the user reads it: in the job's zone, with the weekday."""
        if at is None:
            return "never again"
        local = at.astimezone(self.zone)
        clock = "%H:%M:%S" if local.second else "%H:%M"
        return f"{local:%a %Y-%m-%d} {local.strftime(clock)} {self.timezone}"


def parse_schedule(text: str, timezone: str, now: datetime, *, min_interval: float) -> Schedule:
    """Parse ``text`` for a job made at ``now`` (aware) in ``timezone``; raises
    :class:`ScheduleError` for an unknown form, a time in the past, or a repeating schedule
    more often than every ``min_interval`` seconds."""
    zone = time_zone(timezone)
    clean = " ".join(text.split())
    if not clean:
        raise ScheduleError(f"the schedule is empty; use {FORMATS}")
    if match := _RELATIVE.match(clean):
        word, amount, unit = match.group(1).lower(), int(match.group(2)), match.group(3).lower()
        seconds = amount * _UNITS[unit]
        if seconds <= 0:
            raise ScheduleError(f"{clean!r} is not in the future: give a duration above zero")
        if word == "in":
            at = (now + timedelta(seconds=seconds)).astimezone(UTC)
            return Schedule(ScheduleKind.ONCE, at.isoformat(), timezone, clean)
        _check_interval(clean, seconds, min_interval)
        return Schedule(ScheduleKind.EVERY, str(seconds), timezone, clean, anchor=now)
    if match := _AT.match(clean):
        at = _instant(match.group(1), zone)
        if at <= now:
            raise ScheduleError(
                f"{clean!r} is in the past (now it is {now.astimezone(zone):%Y-%m-%d %H:%M} "
                f"{timezone}); give a future time"
            )
        return Schedule(ScheduleKind.ONCE, at.astimezone(UTC).isoformat(), timezone, clean)
    fields = clean.split(" ")
    if len(fields) == _CRON_FIELDS and _valid_cron(clean):
        schedule = Schedule(ScheduleKind.CRON, clean, timezone, clean)
        _check_interval(clean, _shortest_gap(schedule, now), min_interval)
        return schedule
    if len(fields) == _CRON_FIELDS:
        raise ScheduleError(
            f"{clean!r} is not a valid cron expression (minute hour day-of-month month "
            "day-of-week, e.g. '0 9 * * 1-5')"
        )
    raise ScheduleError(f"unknown schedule {clean!r}; use {FORMATS}")


def _instant(value: str, zone: ZoneInfo) -> datetime:
    try:
        at = datetime.fromisoformat(value)
    except ValueError as exc:
        raise ScheduleError(
            f"{value!r} is not an ISO 8601 date and time; write e.g. 'at 2026-12-05T09:00'"
        ) from exc
    if at.tzinfo is None:
        at = at.replace(tzinfo=zone)  # the job's zone, as the user means it
    return at


def _valid_cron(expression: str) -> bool:
    from croniter import croniter  # imported when a cron expression is used: ~5 MiB

    valid: bool = croniter.is_valid(expression)
    return valid


def _shortest_gap(schedule: Schedule, now: datetime) -> float:
    from croniter import CroniterError, croniter

    try:
        runs = croniter(schedule.spec, now.astimezone(schedule.zone))
        times = [runs.get_next(datetime) for _ in range(_CRON_GAPS_CHECKED)]
    except CroniterError as exc:  # valid syntax that never matches (``0 0 31 2 *``)
        raise ScheduleError(f"{schedule.text!r} never runs: {exc}") from exc
    return min((b - a).total_seconds() for a, b in pairwise(times))


def _check_interval(text: str, seconds: float, min_interval: float) -> None:
    if seconds < min_interval:
        raise ScheduleError(
            f"{text!r} repeats every {_duration(seconds)}, more often than allowed "
            f"(at most every {_duration(min_interval)}): choose a longer interval"
        )


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"
