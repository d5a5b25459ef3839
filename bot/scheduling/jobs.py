"""The ``cron`` tool's jobs, kept in the database and bound to the chat of the run that made them.

:class:`ChatCronJobs` is the bot's side of :class:`agent_core.tools.CronJobs`: agent_core
knows no chats, so the chat comes from the run's origin (the inbound message it answers).
"""

from __future__ import annotations

from datetime import datetime

from agent_core import Schedule
from agent_core.tools import CronJob, CronRefused, ToolContext
from bot.storage.cron import SOURCE_TOOL, SqlCronJobs, StoredCronJob
from channels import InboundMessage


def _chat(origin: InboundMessage) -> str:
    return f"{origin.chat.channel}:{origin.chat.chat_id}"


def _user(origin: InboundMessage) -> str:
    return f"{origin.chat.channel}:{origin.sender.id}"


def as_tool_job(job: StoredCronJob) -> CronJob:
    return CronJob(job.id, job.schedule, job.message, job.next_run_at, job.paused)


class ChatCronJobs:
    """Satisfies :class:`agent_core.tools.CronJobs`."""

    def __init__(self, store: SqlCronJobs) -> None:
        self.store = store

    @staticmethod
    def origin(ctx: ToolContext) -> InboundMessage:
        request = ctx.request
        origin = request.origin if request is not None else None
        if not isinstance(origin, InboundMessage):
            raise CronRefused("this run has no chat to come back to: jobs can't be scheduled here")
        if request is not None and request.depth > 0:
            raise CronRefused("only the agent talking with the user can schedule jobs")
        return origin

    async def add(
        self, ctx: ToolContext, schedule: Schedule, message: str, next_run_at: datetime
    ) -> str:
        job = await self.store.add(
            agent_id=ctx.agent_id,
            session_key=ctx.session_key,
            origin=self.origin(ctx),
            schedule=schedule,
            message=message,
            next_run_at=next_run_at,
        )
        return job.id

    async def count(self, ctx: ToolContext) -> int:
        return await self.store.count_active(_user(self.origin(ctx)))

    async def list(self, ctx: ToolContext) -> list[CronJob]:
        origin = self.origin(ctx)
        found = await self.store.list(
            user_id=_user(origin), chat=_chat(origin), source=SOURCE_TOOL, active_only=True
        )
        return [as_tool_job(job) for job in found]

    async def remove(self, ctx: ToolContext, job_id: str) -> bool:
        origin = self.origin(ctx)
        return await self.store.remove(job_id, user_id=_user(origin), chat=_chat(origin))
