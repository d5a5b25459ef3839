"""The bot's side of the ``send_file`` tool: the file goes to the chat of the run that sends it.

agent_core knows no chats, so the chat comes from the run's origin (the inbound message it
answers), as for the ``cron`` tool. A channel that can carry files
(:class:`channels.FileSending`) gets the file; one that can't (the web and terminal chats)
gets a text note naming it, and the tool says so, so nothing crashes anywhere.

A file counts as sent once recorded: after the platform took it, the send is recorded under
the message it answers (the message's dedupe key, the scheduled time of a cron occurrence, the
file's path, size and modification time, the caption). A turn replayed after a crash that asks
for the same file again is told it was sent and sends nothing; only a crash between the
platform's answer and the record can repeat it, as for a chunk of text.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Mapping

import structlog

from agent_core.tools import SEND_FILE, OutgoingFile, ToolContext, ToolError
from bot.pipeline.delivery import MAX_RETRY_AFTER, MAX_SEND_ATTEMPTS, send_with_retry
from bot.pipeline.job import CRON_AT
from channels import (
    Channel,
    ChannelError,
    ChatType,
    FileRefused,
    FileSending,
    InboundMessage,
    RetryAfter,
    SeenStore,
    SentFile,
)

log = structlog.get_logger(__name__)


def size_text(size: int) -> str:
    if size < 1000:
        return f"{size} B"
    if size < 1_000_000:
        return f"{size / 1000:.0f} KB"
    return f"{size / 1_000_000:.1f} MB"


class ChatFileSender:
    """Satisfies :class:`agent_core.tools.FileSender`."""

    def __init__(self, channels: Mapping[str, Channel], *, sent: SeenStore | None = None) -> None:
        """``channels``: the gateway's, by name; ``sent``: where sends are recorded (the
        durable dedupe store), None: not recorded."""
        self.channels = channels
        self.sent = sent

    @staticmethod
    def origin(ctx: ToolContext) -> InboundMessage:
        request = ctx.request
        origin = request.origin if request is not None else None
        if not isinstance(origin, InboundMessage):
            raise ToolError(SEND_FILE, "this run has no chat to send a file to")
        if request is not None and request.depth > 0:
            raise ToolError(
                SEND_FILE,
                "only the agent talking with the user can send files: name the file in your "
                "result instead",
            )
        return origin

    async def send_file(self, ctx: ToolContext, file: OutgoingFile) -> str:
        origin = self.origin(ctx)
        channel = self.channels.get(origin.chat.channel)
        if channel is None:
            raise ToolError(SEND_FILE, f"the channel {origin.chat.channel!r} is not running")
        key = self._record_key(origin, file)
        if self.sent is not None and await self.sent.has_seen(key):
            log.info("file.already_sent", run_id=ctx.run_id, file=file.shown_path)
            return f"{file.name} was already sent to this chat for this message; not sent again."
        reply_to = origin.message_id if origin.chat.chat_type is ChatType.GROUP else None
        if isinstance(channel, FileSending):
            sent = await self._send(channel, origin, file, reply_to)
        else:
            sent = await self._send_note(channel, origin, file, reply_to)
        if self.sent is not None:
            await self.sent.seen(key)
        log.info(
            "file.sent",
            run_id=ctx.run_id,
            channel=origin.chat.channel,
            chat=origin.chat.chat_id,
            message_id=sent.message.message_id,
            file=file.shown_path,
            bytes=file.size,
            how=sent.how,
        )
        return _result(file, sent, channel.name)

    async def _send(
        self, channel: FileSending, origin: InboundMessage, file: OutgoingFile, reply_to: str | None
    ) -> SentFile:
        for attempt in range(1, MAX_SEND_ATTEMPTS + 1):
            try:
                return await channel.send_file(
                    origin.chat,
                    file.path,
                    name=file.name,
                    mime=file.mime,
                    caption=file.caption,
                    reply_to=reply_to,
                )
            except FileRefused as exc:
                raise ToolError(SEND_FILE, f"{exc}; nothing was sent") from exc
            except RetryAfter as exc:
                # Refused, not taken: waiting and sending again can't make a duplicate.
                if attempt == MAX_SEND_ATTEMPTS or exc.retry_after > MAX_RETRY_AFTER:
                    raise ToolError(SEND_FILE, f"{file.name} was not sent: {exc}") from exc
                await asyncio.sleep(exc.retry_after)
            except ChannelError as exc:
                log.warning("file.send_failed", file=file.shown_path, error=str(exc))
                raise ToolError(SEND_FILE, f"sending {file.name} failed: {exc}") from exc
        raise AssertionError("unreachable")

    async def _send_note(
        self, channel: Channel, origin: InboundMessage, file: OutgoingFile, reply_to: str | None
    ) -> SentFile:
        note = (
            f"[file: {file.name}, {size_text(file.size)}, in the workspace at "
            f"{file.shown_path} — this chat can't show files]"
        )
        text = f"{file.caption.strip()}\n{note}" if file.caption.strip() else note
        try:
            ref = await send_with_retry(channel, origin.chat, text, reply_to=reply_to)
        except ChannelError as exc:
            raise ToolError(SEND_FILE, f"sending a note about {file.name} failed: {exc}") from exc
        return SentFile(ref, "note")

    @staticmethod
    def _record_key(origin: InboundMessage, file: OutgoingFile) -> str:
        stat = file.path.stat()
        identity = "\0".join(
            [
                origin.metadata.get(CRON_AT, ""),
                str(file.path),
                str(stat.st_size),
                str(stat.st_mtime_ns),
                file.caption,
            ]
        )
        digest = hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        return f"sent_file:{origin.dedupe_key}:{digest}"


def _result(file: OutgoingFile, sent: SentFile, channel: str) -> str:
    size = size_text(file.size)
    if sent.how == "note":
        return (
            f"{file.name} ({size}) could not be sent: the {channel} chat can't receive this "
            "file, so the user got a short note naming it instead. Tell the user if it matters."
        )
    return f"Sent {file.name} ({size}) to the chat as a {sent.how}."
