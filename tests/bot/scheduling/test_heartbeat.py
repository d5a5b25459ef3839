"""Heartbeats from config.yaml: the job each one becomes, kept across restarts, removed with
its config, and skipped outside its active hours."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.config import Config, parse_config
from bot.scheduling.heartbeat import ActiveHours, heartbeat_jobs, sync_heartbeats
from bot.storage import Database
from bot.storage.cron import SOURCE_HEARTBEAT, SqlCronJobs
from tests.storage_support import backend, db  # noqa: F401

NOW = datetime(2026, 12, 4, 23, 10, tzinfo=UTC)


def config(**beat: object) -> Config:
    heartbeat = {"every": "30m", "chat": "telegram:42", **beat}
    return parse_config(
        {
            "agents": {"main": {"timezone": "Europe/Berlin", "heartbeat": heartbeat}, "quiet": {}},
            "channels": {"telegram": {"enabled": True, "token": "123:abc"}},
        },
        {},
    )


def test_a_heartbeat_is_a_repeating_job_in_its_chat() -> None:
    [job] = heartbeat_jobs(config(), NOW)
    assert job.id == "heartbeat-main" and job.source == SOURCE_HEARTBEAT
    assert job.session_key == "agent:main:telegram:direct:42"
    assert (job.origin.chat.channel, job.origin.chat.chat_id, job.origin.sender.id) == (
        "telegram",
        "42",
        "42",
    )
    assert "HEARTBEAT.md" in job.message and "NO_REPLY" in job.message
    assert job.schedule.timezone == "Europe/Berlin"
    # On a fixed grid: the next half hour, whenever the process starts.
    assert job.next_run_at == datetime(2026, 12, 4, 23, 30, tzinfo=UTC)
    [again] = heartbeat_jobs(config(), NOW + timedelta(minutes=7))
    assert again.next_run_at == job.next_run_at


async def test_sync_keeps_the_next_run_and_removes_unconfigured_ones(
    db: Database,  # noqa: F811
) -> None:
    jobs = SqlCronJobs(db)
    assert await sync_heartbeats(config(), jobs, NOW) == ["heartbeat-main"]
    first = await jobs.get("heartbeat-main")
    assert first is not None and first.next_run_at is not None
    await jobs.set_paused("heartbeat-main", True)
    await sync_heartbeats(config(), jobs, NOW + timedelta(hours=2))  # a restart
    kept = await jobs.get("heartbeat-main")
    assert kept is not None and kept.next_run_at == first.next_run_at and kept.paused
    assert await sync_heartbeats(parse_config({}, {}), jobs, NOW) == []
    assert await jobs.get("heartbeat-main") is None


def test_active_hours_in_the_agents_zone() -> None:
    [job] = heartbeat_jobs(config(active_hours="08:00-22:00"), NOW)
    skip = ActiveHours(config(active_hours="08:00-22:00"))
    berlin_9 = datetime(2026, 12, 5, 8, 0, tzinfo=UTC)  # 09:00 in Berlin (UTC+1)
    berlin_7 = datetime(2026, 12, 5, 6, 0, tzinfo=UTC)
    berlin_22 = datetime(2026, 12, 5, 21, 0, tzinfo=UTC)
    assert skip(job, berlin_9) is None
    assert skip(job, berlin_7) == "outside active hours 08:00-22:00 (Europe/Berlin)"
    assert skip(job, berlin_22) is not None  # the end is not included
    overnight = ActiveHours(config(active_hours="22:00-06:00"))
    assert overnight(job, berlin_22) is None and overnight(job, berlin_9) is not None
    assert ActiveHours(config())(job, berlin_7) is None  # no active_hours: always
