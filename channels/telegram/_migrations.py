"""A basic group that became a supergroup has a new chat id: remembered, so every later call
(sends, typing, reactions, admin checks) goes to the new one, across restarts."""

from __future__ import annotations

import structlog

from channels.protocol import StateStore

log = structlog.get_logger(__name__)


class ChatMigrations:
    def __init__(self, state: StateStore, channel: str) -> None:
        self._state = state
        self._channel = channel
        self._known: dict[str, str] = {}

    async def resolve(self, chat_id: str) -> str:
        """The chat id to use now for ``chat_id``."""
        if chat_id in self._known:
            return self._known[chat_id]
        if chat_id.startswith("-") and not chat_id.startswith("-100"):  # only basic groups move
            new = await self._state.get(self._channel, f"migrated:{chat_id}")
            # Remember "not migrated" too: typing refreshes call this every few seconds.
            self._known[chat_id] = new or chat_id
            return self._known[chat_id]
        return chat_id

    async def remember(self, old: str, new: str) -> None:
        log.info("telegram.chat_migrated", old=old, new=new)
        self._known[old] = new
        await self._state.set(self._channel, f"migrated:{old}", new)
