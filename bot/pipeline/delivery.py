"""Getting an answer out through a channel: NO_REPLY, formatting, chunking, pacing.

Used by every channel, so platform differences are read from ``Channel.capabilities`` instead of
being special-cased here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from agent_core import is_no_reply
from bot.pipeline.chunking import render_chunks
from channels import Channel, ChatRef, MessageRef, RetryAfter

log = structlog.get_logger(__name__)

MAX_SEND_ATTEMPTS = 3
MAX_RETRY_AFTER = 60.0


async def send_with_retry(
    channel: Channel, chat: ChatRef, text: str, *, reply_to: str | None = None
) -> MessageRef:
    """Send one chunk, waiting out a platform's ``RetryAfter`` a few times.

    Only ``RetryAfter`` is retried here: the platform told us the message was not accepted, so a
    retry can't produce a duplicate. Other failures may have been delivered; adapters retry those
    themselves where the API makes it safe.
    """
    for attempt in range(1, MAX_SEND_ATTEMPTS + 1):
        try:
            return await channel.send_text(chat, text, reply_to=reply_to)
        except RetryAfter as exc:
            if attempt == MAX_SEND_ATTEMPTS or exc.retry_after > MAX_RETRY_AFTER:
                raise
            log.info("delivery.retry_after", channel=channel.name, wait=exc.retry_after)
            await asyncio.sleep(exc.retry_after)
    raise AssertionError("unreachable")


PartSent = Callable[[str, bool], Awaitable[None]]
"""Called after each chunk with its platform message id and whether it was the last one."""
WasSent = Callable[[str, str | None], Awaitable[MessageRef | None]]
"""Asked, with a chunk's text and quote, whether a killed process sent it already."""


async def deliver(
    channel: Channel,
    chat: ChatRef,
    text: str,
    *,
    reply_to: str | None = None,
    skip: int = 0,
    before_first: Callable[[int], Awaitable[None]] | None = None,
    on_sent: PartSent | None = None,
    was_sent: WasSent | None = None,
) -> list[MessageRef]:
    """Format and send ``text``; sends nothing for NO_REPLY or an empty answer.

    ``skip`` chunks were delivered before (a replay after a crash): the same text renders to
    the same chunks, so sending resumes at chunk ``skip`` and never repeats one.
    ``before_first`` is told how many chunks there are before anything is sent.
    ``was_sent`` is asked about chunk ``skip`` first (a process may have died between sending
    it and recording it): a message it finds counts as that chunk, sent.
    """
    if is_no_reply(text):
        return []
    caps = channel.capabilities
    chunks = render_chunks(text, caps.formatting, caps.max_chars)
    if before_first is not None:
        await before_first(len(chunks))
    sent: list[MessageRef] = []
    for index in range(skip, len(chunks)):
        # Only the first chunk quotes the user's message; the rest follow it.
        quote = reply_to if index == 0 else None
        ref = None
        if index == skip and was_sent is not None:
            ref = await was_sent(chunks[index], quote)
        if ref is None:
            ref = await send_with_retry(channel, chat, chunks[index], reply_to=quote)
        sent.append(ref)
        if on_sent is not None:
            await on_sent(ref.message_id, index == len(chunks) - 1)
    return sent
