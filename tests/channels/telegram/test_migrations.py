"""Chat migrations: a basic group that became a supergroup is reached at its new id, across
restarts, and nothing else is looked up."""

from __future__ import annotations

from channels.telegram._migrations import ChatMigrations
from tests.inbound_support import MemoryState


class CountingState(MemoryState):
    def __init__(self) -> None:
        super().__init__()
        self.gets: list[tuple[str, str]] = []

    async def get(self, channel: str, key: str) -> str | None:
        self.gets.append((channel, key))
        return await super().get(channel, key)


async def test_private_chats_and_supergroups_are_never_looked_up() -> None:
    state = CountingState()
    migrations = ChatMigrations(state, "telegram")
    for chat_id in ("42", "-1001234567890", "@channel"):
        assert await migrations.resolve(chat_id) == chat_id
    assert state.gets == []


async def test_a_basic_group_not_migrated_is_looked_up_once() -> None:
    state = CountingState()
    migrations = ChatMigrations(state, "telegram")
    assert await migrations.resolve("-777") == "-777"
    assert await migrations.resolve("-777") == "-777"  # typing refreshes ask often
    assert state.gets == [("telegram", "migrated:-777")]


async def test_a_migration_is_followed_at_once_and_persisted() -> None:
    state = CountingState()
    migrations = ChatMigrations(state, "telegram")
    assert await migrations.resolve("-777") == "-777"  # "not migrated", cached
    await migrations.remember("-777", "-100777")
    assert await migrations.resolve("-777") == "-100777"
    assert state.values == {("telegram", "migrated:-777"): "-100777"}


async def test_a_restart_finds_the_migration_in_the_store() -> None:
    state = MemoryState()
    await ChatMigrations(state, "telegram").remember("-5", "-1005")
    after_restart = ChatMigrations(state, "telegram")
    assert await after_restart.resolve("-5") == "-1005"
    assert await after_restart.resolve("-6") == "-6"


async def test_migrations_are_kept_per_channel() -> None:
    state = MemoryState()
    await ChatMigrations(state, "work").remember("-5", "-1005")
    assert await ChatMigrations(state, "home").resolve("-5") == "-5"
    assert await ChatMigrations(state, "work").resolve("-5") == "-1005"
