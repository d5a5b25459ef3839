"""Slack events and slash commands → :class:`~channels.types.InboundMessage`, each post once.

Dedupe: on ``event_id`` (Slack retries) and on ``channel:ts`` (the ``message`` + ``app_mention``
pair of one post), in memory and through the persistent :class:`~channels.protocol.SeenStore`.
The persistent record is written only once the bot has taken the message
(:meth:`InboundNormalizer.remember`): a process killed between the two leaves nothing that would
make Slack's redelivery look like a duplicate. The in-memory records of a message the bot did not
take are forgotten again (:meth:`InboundNormalizer.forget`).

Sessions: a DM is one conversation; in a channel each thread is its own session
(``ChatRef.thread_id`` = ``thread_ts``), and with ``reply_in_thread`` a top-level mention opens a
thread for its answer. A top-level ``/stop`` in a channel is routed to the sender's latest thread
there, because that is where the run it means lives. A reply in a thread the bot takes part in
needs no mention; whether it does is remembered, or learnt from the thread itself.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import structlog
from slack_sdk.web.async_client import AsyncWebClient

from channels.errors import ChannelError, NotAccepted
from channels.intake import already_seen, remember_seen
from channels.protocol import SeenStore
from channels.slack._errors import translate_slack_errors
from channels.slack._normalize import (
    EDIT_SUBTYPES,
    USER_SUBTYPES,
    chat_type_of,
    file_attachments,
    is_from_bot,
    mentions,
    message_text,
)
from channels.slack._recent import BoundedDict, RecentKeys
from channels.types import ChatRef, ChatType, InboundMessage, Sender

log = structlog.get_logger(__name__)

COMMANDS = ("/stop", "/stopall", "/approve", "/deny")  # /approve, /deny: exec approvals
THREAD_FETCH_LIMIT = 50
THREAD_CONTEXT_CHARS = 500
THREAD_FETCH_TIMEOUT = 1.5
"""Seconds the thread lookup may take: it runs before the event is acked, within Slack's 3 s."""


class InboundNormalizer:
    """Remembers the threads the bot is in, and who spoke last where, to route what comes in."""

    def __init__(
        self, client: AsyncWebClient, seen: SeenStore, *, name: str, reply_in_thread: bool
    ) -> None:
        self.client = client
        self.seen = seen
        self.name = name
        self.reply_in_thread = reply_in_thread
        self.bot_user_id = ""
        self.bot_id = ""
        self._threads: BoundedDict[tuple[str, str], bool] = BoundedDict()  # threads we're in
        self._latest_thread: BoundedDict[tuple[str, str], str] = BoundedDict()  # (ch, user) → ts
        # (channel, message ts or thread ts) → (user, team) of who asked there: a stream
        # outside a DM names its recipient.
        self._askers: BoundedDict[tuple[str, str], tuple[str, str]] = BoundedDict()
        self._recent = RecentKeys()

    def join_thread(self, channel_id: str, thread_ts: str) -> None:
        self._threads[(channel_id, thread_ts)] = True

    async def event(
        self, event: dict[str, Any], body: dict[str, Any], *, mention: bool
    ) -> InboundMessage | None:
        """The message a ``message`` / ``app_mention`` event carries; None to ignore it."""
        subtype = event.get("subtype")
        channel_id = str(event.get("channel") or "")
        if subtype in EDIT_SUBTYPES:
            # An edit is not a new question; answering it again would surprise more than help.
            log.info("slack.edit_ignored", subtype=subtype, channel=channel_id)
            return None
        if subtype not in USER_SUBTYPES or is_from_bot(event, self.bot_user_id, self.bot_id):
            log.debug("slack.event_skipped", subtype=subtype, bot=bool(event.get("bot_id")))
            return None
        user, ts = str(event.get("user") or ""), str(event.get("ts") or "")
        if not user or not channel_id or not ts:
            return None
        event_id = str(body.get("event_id") or "")
        # Retries repeat the event_id; the message + app_mention pair of one post share
        # channel:ts. Memory answers the common case at no cost; the persisted event_id and the
        # gateway's persisted ``slack:<channel>:<ts>`` key make a restart no replay.
        post_key = f"{channel_id}:{ts}"
        repeated_event = bool(event_id) and self._recent.seen(f"event:{event_id}")
        if repeated_event or self._recent.seen(f"post:{post_key}"):
            log.info("slack.duplicate", event_id=event_id, post=post_key)
            return None
        if event_id:
            try:
                seen = await already_seen(self.seen, self._event_key(event_id), channel=self.name)
            except NotAccepted:
                self._forget_recent(event_id, post_key)
                raise
            if seen:
                log.info("slack.duplicate_event", event_id=event_id)
                return None

        chat_type = chat_type_of(event, channel_id)
        raw_text = str(event.get("text") or "")
        thread_ts = str(event.get("thread_ts") or "") or None
        in_thread = thread_ts is not None and thread_ts != ts
        parent_text: str | None = None
        bot_in_thread = False
        if in_thread and thread_ts is not None:
            parent_text, bot_in_thread = await self._thread_context(channel_id, thread_ts)
        text = message_text(event, self.bot_user_id)
        if parent_text and not bot_in_thread and not is_command(text):
            # The bot is joining this thread: the session has no history of it yet, so the
            # model needs the message that started it (later turns are in the history).
            quoted = " ".join(parent_text.split())[:THREAD_CONTEXT_CHARS]
            text = f'[In a thread that starts with: "{quoted}"]\n{text}'

        if chat_type is ChatType.DIRECT:
            addressed = True
            thread_id = thread_ts if in_thread else None
        else:
            addressed = mention or mentions(raw_text, self.bot_user_id) or bot_in_thread
            if in_thread:
                thread_id = thread_ts
            elif is_command(text):
                # A top-level /stop means the run in the sender's latest thread here.
                thread_id = self._latest_thread.get((channel_id, user))
            else:
                thread_id = ts if self.reply_in_thread else None
            if addressed and thread_id is not None:
                self._threads[(channel_id, thread_id)] = True
                self._latest_thread[(channel_id, user)] = thread_id

        team = str(body.get("team_id") or event.get("team") or "")
        self._askers[(channel_id, ts)] = (user, team)
        if thread_id is not None:
            self._askers[(channel_id, thread_id)] = (user, team)
        return InboundMessage(
            chat=ChatRef(self.name, channel_id, chat_type, thread_id),
            message_id=ts,
            sender=Sender(id=user, name=display_name(event, user)),
            text=text,
            addressed=addressed,
            reply_to_text=parent_text,
            metadata={
                "event_id": event_id,
                "ts": ts,
                "thread_ts": thread_ts or "",
                "channel_type": str(event.get("channel_type") or ""),
                "team": str(body.get("team_id") or event.get("team") or ""),
            },
            attachments=file_attachments(event),
        )

    def asker(self, channel_id: str, *timestamps: str | None) -> tuple[str, str]:
        """(user, team) of who wrote the first of ``timestamps`` known here (a message, or the
        latest message in a thread); empty strings when none is known."""
        for ts in timestamps:
            if ts and (found := self._askers.get((channel_id, ts))) is not None:
                return found
        return "", ""

    async def remember(self, msg: InboundMessage) -> None:
        """Record the event as seen, once the bot has taken its message."""
        if event_id := msg.metadata.get("event_id", ""):
            await remember_seen(self.seen, self._event_key(event_id), channel=self.name)

    def forget(self, msg: InboundMessage) -> None:
        """Undo the in-memory dedupe records of a message the bot did not take: its redelivery
        counts. (The persistent record is only written by :meth:`remember`.)"""
        self._forget_recent(
            msg.metadata.get("event_id", ""), f"{msg.chat.chat_id}:{msg.message_id}"
        )

    def _forget_recent(self, event_id: str, post_key: str) -> None:
        self._recent.forget(f"post:{post_key}")
        if event_id:
            self._recent.forget(f"event:{event_id}")

    def _event_key(self, event_id: str) -> str:
        return f"{self.name}:event:{event_id}"

    def command(self, command: dict[str, Any]) -> InboundMessage | None:
        """The slash commands (``/stop``, ``/stopall``, ``/approve``, ``/deny``), as plain
        messages; None if malformed."""
        channel_id = str(command.get("channel_id") or "")
        user = str(command.get("user_id") or "")
        name = str(command.get("command") or "")
        if not channel_id or not user or name not in COMMANDS:
            return None
        chat_type = ChatType.DIRECT if channel_id.startswith("D") else ChatType.GROUP
        thread_id = (
            self._latest_thread.get((channel_id, user)) if chat_type is ChatType.GROUP else None
        )
        trigger = str(command.get("trigger_id") or f"{time.time():.6f}")
        return InboundMessage(
            chat=ChatRef(self.name, channel_id, chat_type, thread_id),
            message_id=f"command:{trigger}",
            sender=Sender(id=user, name=str(command.get("user_name") or user)),
            text=name,
            metadata={"slash_command": name},
        )

    async def _thread_context(self, channel_id: str, thread_ts: str) -> tuple[str | None, bool]:
        """The thread parent's text, and whether the bot takes part in the thread."""
        known = (channel_id, thread_ts) in self._threads
        try:
            async with asyncio.timeout(THREAD_FETCH_TIMEOUT):
                with translate_slack_errors("conversations.replies"):
                    replies = await self.client.conversations_replies(
                        channel=channel_id, ts=thread_ts, limit=THREAD_FETCH_LIMIT
                    )
        except (ChannelError, TimeoutError) as exc:
            log.info("slack.thread_fetch_failed", channel=channel_id, error=str(exc) or repr(exc))
            return None, known
        messages = [m for m in replies.get("messages") or [] if isinstance(m, dict)]
        parent = next((m for m in messages if m.get("ts") == thread_ts), None)
        parent_text = str(parent.get("text") or "") if parent else None
        ours = any(
            m.get("user") == self.bot_user_id or (self.bot_id and m.get("bot_id") == self.bot_id)
            for m in messages
        )
        mentioned = parent_text is not None and mentions(parent_text, self.bot_user_id)
        if ours or mentioned:
            self._threads[(channel_id, thread_ts)] = True
        return parent_text, known or ours or mentioned


def is_command(text: str) -> bool:
    return text.strip().lower() in COMMANDS


def display_name(event: dict[str, Any], user: str) -> str:
    profile = event.get("user_profile")
    if isinstance(profile, dict):
        return str(profile.get("display_name") or profile.get("real_name") or user)
    return user
