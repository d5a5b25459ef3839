"""``cron``: the model schedules a message for later, once or repeating (spec section 1, phase 5).

``{"action": "add", "schedule": S, "message": M}``, ``{"action": "list"}`` and
``{"action": "remove", "id": ID}``. The tool knows nothing of chats or storage: where a job is
kept and which chat it belongs to is the bot's (:class:`CronJobs`, ``bot/scheduling``). When a
job is due, its message becomes a new turn of the agent in the chat it was made in; the tool
only returns at once (an async tool, tracked apart from the others).

Everything the model can get wrong is a tool error that says what to do instead: an unknown
schedule form, a time in the past, too many jobs, a repeating job more often than allowed
(:mod:`agent_core.schedules`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from agent_core.errors import ToolError
from agent_core.schedules import FORMATS, Schedule, ScheduleError, parse_schedule
from agent_core.tools.base import Tool, ToolContext, ToolKind

CRON = "cron"
MAX_MESSAGE_CHARS = 4000


class CronRefused(ToolError):
    """The bot can't keep a job for this run (e.g. a chat with no way back after a restart)."""

    def __init__(self, message: str) -> None:
        super().__init__(CRON, message)


@dataclass(frozen=True, slots=True)
class CronJob:
    id: str
    schedule: Schedule
    message: str
    next_run_at: datetime | None
    paused: bool = False


@dataclass(frozen=True, slots=True)
class CronPolicy:
    """The limits of one agent's jobs (``cron.*`` in config.yaml)."""

    timezone: str = "UTC"
    max_jobs_per_user: int = 20
    min_interval: float = 60.0


class CronJobs(Protocol):
    """Where jobs live; the bot's implementation binds them to the calling run's chat."""

    async def add(
        self, ctx: ToolContext, schedule: Schedule, message: str, next_run_at: datetime
    ) -> str:
        """Keep a new job of the calling user in the calling chat; returns its id. Raises
        :class:`CronRefused` when this run can't have jobs."""
        ...

    async def count(self, ctx: ToolContext) -> int:
        """How many active jobs the calling user has, in every chat."""
        ...

    async def list(self, ctx: ToolContext) -> list[CronJob]:
        """The calling user's active jobs in the calling chat."""
        ...

    async def remove(self, ctx: ToolContext, job_id: str) -> bool:
        """Remove one of the calling user's jobs in the calling chat; False if none."""
        ...


_DESCRIPTION = (
    "Schedule a message to yourself for later: when it is due, it comes back to you as a new "
    "turn in this chat and your answer is sent to the user (answer NO_REPLY to send nothing). "
    'Actions: {"action": "add", "schedule": S, "message": M} (returns the job id and its next '
    'run), {"action": "list"}, {"action": "remove", "id": ID}. The schedule is ' + FORMATS + ". "
    "Times without an offset are in the time zone given in the Time section. Write the message "
    "as an instruction to yourself, e.g. 'Remind the user to call Anna.'"
)

_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ["add", "list", "remove"]},
        "schedule": {"type": "string", "description": "for add: when (see the description)"},
        "message": {"type": "string", "description": "for add: what to do when it is due"},
        "id": {"type": "string", "description": "for remove: the job's id"},
    },
    "required": ["action"],
}


def cron_tool(
    jobs: CronJobs,
    policy: CronPolicy,
    *,
    clock: Callable[[], datetime] | None = None,
    name: str = CRON,
) -> Tool:
    """The ``cron`` tool of one agent; ``clock`` () → aware datetime (tests)."""
    now_of = clock or (lambda: datetime.now(UTC))

    async def handler(args: dict[str, Any], ctx: ToolContext) -> str:
        action = args.get("action")
        if action == "add":
            return await _add(args, ctx)
        if action == "list":
            return await _list(ctx)
        if action == "remove":
            job_id = args.get("id")
            if not isinstance(job_id, str) or not job_id.strip():
                raise ToolError(name, "'remove' needs the job's 'id' (see action 'list')")
            if not await jobs.remove(ctx, job_id.strip()):
                raise ToolError(
                    name, f"no job {job_id.strip()!r} of yours in this chat (see action 'list')"
                )
            return f"Removed job {job_id.strip()}."
        raise ToolError(name, "'action' must be one of: add, list, remove")

    async def _add(args: dict[str, Any], ctx: ToolContext) -> str:
        schedule_text, message = args.get("schedule"), args.get("message")
        if not isinstance(schedule_text, str) or not schedule_text.strip():
            raise ToolError(name, f"'add' needs a 'schedule': {FORMATS}")
        if not isinstance(message, str) or not message.strip():
            raise ToolError(name, "'add' needs a 'message': what to do when the job is due")
        if len(message) > MAX_MESSAGE_CHARS:
            raise ToolError(name, f"the message is longer than {MAX_MESSAGE_CHARS} characters")
        now = now_of()
        try:
            schedule = parse_schedule(
                schedule_text, policy.timezone, now, min_interval=policy.min_interval
            )
        except ScheduleError as exc:
            raise ToolError(name, str(exc)) from exc
        if await jobs.count(ctx) >= policy.max_jobs_per_user:
            raise ToolError(
                name,
                f"you already have {policy.max_jobs_per_user} scheduled jobs, the most allowed: "
                "remove one first (actions 'list' and 'remove')",
            )
        first = schedule.first_run(now)
        if first is None:  # a cron expression croniter could not continue
            raise ToolError(name, f"{schedule.text!r} never runs")
        job_id = await jobs.add(ctx, schedule, message.strip(), first)
        kind = "repeating" if schedule.repeating else "once"
        return (
            f"Scheduled job {job_id} ({kind}, {schedule.text}); next run: "
            f"{schedule.describe(first)}."
        )

    async def _list(ctx: ToolContext) -> str:
        found = await jobs.list(ctx)
        if not found:
            return "No scheduled jobs in this chat."
        lines = [f"{len(found)} scheduled job(s):"]
        for job in found:
            paused = " (paused)" if job.paused else ""
            lines.append(
                f"- {job.id}: {job.schedule.text}; next run: "
                f"{job.schedule.describe(job.next_run_at)}{paused}; message: {job.message}"
            )
        return "\n".join(lines)

    return Tool(
        name=name,
        description=_DESCRIPTION,
        parameters=_PARAMETERS,
        handler=handler,
        kind=ToolKind.ASYNC,
    )
