"""The entry point of every inbound message, whatever the channel.

``Gateway.handle`` order matters: commands first (so /stop acts at once, never waiting behind
the run it should stop, and once: they are deduped on their own), then gating and the sender's
rate limit, then the durable inbox, whose insert records the dedupe key in the same transaction
(a platform retry is not a new message), then bursts (``bursts.py``: debounce and queue mode
merge a burst into one turn), which own the per-session scheduler; the scheduler runs the turn
(``turn.py``) and hands the ended job back to bursts. The gateway is not in that loop.

``handle`` returns once the message is stored, so a channel acknowledges the platform only for
what a crash can no longer lose; when it can't be stored (shut down, database down) it raises
``NotAccepted`` and the platform delivers it again.

During a drain (:meth:`Gateway.hand_over`) the channels keep receiving: commands still act at
once (a ``/stop`` sent during a deploy stops the answer it means), and every other message is
stored unowned and left for the next process, which takes it from the inbox.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Protocol

import structlog

from agent_core import EventBus
from agent_core.orchestration import Announcement
from bot.agents.router import AgentRouter
from bot.config import Config
from bot.pipeline.access import AccessPolicy
from bot.pipeline.approvals import ExecApprovals
from bot.pipeline.bursts import Bursts
from bot.pipeline.commands import HELP_TEXT, Command, parse_command
from bot.pipeline.dedupe import DedupeStore, first_delivery
from bot.pipeline.delivery import send_with_retry
from bot.pipeline.job import CRON_JOB, Job
from bot.pipeline.media import build_transcriber
from bot.pipeline.ports import WorkClaims
from bot.pipeline.reactions import StatusReactions
from bot.pipeline.run_registry import RunRegistry
from bot.pipeline.scheduler import Scheduler
from bot.pipeline.sender_limits import MemorySenderLimiter, SenderLimiter, within_sender_limit
from bot.pipeline.session_keys import session_key
from bot.pipeline.stop import StopService
from bot.pipeline.streaming import StreamOptions, streaming_options
from bot.pipeline.turn import TurnRunner
from bot.storage.inbox import InboxEntry, SqlInbox
from bot.storage.usage import SqlUsage
from bot.telemetry.metrics import Metrics
from bot.usage.summary import user_summary
from channels import MEDIA_GROUP, Channel, ChatType, InboundMessage, MessageRef, NotAccepted

log = structlog.get_logger(__name__)

ANNOUNCEMENT = "announcement"  # metadata key of a background result's turn: its task id


class SessionResetter(Protocol):
    async def reset_session(self, session_key: str) -> object: ...


class Gateway:
    def __init__(
        self,
        config: Config,
        *,
        router: AgentRouter,
        registry: RunRegistry,
        dedupe: DedupeStore,
        events: EventBus,
        sessions: SessionResetter,
        access: AccessPolicy | None = None,
        inbox: SqlInbox | None = None,
        channel_ready: Callable[[str], Awaitable[None]] | None = None,
        limiter: SenderLimiter | None = None,
        usage: SqlUsage | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        """``inbox`` None: nothing is stored (the terminal chat, whose answers have nowhere to
        go after a restart). ``channel_ready`` waits until a channel can send (replays).
        ``usage``: the hourly usage rollup ``/usage`` reads (bot/usage). ``metrics``: the
        service's, where each turn's outcome is counted."""
        self.usage = usage
        self.config = config
        self.router = router
        self.registry = registry
        self.dedupe = dedupe
        self.events = events
        self.sessions = sessions
        self.access = access or AccessPolicy(config)
        self.inbox = inbox
        limit = config.bot.sender_rate_limit
        if limiter is None and limit != "off":
            limiter = MemorySenderLimiter(limit.per_minute, limit.burst)
        self.limiter = limiter
        self.accepting = True
        """New messages run here; False from the drain on."""
        self.storing = True
        """New messages are stored (for the next process while draining); False once shut."""
        self.work: WorkClaims | None = None
        """Set by :meth:`distribute` when several processes share the inbox."""
        self.local_channels: frozenset[str] = frozenset()
        """Channels whose chats live in this process (web chat, terminal): never handed to
        another process, whatever ``work`` says."""
        self.channels: dict[str, Channel] = {}
        self._streams: dict[str, StreamOptions | None] = {}
        self.turns = TurnRunner(
            config.bot,
            router,
            registry,
            events,
            inbox,
            channels=self.channels,
            channel_ready=channel_ready,
            cron_history_turns=config.cron.history_turns,
            media=config.media,
            metrics=metrics or Metrics(),
            transcriber=build_transcriber(config),
        )
        self.bursts = Bursts(config.bot, registry, self.turns, inbox=inbox)
        self.stop = StopService(config, registry, self.bursts)
        self.approvals = ExecApprovals(self.channels)
        """Commands of ``exec`` waiting for an owner's /approve (the router's approver)."""

    @property
    def scheduler(self) -> Scheduler[Job]:
        """The per-session scheduler (owned by bursts)."""
        return self.bursts.scheduler

    def distribute(self, work: WorkClaims) -> None:
        """Several processes share the inbox from now on (``bot/cluster/work.py``)."""
        self.work = work
        self.stop.work = work
        self.scheduler.on_idle = work.went_idle

    def has_channel(self, name: str) -> bool:
        return name in self.channels

    def submit(self, job: Job) -> None:
        """A stored message's job: on to bursts (and from there the scheduler)."""
        self.bursts.submit(job)

    def drop_waiting(self, key: str, sender: str, *, admin: bool) -> list[Job]:
        """``/stopall`` received by another process (see :class:`StopService`)."""
        return self.stop.drop_waiting(key, sender, admin=admin)

    def add_channel(self, channel: Channel) -> None:
        self.channels[channel.name] = channel
        # Once per channel, not per message (runtime protocol checks are not free).
        self._streams[channel.name] = streaming_options(self.config.channels, channel)

    def agent_for(self, channel: str) -> str:
        channel_config = getattr(self.config.channels, channel, None)
        agent = getattr(channel_config, "agent", None)
        return agent or self.config.agents.default

    async def handle_inbound(self, msg: InboundMessage) -> None:
        """The ``InboundHandler`` given to channels."""
        await self.handle(msg)

    def hand_over(self) -> None:
        """The drain begins: messages are stored for the next process instead of run here;
        commands still act."""
        self.accepting = False

    def stop_accepting(self) -> None:
        """From now on ``handle`` raises ``NotAccepted`` (the service is shutting down)."""
        self.accepting = False
        self.storing = False

    async def handle(self, msg: InboundMessage) -> Job | None:
        """Accept one inbound message; returns the queued job, or None when nothing will run.

        Raises ``NotAccepted`` when the message could not be stored: don't acknowledge it.
        """
        if not self.storing:
            raise NotAccepted("the service is shutting down")
        channel = self.channels[msg.chat.channel]
        agent_id = self.agent_for(msg.chat.channel)
        key = session_key(agent_id, msg.chat)
        command = parse_command(msg.text, msg.metadata.get("bot_username"))
        if command is not None:
            if not await first_delivery(self.dedupe, msg.dedupe_key):
                return None
            await self._command(command, msg, channel, key)
            return None
        decision = await self.access.check(msg)
        if not decision.allowed:
            log.info(
                "inbound.skipped",
                reason=decision.reason,
                channel=msg.chat.channel,
                chat=msg.chat.chat_id,
                sender=msg.sender.id,
            )
            if decision.reply and await first_delivery(self.dedupe, msg.dedupe_key):
                await send_with_retry(channel, msg.chat, decision.reply)
            return None
        if not msg.text.strip() and not msg.attachments:
            log.info("inbound.skipped", reason="empty", chat=msg.chat.chat_id)
            return None
        handing_over = not self.accepting
        if handing_over and (self.inbox is None or msg.chat.channel in self.local_channels):
            # Its chat lives in this process only: no next process could answer it.
            raise NotAccepted("the service is shutting down")
        if not await within_sender_limit(self.limiter, self.config, msg, channel):
            return None
        job = self._job(msg, agent_id, key)
        if handing_over:
            await self._store_for_next_process(job, msg)
            return None
        shared = (
            self.work is not None
            and self.inbox is not None
            and msg.chat.channel not in self.local_channels
            and not await self.work.hold(job)
        )
        kept = False
        if self.inbox is None:
            if not await first_delivery(self.dedupe, msg.dedupe_key):
                return None
        else:
            # Kept here without a claim: a session this process holds (see WorkClaims.hold).
            kept = (
                self.work is not None and msg.chat.channel not in self.local_channels and not shared
            )
            try:
                # The dedupe record and the stored message are one transaction: a redelivery
                # is either this message's duplicate or was never taken, nothing in between.
                starts = not shared and self.bursts.starts_at_once(job)
                await self._store(
                    job, msg.dedupe_key, starts=starts, owned=not shared, behind_waiting=kept
                )
            except Exception as exc:
                log.error("inbound.not_accepted", reason="inbox_failed", error=str(exc))
                raise NotAccepted("the database is unavailable") from exc
            if job.inbox_id is None:
                log.info("inbound.duplicate", key=msg.dedupe_key)
                return None
            if kept and not self.inbox.holds(job.inbox_id):
                # An older message of the session, received by another process, waits for
                # this one's claim (its nudge is still on the way): stored behind it, it is
                # claimed after it.
                shared, kept, job.started = True, False, False
        job.reactions.received_soon()  # overlaps the turn's start (history, prompt, model)
        if shared and self.work is not None:
            # Queued here only if this process takes the session.
            self.work.dispatch(job)
        else:
            if kept and self.work is not None:
                self.work.kept(job)
            self.bursts.submit(job)
        return job

    async def _store_for_next_process(self, job: Job, msg: InboundMessage) -> None:
        """Drain: store the message unowned and queued; the next process (or a peer) takes it
        from the inbox. Nothing runs here, so it gets no reactions either."""
        try:
            await self._store(job, msg.dedupe_key, starts=False, owned=False)
        except Exception as exc:
            log.error("inbound.not_accepted", reason="inbox_failed", error=str(exc))
            raise NotAccepted("the database is unavailable") from exc
        if job.inbox_id is None:
            log.info("inbound.duplicate", key=msg.dedupe_key)
        else:
            log.info(
                "inbound.left_for_next_process",
                entry=job.inbox_id,
                channel=msg.chat.channel,
                session_key=job.session_key,
            )

    async def _store(
        self,
        job: Job,
        dedupe_key: str,
        *,
        starts: bool,
        owned: bool = True,
        answer: str | None = None,
        behind_waiting: bool = False,
    ) -> None:
        """Put the job's message in the inbox (``running`` at once when it ``starts``); its
        ``inbox_id`` stays None for a duplicate. Raises what the database raised."""
        assert self.inbox is not None
        job.started = starts
        job.inbox_id = await self.inbox.accept(
            job.message,
            dedupe_key=dedupe_key,
            session_key=job.session_key,
            agent_id=job.agent_id,
            running=starts,
            owned=owned,
            answer=answer,
            behind_waiting=behind_waiting,
        )

    async def announce(self, announcement: Announcement) -> None:
        """A background child's result, as a new turn of the session that started it: the
        agent reads it and answers the user through the usual pipeline (typing, NO_REPLY,
        chunking). Stored in the inbox like any message; no reactions (no user message)."""
        child = announcement.child
        parent = child.parent
        origin = parent.origin
        if not isinstance(origin, InboundMessage) or origin.chat.channel not in self.channels:
            log.warning("announce.no_chat", task_id=child.task_id, session_key=parent.session_key)
            return
        if not self.accepting:
            log.warning("announce.dropped", task_id=child.task_id, reason="shutting down")
            return
        msg = replace(
            origin,
            text=announcement.text,
            reply_to_text=None,
            received_at=datetime.now(UTC),
            metadata={**origin.metadata, ANNOUNCEMENT: child.task_id},
        )
        job = self._job(msg, parent.agent_id, parent.session_key)
        if self.inbox is not None:
            starts = self.scheduler.starts_at_once(job.session_key, job.concurrency)
            try:
                await self._store(job, f"announce:{child.task_id}", starts=starts)
            except Exception as exc:  # still announced, just not durable
                log.warning("announce.not_stored", task_id=child.task_id, error=str(exc))
                job.started = False
            else:
                if job.inbox_id is None:  # this task's result was announced before
                    log.info("announce.duplicate", task_id=child.task_id)
                    return
        log.info("announce.queued", task_id=child.task_id, session_key=job.session_key)
        self.scheduler.submit(job)

    async def enqueue(
        self,
        msg: InboundMessage,
        *,
        agent_id: str,
        session_key: str,
        dedupe_key: str,
        answer: str | None = None,
    ) -> Job | None:
        """A turn nobody typed (a scheduled job's occurrence, ``bot/scheduling``), into the
        inbox under ``dedupe_key`` and on to the scheduler (never merged with a burst).
        None when the key was taken before: another process fired the same occurrence.
        ``answer``: delivered as it is, without a run. Raises ``NotAccepted`` while shutting
        down, and what the database raised."""
        if not self.accepting or self.inbox is None:
            raise NotAccepted("the service is shutting down")
        job = self._job(msg, agent_id, session_key, answer=answer)
        # With several processes the chat's session holder runs it, in order with the chat's
        # messages, as it runs a message another process received.
        shared = self.work is not None and msg.chat.channel not in self.local_channels
        starts = not shared and self.scheduler.starts_at_once(job.session_key, job.concurrency)
        await self._store(job, dedupe_key, starts=starts, owned=not shared, answer=answer)
        if job.inbox_id is None:
            return None
        if shared and self.work is not None:
            self.work.claim_soon(job.session_key)
        else:
            self.scheduler.submit(job)
        return job

    def resubmit(self, entry: InboxEntry, *, replayed: bool = True, started: bool = False) -> Job:
        """Queue an inbox entry an earlier process left unanswered (see ``bot/pipeline/replay.py``);
        ``replayed`` False: one a peer process received and this one claimed; ``started``: the
        claim marked it ``running`` already (no ``start`` write)."""
        job = self._job(
            entry.message,
            entry.agent_id,
            entry.session_key,
            inbox_id=entry.id,
            answer=entry.answer,
            parts=list(entry.parts),
            previews=list(entry.previews),
            saved_at=entry.updated_at.timestamp() if entry.answer is not None else None,
            replayed=replayed,
        )
        job.started = started
        if MEDIA_GROUP in entry.message.metadata and entry.answer is None:
            self.bursts.submit(job)  # an album's parts are one turn again
        else:
            self.scheduler.submit(job)
        return job

    def busy_sessions(self) -> set[str]:
        """Sessions with a message waiting or running here."""
        return self.scheduler.sessions | self.bursts.sessions

    def idle(self, session_key: str) -> bool:
        # An album's parts still wait for their window: its entry then shows ``running`` for
        # that wait (up to the album wait), which a replay treats as it treats ``queued``.
        return (
            not self.bursts.debounce
            and session_key not in self.bursts.sessions
            and self.scheduler.starts_at_once(session_key, 1)
        )

    def _job(self, msg: InboundMessage, agent_id: str, key: str, **replay: Any) -> Job:
        bot = self.config.bot
        group = msg.chat.chat_type is ChatType.GROUP
        channel = self.channels[msg.chat.channel]
        return Job(
            message=msg,
            agent_id=agent_id,
            session_key=key,
            concurrency=bot.group_concurrency if group else bot.dm_concurrency,
            run_id=uuid.uuid4().hex,
            stream=self._streams.get(channel.name),
            reactions=StatusReactions(
                channel,
                MessageRef(msg.chat, msg.message_id),
                # An announcement or a scheduled job answers no new user message: nothing to
                # react on.
                enabled=bot.reactions
                and ANNOUNCEMENT not in msg.metadata
                and CRON_JOB not in msg.metadata,
                cleanup=bot.reaction_cleanup,
            ),
            **replay,
        )

    async def aclose(self) -> None:
        """Shutdown: cancel what waits or runs; the inbox keeps it for the next process."""
        await self.bursts.aclose()
        await self.turns.cleanups.aclose()  # the turns' last reactions, channels still open

    async def _command(
        self, command: Command, msg: InboundMessage, channel: Channel, key: str
    ) -> None:
        reply: str
        if command in (Command.STOP, Command.STOPALL):
            reply = await self.stop.command(
                msg, channel, key, everything=command is Command.STOPALL
            )
        elif command is Command.USAGE:
            reply = "Usage is not recorded here."
            if self.usage is not None:
                reply = await user_summary(self.usage, f"{channel.name}:{msg.sender.id}")
        elif command is Command.RESET:
            await self.sessions.reset_session(key)
            reply = "New conversation started."
        elif command in (Command.APPROVE, Command.DENY):
            reply = await self.approvals.answer(msg, approve=command is Command.APPROVE)
        else:
            reply = HELP_TEXT
        log.info("command.handled", command=str(command), session_key=key, sender=msg.sender.id)
        await send_with_retry(channel, msg.chat, reply)
