"""``agents.<id>.heartbeat``: the agent's HEARTBEAT.md checklist as a repeating scheduled job.

At start-up each configured heartbeat becomes (or stays) the job ``heartbeat-<agent id>``,
and the heartbeats no longer configured are removed. A beat is an ordinary occurrence (the
inbox, NO_REPLY, replay); outside its ``active_hours`` (in the agent's zone) it is skipped.
"""

from __future__ import annotations

from datetime import UTC, datetime

import structlog

from agent_core import Schedule, ScheduleKind, time_zone
from bot.config import Config
from bot.config.cron import active_hours
from bot.pipeline.session_keys import session_key
from bot.storage.cron import SOURCE_HEARTBEAT, SqlCronJobs, StoredCronJob
from channels import ChatRef, ChatType, InboundMessage, Sender

log = structlog.get_logger(__name__)

PREFIX = "heartbeat-"


def heartbeat_jobs(config: Config, now: datetime) -> list[StoredCronJob]:
    """The heartbeat jobs config.yaml asks for."""
    found = []
    for agent in config.agents.list:
        beat = agent.heartbeat
        if beat is None:
            continue
        channel, chat_id = beat.chat.split(":", 1)
        zone = agent.timezone or config.cron.timezone
        chat = ChatRef(channel, chat_id, ChatType(beat.chat_type))
        # The chat's own id as the sender: in a direct chat that is the user, whose workspace
        # holds the HEARTBEAT.md the agent reads.
        origin = InboundMessage(
            chat=chat,
            message_id="",
            sender=Sender(id=chat_id, name=""),
            text=beat.message,
            received_at=now,
        )
        every = int(beat.every)
        # Anchored at midnight UTC: the beats fall on the same instants whenever and wherever
        # the service starts, so restarts and processes agree on each occurrence's key.
        anchor = datetime(2000, 1, 1, tzinfo=UTC)
        schedule = Schedule(ScheduleKind.EVERY, str(every), zone, f"every {every}s", anchor)
        found.append(
            StoredCronJob(
                id=f"{PREFIX}{agent.id}",
                agent_id=agent.id,
                session_key=session_key(agent.id, chat),
                user_id=f"{channel}:{chat_id}",
                chat=beat.chat,
                origin=origin,
                source=SOURCE_HEARTBEAT,
                schedule=schedule,
                message=beat.message,
                next_run_at=schedule.next_after(now),
                paused=False,
                last_run_at=None,
                last_outcome=None,
                last_entry=None,
                created_at=now,
            )
        )
    return found


async def sync_heartbeats(config: Config, jobs: SqlCronJobs, now: datetime) -> list[str]:
    """Make the stored heartbeats what config.yaml says; returns their ids."""
    wanted = heartbeat_jobs(config, now)
    for job in wanted:
        await jobs.put(job)
    removed = await jobs.remove_source_except(SOURCE_HEARTBEAT, {job.id for job in wanted})
    if wanted or removed:
        log.info("cron.heartbeats", active=[job.id for job in wanted], removed=removed)
    return [job.id for job in wanted]


def outside_active_hours(config: Config) -> dict[str, tuple[str, str]]:
    """Heartbeat job id → (active_hours, zone), for the heartbeats that have them."""
    hours = {}
    for agent in config.agents.list:
        if agent.heartbeat is not None and agent.heartbeat.active_hours:
            zone = agent.timezone or config.cron.timezone
            hours[f"{PREFIX}{agent.id}"] = (agent.heartbeat.active_hours, zone)
    return hours


class ActiveHours:
    """The ticker's ``skip``: a heartbeat's beat outside its active hours is skipped."""

    def __init__(self, config: Config) -> None:
        self.hours = outside_active_hours(config)

    def __call__(self, job: StoredCronJob, at: datetime) -> str | None:
        window = self.hours.get(job.id)
        if window is None:
            return None
        text, zone = window
        start, end = active_hours(text)
        local = at.astimezone(time_zone(zone)).time()
        inside = start <= local < end if start <= end else local >= start or local < end
        return None if inside else f"outside active hours {text} ({zone})"
