"""One streamed answer: the run's events in, a safe preview on the platform out.

:class:`StreamedReply` follows one run's events. ``chunk`` text accumulates; at most once per
``stream_interval`` per chat (:class:`StreamClock`) the preview (:func:`safe_preview`: never a
hidden span, never a prefix of NO_REPLY) is shown with the channel's native stream when it has
one for this chat (Telegram drafts, Slack chat streams), else by send + edit
(:class:`~bot.pipeline.streaming.edited.EditedStream`). An unchanged preview is not sent again.

Segments: a model call that ends in tool calls emits ``block.reply`` with its text; that text
stays as a message of its own (``block_replies``) or its preview is removed, and the next model
call starts a new preview. At the end the turn either finishes the stream with the final,
sanitized answer (:meth:`StreamedReply.finish`) or abandons it (:meth:`StreamedReply.abandon`:
NO_REPLY, a failure, ``/stop``).

Each preview message a stream posts is reported (``on_posted``) as soon as it is on the
platform, so the inbox holds its id: a process killed mid-stream leaves a half answer in the
chat, which the replay deletes before it answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

import structlog

from agent_core import Event, EventType, is_no_reply, safe_preview, sanitize_output
from bot.pipeline.delivery import deliver
from bot.pipeline.streaming.edited import EditableChannel, EditedStream
from channels import (
    Channel,
    ChatRef,
    MessageEditor,
    MessageRef,
    NativeStreaming,
    PlatformStream,
    StreamUnsupported,
)

log = structlog.get_logger(__name__)

STOPPED_MARKER = " (stopped)"
# Chats whose last preview time is remembered, the most recently updated ones: only a chat
# updated less than stream_interval ago needs its time, and 10,000 held ~2 MiB of a busy
# process's memory for chats long quiet.
_CLOCK_CHATS = 1_000


@dataclass(frozen=True, slots=True)
class StreamOptions:
    interval: float = 1.0  # seconds between two preview updates in one chat
    block_replies: bool = True
    on_stop: Literal["mark", "delete"] = "mark"


def streaming_options(channels_config: Any, channel: Channel) -> StreamOptions | None:
    """The channel's options from ``channels.<name>``, or None when it doesn't stream
    (``streaming: off``, no such settings, or an adapter that can't edit nor stream)."""
    settings: Any = getattr(channels_config, channel.name, None)
    if getattr(settings, "streaming", "off") == "off":
        return None
    if not isinstance(channel, MessageEditor | NativeStreaming):
        return None
    return StreamOptions(
        interval=settings.stream_interval,
        block_replies=settings.block_replies,
        on_stop=settings.stream_on_stop,
    )


class StreamClock:
    """When each chat last got a preview update: the throttle is per chat, across runs."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._last: OrderedDict[str, float] = OrderedDict()
        self._clock = clock

    def wait(self, chat: str, interval: float) -> float:
        """Seconds to wait before this chat may get its next update."""
        last = self._last.get(chat)
        return 0.0 if last is None else max(0.0, last + interval - self._clock())

    def mark(self, chat: str) -> None:
        self._last[chat] = self._clock()
        self._last.move_to_end(chat)
        while len(self._last) > _CLOCK_CHATS:
            self._last.popitem(last=False)


class StreamedReply:
    def __init__(
        self,
        channel: Channel,
        chat: ChatRef,
        run_id: str,
        *,
        options: StreamOptions,
        clock: StreamClock,
        reply_to: str | None = None,
        on_visible: Callable[[], Awaitable[None]] | None = None,
        on_posted: Callable[[list[str]], Awaitable[None]] | None = None,
    ) -> None:
        self.channel = channel
        self.chat = chat
        self.run_id = run_id
        self.options = options
        self.clock = clock
        self.reply_to = reply_to
        self.on_visible = on_visible
        self.on_posted = on_posted
        self.posted: list[str] = []  # every preview message posted, in order
        self.raw = ""  # the current model call's text so far
        self.stream: PlatformStream | None = None
        self.shown = ""  # the preview the stream shows
        self.visible = False  # anything was shown (typing stops then)
        self._key = f"{chat.channel}:{chat.chat_id}:{chat.thread_id or ''}"
        self._lock = asyncio.Lock()
        self._pending: asyncio.Task[None] | None = None
        self._waiting = False  # the pending update still waits for its turn (not sending)
        self._ended = False
        """``finish``, ``abandon`` or ``close`` began: no preview update may start any more. An
        update still in flight then must not schedule another, which would open a new stream
        and post the answer a second time."""

    # -- events ----------------------------------------------------------------------------

    async def on_event(self, event: Event) -> None:
        if event.run_id != self.run_id:
            return
        if event.type is EventType.CHUNK:
            self.raw += str(event.payload.get("content", ""))
            self._schedule()
        elif event.type is EventType.BLOCK_REPLY:
            await self._close_segment(str(event.payload.get("content", "")))
        elif event.type is EventType.ACTIVITY and event.payload.get("phase") == "thinking":
            if self.raw:  # a model call that wrote text but no block reply (hidden only)
                await self._close_segment(None)
        elif event.type is EventType.RUN_RETRYING:
            self.raw = ""  # the retried call writes its text again

    def _schedule(self) -> None:
        if self._ended or (self._pending is not None and not self._pending.done()):
            return
        delay = self.clock.wait(self._key, self.options.interval)
        self._waiting = True  # until it starts sending (it may not even have started)
        self._pending = asyncio.create_task(self._flush_after(delay), name="stream:flush")

    async def _flush_after(self, delay: float) -> None:
        try:
            if delay:
                await asyncio.sleep(delay)
        finally:
            self._waiting = False
        await self._flush()

    async def _flush(self) -> None:
        async with self._lock:
            if self._ended:
                return
            preview = safe_preview(self.raw)
            if not preview or preview == self.shown:
                return
            try:
                await self._update(preview)
            except Exception as exc:  # a 429 or a network error: the next update tries again
                log.info("stream.update_failed", channel=self.channel.name, error=str(exc))
                return
            self.shown = preview
            self.clock.mark(self._key)
            await self._report_posted()
            await self._became_visible()
        if safe_preview(self.raw) != self.shown:
            self._schedule()  # text arrived while this update went out

    async def _update(self, text: str) -> None:
        if self.stream is None:
            self.stream = self._open()
        try:
            await self.stream.update(text)
        except StreamUnsupported:
            log.info("stream.native_unsupported", channel=self.channel.name)
            self.stream = EditedStream(self._editable(), self.chat, reply_to=self.reply_to)
            await self.stream.update(text)

    async def _report_posted(self) -> None:
        """Report the preview messages when the stream posted a new one (not on every edit)."""
        if self.on_posted is None or self.stream is None:
            return
        new = [r.message_id for r in self.stream.messages if r.message_id not in self.posted]
        if not new:
            return
        self.posted.extend(new)
        try:
            await self.on_posted(list(self.posted))
        except Exception as exc:  # the preview still shows; only a replay's cleanup is lost
            log.warning("stream.preview_record_failed", channel=self.channel.name, error=str(exc))

    def _open(self) -> PlatformStream:
        if isinstance(self.channel, NativeStreaming):
            native = self.channel.open_stream(self.chat, reply_to=self.reply_to)
            if native is not None:
                return native
        return EditedStream(self._editable(), self.chat, reply_to=self.reply_to)

    def _editable(self) -> EditableChannel:
        if not isinstance(self.channel, MessageEditor):
            raise StreamUnsupported(f"{self.channel.name} can't edit messages")
        return self.channel

    async def _became_visible(self) -> None:
        if not self.visible:
            self.visible = True
            if self.on_visible is not None:
                await self.on_visible()

    async def _wait_turn(self, stream: PlatformStream, text: str) -> None:
        """The last edit of a message keeps to the chat's interval too (platform limits). A
        native stream ends with its own call (a draft is replaced by a new message), and a
        preview that already shows ``text`` needs no edit: neither waits."""
        if not isinstance(stream, EditedStream) or not stream.would_change(text):
            return
        delay = self.clock.wait(self._key, self.options.interval)
        if delay:
            await asyncio.sleep(delay)

    async def _cancel_pending(self) -> None:
        """Drop an update that still waits; let one being sent finish. Cancelling a send in
        flight could leave a message on the platform that this stream doesn't know of: the
        answer would then be sent a second time."""
        task, self._pending = self._pending, None
        if task is None or task.done():
            return
        if self._waiting:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _close_segment(self, content: str | None) -> None:
        """End the current model call's preview: keep it as a block reply or remove it."""
        await self._cancel_pending()
        async with self._lock:
            text = sanitize_output(content) if content is not None else ""
            keep = self.options.block_replies and text and not is_no_reply(text)
            stream, shown = self.stream, self.shown
            self.stream, self.shown, self.raw = None, "", ""
            try:
                if keep:
                    sent = []
                    if stream is not None and shown:
                        await self._wait_turn(stream, text)
                        sent = await stream.finish(text)
                    if not sent:
                        await deliver(self.channel, self.chat, text, reply_to=self.reply_to)
                    await self._became_visible()
                elif stream is not None and shown:
                    await stream.discard()
            except Exception as exc:
                log.warning("stream.block_reply_failed", channel=self.channel.name, error=str(exc))

    # -- the end ---------------------------------------------------------------------------

    async def finish(self, content: str) -> list[MessageRef] | None:
        """End with the final answer. None: nothing is on screen, so the caller delivers the
        answer the usual way (an instant answer needs no stream)."""
        self._ended = True
        await self._cancel_pending()
        async with self._lock:
            stream, shown = self.stream, self.shown
            self.stream = None
            if stream is None or not shown:
                return None
            edits = not isinstance(stream, EditedStream) or stream.would_change(content)
            await self._wait_turn(stream, content)
            sent = await stream.finish(content, reply_to=self.reply_to)
            if edits:
                self.clock.mark(self._key)
            return sent or None  # a draft can't become the message: deliver it normally

    async def close(self) -> None:
        """Stop updating (the turn ended, however): a waiting update is dropped."""
        self._ended = True
        await self._cancel_pending()

    async def abandon(self, *, stopped: bool = False) -> None:
        """No answer (NO_REPLY, a failure, ``/stop``): remove the preview, or after a ``/stop``
        with ``stream_on_stop: mark`` keep it with " (stopped)"."""
        self._ended = True
        await self._cancel_pending()
        async with self._lock:
            stream, shown = self.stream, self.shown
            self.stream = None
            if stream is None or not shown:
                return
            mark = stopped and self.options.on_stop == "mark"
            try:
                if mark:
                    await self._wait_turn(stream, self.shown + STOPPED_MARKER)
                await stream.discard(marker=STOPPED_MARKER if mark else None)
            except Exception as exc:
                log.info("stream.discard_failed", channel=self.channel.name, error=str(exc))
