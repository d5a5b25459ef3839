"""Schedules: the four forms, their next runs in a time zone, and every schedule refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent_core.schedules import (
    Schedule,
    ScheduleError,
    ScheduleKind,
    parse_schedule,
    time_zone,
)

NOW = datetime(2026, 12, 4, 23, 0, tzinfo=UTC)  # a Friday; midnight Saturday in Berlin
MINUTE = 60.0


def parse(text: str, zone: str = "UTC", min_interval: float = MINUTE) -> Schedule:
    return parse_schedule(text, zone, NOW, min_interval=min_interval)


@pytest.mark.parametrize(
    ("text", "after"),
    [
        ("in 30s", timedelta(seconds=30)),
        ("in 10m", timedelta(minutes=10)),
        ("in 2h", timedelta(hours=2)),
        ("in 1d", timedelta(days=1)),
        ("IN  3 S", timedelta(seconds=3)),
    ],
)
def test_in_runs_once_that_long_from_now(text: str, after: timedelta) -> None:
    schedule = parse(text)
    assert schedule.kind is ScheduleKind.ONCE and not schedule.repeating
    assert schedule.first_run(NOW) == NOW + after
    assert schedule.next_after(NOW + after) is None


def test_at_without_offset_is_in_the_jobs_zone() -> None:
    schedule = parse("at 2026-12-05T09:00", "Europe/Berlin")
    assert schedule.first_run(NOW) == datetime(2026, 12, 5, 8, 0, tzinfo=UTC)
    assert schedule.describe(schedule.first_run(NOW)) == "Sat 2026-12-05 09:00 Europe/Berlin"


def test_at_with_an_offset_keeps_it() -> None:
    schedule = parse("at 2026-12-05T09:00-05:00", "Europe/Berlin")
    assert schedule.first_run(NOW) == datetime(2026, 12, 5, 14, 0, tzinfo=UTC)


def test_every_repeats_on_a_grid_from_when_it_was_made() -> None:
    schedule = parse("every 30m")
    assert schedule.kind is ScheduleKind.EVERY and schedule.repeating
    first = schedule.first_run(NOW)
    assert first == NOW + timedelta(minutes=30)
    assert schedule.next_after(first) == NOW + timedelta(minutes=60)
    # After a pause the grid holds: not "30 minutes after whenever it was looked at".
    assert schedule.next_after(NOW + timedelta(minutes=95)) == NOW + timedelta(minutes=120)


def test_cron_uses_crontab_weekdays_in_the_jobs_zone() -> None:
    # 1-5 is Monday to Friday as in crontab (APScheduler 3 would read it as Tuesday-Saturday).
    schedule = parse("0 9 * * 1-5", "Europe/Berlin")
    first = schedule.first_run(NOW)
    assert first == datetime(2026, 12, 7, 8, 0, tzinfo=UTC)  # Monday 09:00 in Berlin
    assert schedule.next_after(first) == datetime(2026, 12, 8, 8, 0, tzinfo=UTC)


def test_cron_follows_daylight_saving_time() -> None:
    schedule = parse("0 9 * * *", "Europe/Berlin")
    before = schedule.next_after(datetime(2027, 3, 27, 12, 0, tzinfo=UTC))
    after = schedule.next_after(datetime(2027, 3, 28, 12, 0, tzinfo=UTC))
    assert before == datetime(2027, 3, 28, 7, 0, tzinfo=UTC)  # 09:00 CEST (UTC+2)
    assert after == datetime(2027, 3, 29, 7, 0, tzinfo=UTC)
    assert schedule.next_after(datetime(2027, 1, 1, 12, 0, tzinfo=UTC)) == datetime(
        2027, 1, 2, 8, 0, tzinfo=UTC
    )  # 09:00 CET (UTC+1)


def test_a_stored_schedule_gives_the_same_runs() -> None:
    made = parse("every 2h", "Asia/Tokyo")
    stored = Schedule(made.kind, made.spec, made.timezone, made.text, anchor=made.anchor)
    later = NOW + timedelta(days=3, minutes=7)
    assert stored.next_after(later) == made.next_after(later)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("tomorrow at 9", "unknown schedule"),
        ("in 5 minutes", "unknown schedule"),
        ("in 5w", "unknown schedule"),
        ("every", "unknown schedule"),
        ("in -5m", "unknown schedule"),
        ("0 9 * *", "unknown schedule"),
        ("0 9 * * * *", "unknown schedule"),  # six fields: seconds are not offered
        ("@daily", "unknown schedule"),
        ("61 9 * * *", "not a valid cron expression"),
        ("0 9 * * mon-xyz", "not a valid cron expression"),
        ("0 0 31 2 *", "never runs"),
        ("in 0s", "not in the future"),
        ("every 0m", "not in the future"),
        ("at tomorrow", "not an ISO 8601"),
        ("at 2026-13-01T09:00", "not an ISO 8601"),
        ("at 2026-12-04T22:00", "in the past"),
        ("at 2026-12-04T23:00:00+00:00", "in the past"),  # exactly now is not later
        ("every 30s", "more often than allowed"),
        ("every 59s", "more often than allowed"),
        ("*/1 * * * *", None),  # every minute: exactly the minimum, allowed
    ],
)
def test_bad_schedules_say_why(text: str, message: str | None) -> None:
    if message is None:
        assert parse(text).kind is ScheduleKind.CRON
        return
    with pytest.raises(ScheduleError, match=message) as info:
        parse(text)
    if "unknown schedule" in message or "empty" in message:
        assert "every 30m" in str(info.value)  # the model is told the forms it may use


def test_min_interval_counts_a_cron_expressions_shortest_gap() -> None:
    with pytest.raises(ScheduleError, match="repeats every 5m"):
        parse("*/5 9-17 * * 1-5", min_interval=600)
    with pytest.raises(ScheduleError, match="repeats every 1m"):
        parse("0,1 9 * * *", min_interval=600)  # one short gap a day is still too short
    assert parse("0 * * * *", min_interval=3600).kind is ScheduleKind.CRON


def test_min_interval_applies_to_repeating_jobs_only() -> None:
    assert parse("in 30s", min_interval=3600).kind is ScheduleKind.ONCE
    with pytest.raises(ScheduleError, match="at most every 1h"):
        parse("every 30m", min_interval=3600)


def test_unknown_time_zone_is_refused() -> None:
    with pytest.raises(ScheduleError, match="unknown time zone 'Mars/Olympus'"):
        parse("in 1h", "Mars/Olympus")
    with pytest.raises(ScheduleError):
        time_zone("../etc/passwd")


def test_describe_shows_seconds_only_when_there_are_some() -> None:
    schedule = parse("in 3s", "Europe/Berlin")
    assert schedule.describe(schedule.first_run(NOW)) == "Sat 2026-12-05 00:00:03 Europe/Berlin"
    assert schedule.describe(None) == "never again"
