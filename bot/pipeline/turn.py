"""One inbound message, start to finish: typing, reactions, the agent run, delivery, cleanup.

Each step is recorded in the durable inbox (``bot/storage/inbox.py``): ``running`` when the
turn starts, a multi-chunk answer before its first chunk goes out, each chunk's platform id
once sent (the last one with the end state), and a streamed answer's preview messages as they
are posted. A turn cancelled by a shutdown gives its entry back for the next process; one that
finds previews of a process that died deletes them before it answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace

import structlog

from agent_core import (
    AgentSettings,
    Event,
    EventBus,
    EventType,
    RunRequest,
    RunResult,
    RunStatus,
    Subscriber,
    finish_despite_cancel,
    user_workspace,
)
from agent_core.providers import Transcriber
from bot.agents.router import AgentRouter, UnknownAgent
from bot.config import BotConfig, MediaConfig
from bot.pipeline.delivery import deliver, send_with_retry
from bot.pipeline.job import CRON_AT, CRON_JOB, CRON_SCHEDULE, Job, ended_ok
from bot.pipeline.leftovers import remove_previews, sent_lookup
from bot.pipeline.media import FetchedMedia, MediaContext, fetch_media
from bot.pipeline.outcomes import dropped_outcome, turn_outcome
from bot.pipeline.reactions import ReactionCleanups, ReactionState
from bot.pipeline.run_registry import ActiveRun, RunRegistry
from bot.pipeline.streaming import StreamedReply
from bot.pipeline.streaming.reply import StreamClock
from bot.pipeline.typing_indicator import TypingIndicator
from bot.storage.inbox import EntryTakenOver, InboxState, SqlInbox
from bot.telemetry.metrics import Metrics
from channels import (
    Channel,
    InboundMessage,
    ProgressReporter,
    SentLookup,
)

log = structlog.get_logger(__name__)

UNKNOWN_AGENT = "unknown_agent"  # RunResult.error when the job's agent can't be resolved
_CHILD_EVENTS = (EventType.CHILD_STARTED, EventType.CHILD_COMPLETED)


@dataclass
class TurnRunner:
    config: BotConfig
    router: AgentRouter
    registry: RunRegistry
    events: EventBus
    inbox: SqlInbox | None = None
    shutting_down: bool = False
    """Set before the service cancels what still runs: those turns go back to the inbox
    instead of ending as stopped."""
    stream_clock: StreamClock = field(default_factory=StreamClock)
    channels: Mapping[str, Channel] = field(default_factory=dict)
    """The channels by name (the gateway's): where each job's answer goes."""
    channel_ready: Callable[[str], Awaitable[None]] | None = None
    """Waits until a channel can send: a replayed job may come before its channel is up."""
    cron_history_turns: int = 0
    """Past turns a scheduled job's run sees (``cron.history_turns``)."""
    media: MediaConfig = field(default_factory=MediaConfig)
    metrics: Metrics = field(default_factory=Metrics)
    """Where each turn's outcome is counted (``GET /metrics``)."""
    cleanups: ReactionCleanups = field(default_factory=ReactionCleanups)  # turns' last reactions
    transcriber: Transcriber | None = None
    """Where voice messages and audio files become text (``media.transcription``)."""

    async def run(self, job: Job) -> None:
        """The scheduler's step: ``job``'s turn, in the channel it came from."""
        name = job.message.chat.channel
        if job.replayed:
            if self.channel_ready is not None:
                await self.channel_ready(name)
            # The process that died may have left its progress reaction on the message.
            await job.reactions.recover()
        await self.execute(job, self.channels[name])

    async def dropped(self, job: Job) -> None:
        """``job`` will not run (queue full, ``/stopall``): its reaction and entries end."""
        self.metrics.turn_ended(job.message.chat.channel, dropped_outcome(job))
        await job.reactions.finish(ok=False)
        if self.inbox is not None:
            entries = [e for e in (job.inbox_id, *job.absorbed) if e is not None]
            try:
                for entry in entries:
                    await self.inbox.finish(entry, InboxState.DROPPED, job.drop_reason)
            except Exception as exc:
                log.warning("inbox.update_failed", entry=job.inbox_id, error=str(exc))
        job.settle(None)

    async def execute(self, job: Job, channel: Channel) -> None:
        """Run the agent for ``job`` and deliver the answer; never raises (except shutdown)."""
        msg = job.message
        if not await self._start_entry(job):
            job.settle(None)
            return
        if job.previews:
            await remove_previews(job, channel, self.inbox)
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
        streamed = self._streamed(job, channel, typing)
        if streamed is not None:
            unsubscribe_stream = self.events.subscribe(
                streamed.on_event, session_key=job.session_key
            )
        result: RunResult | None = None
        end: tuple[InboxState, str | None] | None = None
        try:
            if job.answer is not None:
                # An earlier process computed this answer and died delivering it.
                result = RunResult(
                    run_id=job.run_id, status=RunStatus.COMPLETED, content=job.answer
                )
            else:
                result = await self._run(job)
            # Once there is an answer, a cancel (/stop, shutdown) waits for its delivery: a
            # chunk sent but not recorded would be sent again by the next process.
            end = await finish_despite_cancel(
                self._send(job, channel, typing, result, streamed), name="delivery"
            )
        except asyncio.CancelledError:
            if job.outcome is not None:
                # The answer went out; the cancel came too late to change anything.
                end = job.outcome
                log.info("run.cancel_after_delivery", run_id=job.run_id)
            elif self.shutting_down:
                # ``end`` stays None: the entry goes back to the inbox for the next process.
                result = RunResult(run_id=job.run_id, status=RunStatus.CANCELLED)
                log.info("run.interrupted", run_id=job.run_id, session_key=job.session_key)
                if streamed is not None:  # the next process answers anew: no half preview
                    await finish_despite_cancel(streamed.abandon(), name="stream.abandon")
            else:
                result = RunResult(run_id=job.run_id, status=RunStatus.CANCELLED)
                log.info("run.cancelled", run_id=job.run_id, session_key=job.session_key)
                end = (InboxState.DROPPED, "stopped")
                if streamed is not None:
                    stopped = not job.interrupted  # an interrupted preview is simply removed
                    await finish_despite_cancel(
                        streamed.abandon(stopped=stopped), name="stream.abandon"
                    )
        except EntryTakenOver:
            # Another process holds the entry now and answers it; this one stops sending.
            log.warning("inbox.taken_over", entry=job.inbox_id, run_id=job.run_id)
            result = RunResult(run_id=job.run_id, status=RunStatus.CANCELLED)
        except Exception as exc:
            log.exception("turn.failed", run_id=job.run_id, session_key=job.session_key)
            result = RunResult(run_id=job.run_id, status=RunStatus.FAILED, error="delivery")
            end = (InboxState.FAILED, f"delivery: {type(exc).__name__}: {exc}"[:500])
        finally:
            unsubscribe()
            if streamed is not None:
                unsubscribe_stream()
                await streamed.close()  # no preview update may follow the turn's end
            self.registry.unregister(job.run_id)
            await typing.stop()
            self.cleanups.finish_soon(job.reactions, ok=ended_ok(result))
            await self._record_end(job, end)
            self.metrics.turn_ended(msg.chat.channel, turn_outcome(job, end))
            job.settle(result)

    async def _start_entry(self, job: Job) -> bool:
        """Mark the job's inbox entry ``running``; False when another process holds it (this
        one lost its lease meanwhile): it is not run here."""
        if self.inbox is None or job.inbox_id is None or job.started:
            return True
        try:
            if await self.inbox.start(job.inbox_id):
                return True
        except Exception as exc:  # run it anyway: at worst it is run again later, not lost
            log.warning("inbox.update_failed", entry=job.inbox_id, error=str(exc))
            return True
        log.warning("inbox.taken_over", entry=job.inbox_id, run_id=job.run_id)
        return False

    def _streamed(
        self, job: Job, channel: Channel, typing: TypingIndicator
    ) -> StreamedReply | None:
        if job.stream is None or job.answer is not None:  # a saved answer is sent whole
            return None
        msg = job.message
        inbox, entry = self.inbox, job.inbox_id

        async def record_previews(message_ids: list[str]) -> None:
            if inbox is not None and entry is not None:
                await inbox.set_previews(entry, message_ids)

        return StreamedReply(
            channel,
            msg.chat,
            job.run_id,
            options=job.stream,
            clock=self.stream_clock,
            reply_to=_reply_to(msg),
            on_visible=typing.stop,  # typing stops when the first text is visible
            on_posted=record_previews,
        )

    async def _send(
        self,
        job: Job,
        channel: Channel,
        typing: TypingIndicator,
        result: RunResult,
        streamed: StreamedReply | None = None,
    ) -> tuple[InboxState, str | None]:
        # Typing stops before the first message goes out, never after it; 👀 shows before it.
        await typing.stop()
        await job.reactions.receipt_shown()
        if streamed is not None:
            sent = await self._finish_stream(job, streamed, result)
            if sent is not None:
                job.outcome = sent
                return sent
        job.outcome = await self._deliver(job, channel, result)
        return job.outcome

    async def _finish_stream(
        self, job: Job, streamed: StreamedReply, result: RunResult
    ) -> tuple[InboxState, str | None] | None:
        """End a streamed answer; None when nothing was streamed (deliver it as usual)."""
        if result.status in (RunStatus.FAILED, RunStatus.USAGE_LIMIT) or result.silent:
            await streamed.abandon()  # no preview stays; the usual path says the rest
            return None
        sent = await streamed.finish(result.content)
        if sent is None:
            return None
        if self.inbox is not None and job.inbox_id is not None:
            ids = [ref.message_id for ref in sent]
            await self.inbox.add_part(job.inbox_id, ids, last=True, answer=result.content)
        return InboxState.ANSWERED, None

    async def _record_end(self, job: Job, end: tuple[InboxState, str | None] | None) -> None:
        if self.inbox is None or job.inbox_id is None:
            return
        try:
            if end is None:
                await self.inbox.release(job.inbox_id, "interrupted by shutdown")
            elif end[0] is not InboxState.ANSWERED or end[1] is not None:
                await self.inbox.finish(job.inbox_id, *end)
            for entry in job.absorbed:
                if end is None:
                    await self.inbox.release(entry, "interrupted by shutdown")
                else:
                    await self.inbox.finish(entry, end[0], f"merged into entry {job.inbox_id}")
        except Exception as exc:
            # The entry stays pending and is run again by the next process: late, not lost.
            log.warning("inbox.update_failed", entry=job.inbox_id, error=str(exc))

    async def _run(self, job: Job) -> RunResult:
        """The agent's run; a crash of the agent (a bug, not a provider error, which the loop
        turns into a failed result itself) is a failed run too: the user gets the apology, and
        the entry's reason names the run, not the delivery."""
        try:
            return await self._run_agent(job)
        except Exception as exc:
            log.exception("run.crashed", run_id=job.run_id, session_key=job.session_key)
            error = f"{type(exc).__name__}: {exc}"[:300]
            return RunResult(run_id=job.run_id, status=RunStatus.FAILED, error=error)

    async def _run_agent(self, job: Job) -> RunResult:
        msg = job.message
        try:
            loop = await self.router.resolve(job.agent_id)
        except UnknownAgent as exc:
            # e.g. channels.<name>.agent names an agent deleted from the database.
            log.error("run.unknown_agent", run_id=job.run_id, agent_id=job.agent_id, error=str(exc))
            return RunResult(run_id=job.run_id, status=RunStatus.FAILED, error=UNKNOWN_AGENT)
        user_id = f"{msg.chat.channel}:{msg.sender.id}"
        media = (
            await self._fetch_media(msg, loop.settings, user_id)
            if msg.attachments
            else FetchedMedia()
        )
        request = RunRequest(
            session_key=job.session_key,
            message=media.model_text(msg.text),
            images=media.images,
            user_id=user_id,
            agent_id=job.agent_id,
            channel=msg.chat.channel,
            chat_type=msg.chat.chat_type.value,
            sender_name=msg.sender.name,
            run_id=job.run_id,
            chat_id=f"{msg.chat.channel}:{msg.chat.chat_id}",
            origin=msg,  # background children announce their results back to this chat
        )
        cron_job = msg.metadata.get(CRON_JOB)
        if cron_job is not None:
            request = replace(
                request,
                minimal_prompt=True,  # the spec's mode for cron runs (section 2)
                extra_context=cron_note(msg.metadata),
                cron_job_id=str(cron_job),
                history_turns=self.cron_history_turns,
            )
        return await loop.run(request)

    async def _fetch_media(
        self, msg: InboundMessage, settings: AgentSettings, user_id: str
    ) -> FetchedMedia:
        channel = self.channels.get(msg.chat.channel)
        if channel is None:
            return FetchedMedia()
        context = MediaContext(
            workspace=user_workspace(settings.workspace, user_id),
            quota=settings.workspace_max_bytes,
            config=self.media,
            transcriber=self.transcriber,
        )
        media = await fetch_media(channel, msg, context)
        if media.skipped and self.media.skipped_reply:
            items = ", ".join(str(s) for s in media.skipped)
            try:
                await send_with_retry(
                    channel,
                    msg.chat,
                    self.media.skipped_reply.format(items=items),
                    reply_to=_reply_to(msg),
                )
            except Exception as exc:  # the notice is a courtesy: the answer still goes out
                log.warning("media.skipped_reply_failed", error=str(exc))
        return media

    async def _deliver(
        self, job: Job, channel: Channel, result: RunResult
    ) -> tuple[InboxState, str | None]:
        """Send the answer; returns how the inbox entry ends."""
        msg = job.message
        reply_to = _reply_to(msg)
        if result.status is RunStatus.FAILED:
            # The user gets a short apology; the details are in the log and the trace.
            log.warning("run.error_reply", run_id=job.run_id, error=result.error)
            if not self.config.silent_errors:
                unknown = result.error == UNKNOWN_AGENT
                reply = self.config.unknown_agent_reply if unknown else self.config.error_reply
                await send_with_retry(channel, msg.chat, reply, reply_to=reply_to)
            return InboxState.FAILED, f"run: {result.error or 'failed'}"[:500]
        if result.status is RunStatus.USAGE_LIMIT:
            # One notice naming the reset; the message stays in the inbox, dropped with why.
            await send_with_retry(channel, msg.chat, result.content, reply_to=reply_to)
            return InboxState.DROPPED, f"usage limit: {result.error or 'reached'}"[:500]
        if result.silent:
            log.info("run.no_reply", run_id=job.run_id, session_key=job.session_key)
            return InboxState.ANSWERED, "NO_REPLY"
        inbox, entry = self.inbox, job.inbox_id
        if inbox is None or entry is None:
            await deliver(channel, msg.chat, result.content, reply_to=reply_to)
            return InboxState.ANSWERED, None
        parts = list(job.parts)
        closed = False
        unsaved: str | None = None

        async def before_first(chunks: int) -> None:
            nonlocal unsaved
            if job.answer is not None:
                if inbox.shared and not await inbox.confirm(entry):
                    raise EntryTakenOver(entry)
                return  # a replay: saved by the process that computed it
            if chunks > 1 or isinstance(channel, SentLookup):
                # Saved before chunk 1 goes out, so a crash after it resumes at chunk 2 with
                # the same text instead of running the agent again; and where the platform
                # can be asked, the replay asks whether the chunk in question went out.
                if not await inbox.save_answer(entry, result.content):
                    raise EntryTakenOver(entry)
            elif inbox.shared and not await inbox.confirm(entry):
                raise EntryTakenOver(entry)
            else:
                unsaved = result.content  # one chunk: saved with its delivery, one write less

        async def sent(message_id: str, last: bool) -> None:
            nonlocal closed
            parts.append(message_id)
            if not await inbox.add_part(entry, parts, last=last, answer=unsaved):
                raise EntryTakenOver(entry)
            closed = last

        await deliver(
            channel,
            msg.chat,
            result.content,
            reply_to=reply_to,
            skip=len(parts),
            before_first=before_first,
            on_sent=sent,
            was_sent=sent_lookup(job, channel),
        )
        # The last chunk's record ended the entry; an empty answer (nothing sent) ends here.
        return InboxState.ANSWERED, None if closed else "nothing to send"

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
            elif event.type in _CHILD_EVENTS and reporter is not None:
                helpers = int(event.payload.get("active_children", 0))
                reporter.show_progress(job.reactions.message, None, helpers=helpers)

        return on_event


def _reply_to(msg: InboundMessage) -> str | None:
    """A group answer quotes its message; a heartbeat's turn has none to quote."""
    return msg.message_id if msg.chat.chat_type.value == "group" and msg.message_id else None


def cron_note(metadata: Mapping[str, object]) -> str:
    """What a scheduled job's run is told about itself (the ``[Cron Job]`` note)."""
    return (
        f"[Cron Job] This turn was not typed by the user: it is the scheduled job "
        f"{metadata.get(CRON_JOB)} ({metadata.get(CRON_SCHEDULE)}), due at "
        f"{metadata.get(CRON_AT)}. The user message is the job's instruction, written when the "
        "job was made; carry it out and answer the user. If there is nothing to tell them, "
        "answer exactly NO_REPLY."
    )
