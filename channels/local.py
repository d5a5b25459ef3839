"""The local channel behind the web chat page and the terminal chat.

It has no network of its own: the web server or the terminal feeds inbound messages in with
:meth:`LocalChannel.receive`, and everything the bot sends comes out as :class:`Outbound` records
to the listeners of that chat. Tests use it the same way.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from channels.protocol import InboundHandler
from channels.types import Capabilities, ChatRef, InboundMessage, MessageRef

OutboundKind = Literal["message", "typing", "reaction", "reaction_removed"]


@dataclass(frozen=True, slots=True)
class Outbound:
    kind: OutboundKind
    chat: ChatRef
    text: str = ""
    message_id: str = ""
    reply_to: str | None = None


Listener = Callable[[Outbound], Awaitable[None]]


@dataclass
class LocalChannel:
    name: str = "web"
    capabilities: Capabilities = field(
        default_factory=lambda: Capabilities(max_chars=8000, formatting="markdown", threads=False)
    )
    admins: frozenset[str] = frozenset()
    _handler: InboundHandler | None = None
    _listeners: dict[str, list[Listener]] = field(default_factory=lambda: defaultdict(list))
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    async def start(self, on_message: InboundHandler) -> None:
        self._handler = on_message

    async def stop_receiving(self) -> None:
        """Nothing to stop: the web server and the terminal feed messages in themselves."""

    async def stop(self) -> None:
        self._handler = None

    async def receive(self, message: InboundMessage) -> None:
        """Hand one user message to the bot, as a platform webhook would."""
        if self._handler is None:
            raise RuntimeError(f"channel {self.name!r} is not started")
        await self._handler(message)

    def listen(self, chat_id: str, listener: Listener) -> Callable[[], None]:
        """Subscribe to what the bot sends to ``chat_id``; returns the unsubscribe function."""
        self._listeners[chat_id].append(listener)

        def unsubscribe() -> None:
            listeners = self._listeners.get(chat_id)
            if listeners and listener in listeners:
                listeners.remove(listener)
                if not listeners:
                    del self._listeners[chat_id]

        return unsubscribe

    async def _emit(self, record: Outbound) -> None:
        for listener in list(self._listeners.get(record.chat.chat_id, ())):
            await listener(record)

    async def send_text(
        self, chat: ChatRef, text: str, *, reply_to: str | None = None
    ) -> MessageRef:
        ref = MessageRef(chat=chat, message_id=f"out-{next(self._ids)}")
        await self._emit(
            Outbound("message", chat, text=text, message_id=ref.message_id, reply_to=reply_to)
        )
        return ref

    async def set_typing(self, chat: ChatRef) -> None:
        await self._emit(Outbound("typing", chat))

    async def add_reaction(self, message: MessageRef, emoji: str) -> None:
        await self._emit(
            Outbound("reaction", message.chat, text=emoji, message_id=message.message_id)
        )

    async def remove_reaction(self, message: MessageRef, emoji: str) -> None:
        await self._emit(
            Outbound("reaction_removed", message.chat, text=emoji, message_id=message.message_id)
        )

    async def is_admin(self, chat: ChatRef, user_id: str) -> bool:
        return user_id in self.admins
