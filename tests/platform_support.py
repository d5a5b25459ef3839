"""Building one platform's channel from config (``bot/platforms/``) without starting it: a
config with only that section, and :class:`PlatformDeps` whose shared stores record who asked
for them."""

from __future__ import annotations

from typing import Any, cast

from bot.config import Config, parse_config
from bot.platforms import PlatformDeps
from channels.protocol import PaceStore, PollGate


class _Store:
    async def get(self, channel: str, key: str) -> str | None:
        return None

    async def set(self, channel: str, key: str, value: str) -> None:
        return None

    async def seen(self, key: str) -> bool:
        return False

    async def has_seen(self, key: str) -> bool:
        return False

    async def forget(self, key: str) -> None:
        return None


class RecordingDeps:
    """The deps, and the ``(channel, token)`` pairs the builder asked a gate or a pace store
    for; each answer is a distinct object, so a test can tell which one the channel got."""

    def __init__(self, *, clustered: bool = True) -> None:
        self.store = _Store()
        self.gates: list[tuple[str, str]] = []
        self.paces: list[tuple[str, str]] = []
        self.gate = cast(PollGate, object())
        self.pace = cast(PaceStore, object())
        self.deps = PlatformDeps(
            state=self.store,
            seen=self.store,
            poll_gate=self._gate if clustered else None,
            pace_store=self._pace if clustered else None,
        )

    def _gate(self, channel: str, token: str) -> PollGate:
        self.gates.append((channel, token))
        return self.gate

    def _pace(self, channel: str, token: str) -> PaceStore:
        self.paces.append((channel, token))
        return self.pace


def platform_config(platform: str, section: dict[str, Any], **bot: Any) -> Config:
    data: dict[str, Any] = {"channels": {platform: {"enabled": True, **section}}}
    if bot:
        data["bot"] = bot
    return parse_config(data, {})
