"""A message waiting for, or being given, an answer: what every step of the pipeline passes on.

Built by the gateway (:meth:`bot.pipeline.gateway.Gateway.handle`, announcements, replay),
merged by bursts, queued by the scheduler, run by the turn, ended by the turn or a drop.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from agent_core import RunResult, RunStatus
from bot.pipeline.reactions import StatusReactions
from bot.pipeline.streaming import StreamOptions
from bot.storage.inbox import InboxState
from channels import InboundMessage

_NOT_OK = (RunStatus.FAILED, RunStatus.BUDGET_EXCEEDED, RunStatus.USAGE_LIMIT)

CRON_JOB = "cron_job"
"""Metadata key of a scheduled job's turn (``bot/scheduling``): the job's id."""
CRON_SCHEDULE = "cron_schedule"  # the job's schedule, as written
CRON_AT = "cron_at"  # the occurrence's scheduled time (ISO 8601)
QUEUE_FULL = "queue full (bot.queue_cap)"  # the drop reason of a job its chat had no room for


def ended_ok(result: RunResult | None) -> bool:
    """The success reaction, or the failure one: a context-budget stop delivers its notice but
    ends as a failure."""
    return result is not None and result.status not in _NOT_OK


@dataclass(eq=False)
class Job:
    """A message waiting for, or being given, an answer."""

    message: InboundMessage
    agent_id: str
    session_key: str
    concurrency: int
    run_id: str
    reactions: StatusReactions
    inbox_id: int | None = None
    answer: str | None = None
    """An answer an earlier process saved but did not finish delivering: no new run."""
    parts: list[str] = field(default_factory=list)
    """Platform ids of the chunks of ``answer`` already delivered."""
    saved_at: float | None = None
    """When an earlier process last recorded ``answer``'s delivery (Unix time): the chunk after
    ``parts`` may have gone out since, unrecorded."""
    previews: list[str] = field(default_factory=list)
    """Preview messages an earlier process's stream left in the chat: deleted before the
    answer goes out."""
    replayed: bool = False
    started: bool = False
    """Stored as ``running`` already (it was to start at once): no second write for it."""
    outcome: tuple[InboxState, str | None] | None = None
    """How the turn ends, once its answer (or apology, or silence) is fully delivered."""
    drop_reason: str = QUEUE_FULL
    stream: StreamOptions | None = None
    """How this answer streams (``channels.<name>.streaming``), None: sent whole when done."""
    interrupted: bool = False
    """Cancelled by a newer message (``bot.queue_mode: interrupt``), not by ``/stop``."""
    absorbed: list[int] = field(default_factory=list)
    """Inbox ids of earlier messages of a burst merged into this turn (``bursts.py``): they end
    with this job's entry."""
    done: asyncio.Future[RunResult | None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    @property
    def requester_id(self) -> str:
        return self.message.sender.id

    def settle(self, result: RunResult | None) -> None:
        if not self.done.done():
            self.done.set_result(result)
