"""What a draft preview needs from the Telegram channel that opened it, as a protocol.

:class:`channels.telegram._channel.TelegramChannel` satisfies :class:`DraftHost` structurally;
:mod:`channels.telegram._drafts` depends on this instead of on the channel that imports it.
"""

from __future__ import annotations

from typing import Protocol

from channels.errors import ChannelError
from channels.telegram._ratelimit import SendPacer
from channels.types import ChatRef, MessageRef

__all__ = ["DraftHost"]


class DraftHost(Protocol):
    """The channel's side of a :class:`~channels.telegram._drafts.DraftStream`."""

    @property
    def pacer(self) -> SendPacer: ...

    async def send_draft(self, chat: ChatRef, draft_id: int, text: str) -> None: ...

    def drafts_refused(self, chat: ChatRef, exc: ChannelError) -> None: ...

    async def send_plain(
        self, chat: ChatRef, text: str, *, reply_to: str | None = None
    ) -> list[MessageRef]: ...
