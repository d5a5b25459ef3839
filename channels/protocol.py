"""The one protocol every platform adapter implements."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

from channels.types import Capabilities, ChatRef, InboundMessage, MessageRef

InboundHandler = Callable[[InboundMessage], Awaitable[None]]
"""What an adapter calls for every normalized inbound message."""


@runtime_checkable
class Channel(Protocol):
    name: str
    capabilities: Capabilities

    async def start(self, on_message: InboundHandler) -> None:
        """Begin receiving (polling loop, socket...). Webhook adapters only remember the handler."""

    async def stop(self) -> None:
        """Stop receiving and release network resources. Idempotent."""

    async def send_text(
        self, chat: ChatRef, text: str, *, reply_to: str | None = None
    ) -> MessageRef:
        """Send one already-formatted chunk (at most ``capabilities.max_chars``)."""

    async def set_typing(self, chat: ChatRef) -> None:
        """Show the typing indicator once; the bot refreshes it while a run lasts."""

    async def add_reaction(self, message: MessageRef, emoji: str) -> None: ...

    async def remove_reaction(self, message: MessageRef, emoji: str) -> None: ...

    async def is_admin(self, chat: ChatRef, user_id: str) -> bool:
        """Whether the platform itself considers this user an admin of the chat."""
