"""Streaming an answer as a Telegram draft (``sendMessageDraft``), in private chats.

A draft is an ephemeral preview bubble: Telegram animates the changes of one ``draft_id``, drops
the preview 30 seconds after its last update and replaces it by the bot's next message. It can't
become a message itself: the final answer goes out with ``sendMessage``, formatted and chunked
by the bot's normal delivery. Hence:

- :meth:`DraftStream.update` shows the preview as plain text (the bot's markdown unformatted:
  the adapter can't format markdown, and plain text can't be refused as bad markup), only its
  last 4,096 UTF-16 units when longer (one bubble). Unchanged texts and texts while the chat is
  on hold after a 429 are skipped: a preview is lossy, the next one shows the latest text.
- :meth:`DraftStream.finish` sends nothing and returns ``[]``: *nothing was sent, deliver the
  answer normally*; Telegram swaps the draft for that message.
- :meth:`DraftStream.discard` can't remove the preview (an empty draft would show a
  "Thinking..." placeholder instead): it stops updating and the preview expires. With a
  ``marker`` the text shown so far is kept as a real message, plain text followed by the marker.

Only the first draft request of a stream may raise :class:`~channels.protocol.StreamUnsupported`
(Telegram refused the method: the bot streams by send + edit); later refusals end the previews
quietly.
"""

from __future__ import annotations

import structlog

from channels.errors import BadRequest, ChannelError, Forbidden, RetryAfter
from channels.protocol import StreamUnsupported
from channels.telegram._ports import DraftHost
from channels.telegram._text import split_units, utf16_len
from channels.types import ChatRef, MessageRef

log = structlog.get_logger(__name__)

MAX_DRAFT_UNITS = 4096
ELLIPSIS = "…"


def draft_preview(text: str, limit: int = MAX_DRAFT_UNITS) -> str:
    """``text`` as one draft shows it: whole when it fits, else "…" and its tail."""
    if utf16_len(text) <= limit:
        return text
    room = limit - utf16_len(ELLIPSIS)
    start = len(text)
    while start > 0 and utf16_len(text[start - 1]) <= room:
        room -= utf16_len(text[start - 1])
        start -= 1
    return ELLIPSIS + text[start:]


class DraftStream:
    """One answer previewed as a draft; see the module docstring for what each step does."""

    def __init__(
        self, channel: DraftHost, chat: ChatRef, draft_id: int, reply_to: str | None
    ) -> None:
        self.channel = channel
        self.chat = chat
        self.draft_id = draft_id
        self.reply_to = reply_to
        self._requested = False
        self._previewed = ""  # the last preview Telegram took, as sent
        self._shown = ""  # the whole text of that preview
        self._ended = False
        self._marker_pieces: list[str] | None = None
        self._marker_sent = 0

    @property
    def messages(self) -> list[MessageRef]:
        return []  # a draft is not a message: nothing is left behind if the process dies

    async def update(self, text: str) -> None:
        if self._ended:
            return
        preview = draft_preview(text)
        if not preview.strip() or preview == self._previewed:
            return
        if self.channel.pacer.held_for(self.chat.chat_id) > 0:
            return
        first, self._requested = not self._requested, True
        try:
            await self.channel.send_draft(self.chat, self.draft_id, preview)
        except RetryAfter:
            return  # the chat is held: later previews wait it out
        except (BadRequest, Forbidden) as exc:
            self._ended = True
            if first:
                self.channel.drafts_refused(self.chat, exc)
                raise StreamUnsupported(str(exc)) from exc
            log.warning("telegram.draft_refused", chat=self.chat.chat_id, error=str(exc))
            return
        except ChannelError as exc:  # 5xx or network, after retries: skip this preview
            log.info("telegram.draft_failed", chat=self.chat.chat_id, error=str(exc))
            return
        self._previewed, self._shown = preview, text

    async def finish(self, text: str, *, reply_to: str | None = None) -> list[MessageRef]:
        """Stop previewing and return ``[]``: nothing was sent, so the bot delivers ``text``
        with its normal pipeline (a draft can't become the message); Telegram replaces the
        draft with that message."""
        self._ended = True
        return []

    async def discard(self, *, marker: str | None = None) -> None:
        """Stop previewing; the draft expires within 30 seconds (Telegram can't remove it).

        With ``marker``, the text shown so far (if any) stays as a real message: plain text
        with ``marker`` appended, split when longer than one message, replying to the stream's
        ``reply_to``. May raise :class:`~channels.errors.RetryAfter`: calling again sends what
        is still missing, never a piece twice."""
        self._ended = True
        if marker is None or not self._shown.strip():
            return
        if self._marker_pieces is None:
            self._marker_pieces = split_units(self._shown.rstrip() + marker, MAX_DRAFT_UNITS)
        while self._marker_sent < len(self._marker_pieces):
            piece = self._marker_pieces[self._marker_sent]
            reply_to = self.reply_to if self._marker_sent == 0 else None
            await self.channel.send_plain(self.chat, piece, reply_to=reply_to)
            self._marker_sent += 1
