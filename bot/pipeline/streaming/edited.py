"""Streaming by send + edit: the generic :class:`~channels.PlatformStream` for any channel that
can edit and delete what it sent (:class:`~channels.MessageEditor`).

The preview is rendered exactly like a final answer (``bot/pipeline/chunking.py``: the channel's
formatting and length limit), so a long answer continues in a new message at the same split
points the final one will have; each message is edited only when its own text changed.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

import structlog

from bot.pipeline.chunking import render_chunks
from bot.pipeline.delivery import MAX_RETRY_AFTER, MAX_SEND_ATTEMPTS, send_with_retry
from channels import Channel, ChatRef, MessageEditor, MessageRef, RetryAfter

log = structlog.get_logger(__name__)


class EditableChannel(Channel, MessageEditor, Protocol):
    """A channel that can edit and delete its messages."""


async def edit_with_retry(channel: MessageEditor, message: MessageRef, text: str) -> None:
    """Like ``send_with_retry``: a platform's ``RetryAfter`` is waited out a few times."""
    for attempt in range(1, MAX_SEND_ATTEMPTS + 1):
        try:
            await channel.edit_text(message, text)
            return
        except RetryAfter as exc:
            if attempt == MAX_SEND_ATTEMPTS or exc.retry_after > MAX_RETRY_AFTER:
                raise
            await asyncio.sleep(exc.retry_after)


class EditedStream:
    """Implements :class:`~channels.PlatformStream` with ``send_text`` + ``edit_text``."""

    def __init__(self, channel: EditableChannel, chat: ChatRef, *, reply_to: str | None) -> None:
        self.channel = channel
        self.chat = chat
        self.reply_to = reply_to
        self.sent: list[MessageRef] = []
        self.shown: list[str] = []  # the formatted text of each sent message

    @property
    def messages(self) -> list[MessageRef]:
        return list(self.sent)

    def _chunks(self, text: str) -> list[str]:
        caps = self.channel.capabilities
        return render_chunks(text, caps.formatting, caps.max_chars)

    def would_change(self, text: str) -> bool:
        """Whether showing ``text`` needs any API call (a final text the preview already
        shows needs none, and need not wait for the chat's interval)."""
        return self._chunks(text) != self.shown

    async def update(self, text: str) -> None:
        await self._show(self._chunks(text), retry=False)

    async def _show(self, chunks: list[str], *, retry: bool) -> None:
        for index, chunk in enumerate(chunks):
            if index < len(self.sent):
                if self.shown[index] == chunk:
                    continue
                if retry:
                    await edit_with_retry(self.channel, self.sent[index], chunk)
                else:
                    await self.channel.edit_text(self.sent[index], chunk)
                self.shown[index] = chunk
                continue
            quote = self.reply_to if index == 0 else None
            ref = await send_with_retry(self.channel, self.chat, chunk, reply_to=quote)
            self.sent.append(ref)
            self.shown.append(chunk)

    async def finish(self, text: str, *, reply_to: str | None = None) -> list[MessageRef]:
        chunks = self._chunks(text)
        await self._show(chunks, retry=True)
        # The final text may be shorter than the preview was (a stutter removed): extras go.
        while len(self.sent) > len(chunks):
            extra = self.sent.pop()
            self.shown.pop()
            await self._delete(extra)
        return list(self.sent)

    async def discard(self, *, marker: str | None = None) -> None:
        if marker is not None and self.sent:
            try:
                await edit_with_retry(self.channel, self.sent[-1], self.shown[-1] + marker)
            except Exception as exc:
                log.info("stream.mark_failed", channel=self.channel.name, error=str(exc))
            return
        for message in self.sent:
            await self._delete(message)
        self.sent.clear()
        self.shown.clear()

    async def _delete(self, message: MessageRef) -> None:
        try:
            if not await self.channel.delete_message(message):
                # Can't be deleted: it keeps the last safe text it showed, nothing hidden.
                log.info("stream.delete_refused", channel=self.channel.name)
        except Exception as exc:
            log.info("stream.delete_failed", channel=self.channel.name, error=str(exc))
