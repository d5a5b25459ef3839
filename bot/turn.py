"""One inbound message, start to finish: typing, reactions, the agent run, delivery, cleanup."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import structlog

from agent_core import Event, EventBus, EventType, RunRequest, RunResult, RunStatus
from agent_core.events import Subscriber
from bot.agents import AgentRouter, UnknownAgent
from bot.config import BotConfig
from bot.delivery import deliver, send_with_retry
from bot.reactions import ReactionState, StatusReactions
from bot.run_registry import ActiveRun, RunRegistry
from bot.typing_indicator import TypingIndicator
from channels import Channel, InboundMessage, ProgressReporter

log = structlog.get_logger(__name__)

UNKNOWN_AGENT = "unknown_agent"  # RunResult.error when the job's agent can't be resolved
_NOT_OK = (RunStatus.FAILED, RunStatus.BUDGET_EXCEEDED)


@dataclass(eq=False)
class Job:
    """A message waiting for, or being given, an answer."""

    message: InboundMessage
    agent_id: str
    session_key: str
    concurrency: int
    run_id: str
    reactions: StatusReactions
    done: asyncio.Future[RunResult | None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    @property
    def requester_id(self) -> str:
        return self.message.sender.id

    def settle(self, result: RunResult | None) -> None:
        if not self.done.done():
            self.done.set_result(result)


@dataclass
class TurnRunner:
    config: BotConfig
    router: AgentRouter
    registry: RunRegistry
    events: EventBus

    async def execute(self, job: Job, channel: Channel) -> None:
        """Run the agent for ``job`` and deliver the answer; never raises (except shutdown)."""
        msg = job.message
        typing = TypingIndicator(
            channel, msg.chat, interval=self.config.typing_interval, ttl=self.config.typing_ttl
        )
        typing.start()
        task = asyncio.current_task()
        assert task is not None
        self.registry.register(
            ActiveRun(job.run_id, job.agent_id, job.session_key, job.requester_id, task)
        )
        unsubscribe = self.events.subscribe(
            self._reaction_updater(job), session_key=job.session_key
        )
        result: RunResult | None = None
        try:
            result = await self._run(job)
            # Typing stops before the first message goes out, never after it.
            await typing.stop()
            await self._deliver(job, channel, result)
        except asyncio.CancelledError:
            result = RunResult(run_id=job.run_id, status=RunStatus.CANCELLED)
            log.info("run.cancelled", run_id=job.run_id, session_key=job.session_key)
        except Exception:
            log.exception("turn.failed", run_id=job.run_id, session_key=job.session_key)
            result = RunResult(run_id=job.run_id, status=RunStatus.FAILED, error="delivery")
        finally:
            unsubscribe()
            self.registry.unregister(job.run_id)
            await typing.stop()
            # A context-budget stop delivers its notice but ends with the failure reaction.
            ok = result is not None and result.status not in _NOT_OK
            await job.reactions.finish(ok=ok)
            job.settle(result)

    async def _run(self, job: Job) -> RunResult:
        msg = job.message
        try:
            loop = await self.router.resolve(job.agent_id)
        except UnknownAgent as exc:
            # e.g. channels.<name>.agent names an agent deleted from the database.
            log.error("run.unknown_agent", run_id=job.run_id, agent_id=job.agent_id, error=str(exc))
            return RunResult(run_id=job.run_id, status=RunStatus.FAILED, error=UNKNOWN_AGENT)
        request = RunRequest(
            session_key=job.session_key,
            message=msg.text,
            user_id=f"{msg.chat.channel}:{msg.sender.id}",
            agent_id=job.agent_id,
            channel=msg.chat.channel,
            chat_type=msg.chat.chat_type.value,
            sender_name=msg.sender.name,
            run_id=job.run_id,
        )
        return await loop.run(request)

    async def _deliver(self, job: Job, channel: Channel, result: RunResult) -> None:
        msg = job.message
        reply_to = msg.message_id if msg.chat.chat_type.value == "group" else None
        if result.status is RunStatus.FAILED:
            # The user gets a short apology; the details are in the log and the trace.
            log.warning("run.error_reply", run_id=job.run_id, error=result.error)
            if not self.config.silent_errors:
                unknown = result.error == UNKNOWN_AGENT
                reply = self.config.unknown_agent_reply if unknown else self.config.error_reply
                await send_with_retry(channel, msg.chat, reply, reply_to=reply_to)
            return
        if result.silent:
            log.info("run.no_reply", run_id=job.run_id, session_key=job.session_key)
            return
        await deliver(channel, msg.chat, result.content, reply_to=reply_to)

    def _reaction_updater(self, job: Job) -> Subscriber:
        channel = job.reactions.channel
        reporter = channel if isinstance(channel, ProgressReporter) else None

        async def on_event(event: Event) -> None:
            if event.run_id != job.run_id:
                return
            if event.type is EventType.ACTIVITY:
                phase = event.payload.get("phase")
                job.reactions.progress(
                    ReactionState.TOOL if phase == "tool_exec" else ReactionState.THINKING
                )
                if reporter is not None and phase == "thinking":
                    reporter.show_progress(job.reactions.message, None)
            elif event.type is EventType.TOOL_CALL and reporter is not None:
                reporter.show_progress(job.reactions.message, str(event.payload.get("name", "")))

        return on_event
