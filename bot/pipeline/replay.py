"""Running again what an earlier process accepted but did not answer (deploy, crash, OOM kill).

At start-up every pending inbox entry is taken over, oldest first, and queued ahead of anything
new: the channels start receiving only after this, so a session's replayed messages keep their
order and come before its newer ones. An entry older than ``bot.replay_max_age`` ends as
``expired`` instead: an answer to an hour-old question would surprise more than help.

While the service runs, :func:`sweep` renews this process's leases and takes over entries
nobody holds (``loopgate inbox retry`` queues one that way) or whose owner's lease ran out.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from bot.pipeline.ports import Pipeline
from bot.storage.inbox import InboxEntry, InboxState, SqlInbox
from bot.storage.models import utcnow

log = structlog.get_logger(__name__)

SWEEP_EVERY_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class ReplayReport:
    replayed: int = 0
    expired: int = 0
    failed: int = 0


async def replay_pending(pipeline: Pipeline, inbox: SqlInbox, *, max_age: float) -> ReplayReport:
    """Queue every pending entry again (start-up: this process is the inbox's only user; with
    several, ``bot/cluster/work.py`` claims what nobody holds instead)."""
    entries = await inbox.take_over()
    report = await requeue(pipeline, inbox, entries, max_age=max_age)
    if report.replayed or report.expired or report.failed:
        log.info(
            "inbox.replay",
            replayed=report.replayed,
            expired=report.expired,
            failed=report.failed,
        )
    return report


async def sweep(pipeline: Pipeline, inbox: SqlInbox, *, max_age: float) -> ReplayReport:
    """One periodic pass: keep this process's leases, take over what nobody holds."""
    await inbox.renew_leases()
    if not pipeline.accepting:
        return ReplayReport()
    entries = await inbox.take_over(all_owners=False)
    return await requeue(pipeline, inbox, entries, max_age=max_age)


async def requeue(
    pipeline: Pipeline, inbox: SqlInbox, entries: list[InboxEntry], *, max_age: float
) -> ReplayReport:
    """Queue entries an earlier process left (expired ones end, a gone channel fails them)."""
    replayed = expired = failed = 0
    now = utcnow()
    for entry in entries:
        age = (now - entry.received_at).total_seconds()
        if max_age and age > max_age:
            await inbox.finish(
                entry.id, InboxState.EXPIRED, f"older than bot.replay_max_age ({max_age:g} s)"
            )
            log.warning(
                "inbox.expired",
                entry=entry.id,
                session_key=entry.session_key,
                age_s=round(age, 1),
                max_age_s=max_age,
            )
            expired += 1
        elif not pipeline.has_channel(entry.channel):
            await inbox.finish(
                entry.id, InboxState.FAILED, f"channel {entry.channel!r} is not enabled"
            )
            log.warning("inbox.channel_gone", entry=entry.id, channel=entry.channel)
            failed += 1
        else:
            pipeline.resubmit(entry)
            log.info(
                "inbox.requeued",
                entry=entry.id,
                session_key=entry.session_key,
                state=str(entry.state),
                resume_at_part=len(entry.parts) if entry.answer is not None else None,
            )
            replayed += 1
    return ReplayReport(replayed, expired, failed)
