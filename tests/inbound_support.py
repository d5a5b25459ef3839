"""Adapters on their own against the fake platforms, fed to a handler the test controls.

:class:`Handler` stands in for the bot's gateway: it can refuse a message (``NotAccepted``, as the
bot does while draining or without its database), hold messages until released, or fail.
:func:`running_telegram`, :func:`running_zalo` and :func:`running_slack` start one adapter on
its fake and stop it after.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal

import httpx
from starlette.applications import Starlette
from starlette.routing import Route

from channels import InboundMessage, NotAccepted
from channels.slack import SlackChannel, SlackSettings
from channels.telegram import TelegramChannel, TelegramOptions
from channels.zalo import ZaloBotClient, ZaloChannel, ZaloSettings
from tests.fakes.slack_events import EventSender
from tests.fakes.slack_server import FakeSlack
from tests.fakes.telegram_server import FakeTelegram
from tests.fakes.zalo_server import FakeZalo

ZALO_SECRET = "zalo-secret-123"
TELEGRAM_SECRET = "tg-secret"


class MemorySeen:
    """A :class:`~channels.protocol.SeenStore` that remembers what was forgotten."""

    def __init__(self) -> None:
        self.keys: set[str] = set()
        self.forgotten: list[str] = []

    async def seen(self, key: str) -> bool:
        if key in self.keys:
            return True
        self.keys.add(key)
        return False

    async def has_seen(self, key: str) -> bool:
        return key in self.keys

    async def forget(self, key: str) -> None:
        self.keys.discard(key)
        self.forgotten.append(key)


class MemoryState:
    def __init__(self) -> None:
        self.values: dict[tuple[str, str], str] = {}

    async def get(self, channel: str, key: str) -> str | None:
        return self.values.get((channel, key))

    async def set(self, channel: str, key: str, value: str) -> None:
        self.values[(channel, key)] = value


class Handler:
    """An ``InboundHandler``: refuses the first ``refuse`` messages, holds every message while
    :meth:`hold` is in force, raises ``error`` when given, and records what it took."""

    def __init__(self, *, refuse: int = 0, error: Exception | None = None) -> None:
        self.refuse = refuse
        self.error = error
        self.taken: list[InboundMessage] = []
        self.refused: list[InboundMessage] = []
        self.holding = 0  # messages waiting for release
        self._release: asyncio.Event | None = None
        self._changed = asyncio.Condition()

    def hold(self) -> None:
        self._release = asyncio.Event()

    def release(self) -> None:
        if self._release is not None:
            self._release.set()

    def texts(self) -> list[str]:
        return [m.text for m in self.taken]

    def refused_texts(self) -> list[str]:
        return [m.text for m in self.refused]

    async def __call__(self, msg: InboundMessage) -> None:
        try:
            if self._release is not None:
                self.holding += 1
                await self._notify()
                await self._release.wait()
                self.holding -= 1
            if self.refuse > 0:
                self.refuse -= 1
                self.refused.append(msg)
                raise NotAccepted("the bot is draining")
            if self.error is not None:
                raise self.error
            self.taken.append(msg)
        finally:
            await self._notify()

    async def wait_for(self, predicate: Callable[[], object], timeout: float = 10) -> None:
        async def wait() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: bool(predicate()))

        await asyncio.wait_for(wait(), timeout)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()


async def pending(task: asyncio.Future[Any], within: float = 0.3) -> bool:
    """Whether ``task`` is still not done after ``within`` seconds (for "not answered yet":
    the code under test holds it until the test releases it, so this never races)."""
    done, _ = await asyncio.wait({task}, timeout=within)
    return not done


def webhook_client(path: str, endpoint: Any) -> httpx.AsyncClient:
    """An HTTP client whose ``POST path`` reaches an adapter's ``handle_webhook``."""
    app = Starlette(routes=[Route(path, endpoint, methods=["POST"])])
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bot")


@asynccontextmanager
async def running_telegram(
    tg: FakeTelegram,
    handler: Handler,
    *,
    seen: MemorySeen | None = None,
    state: MemoryState | None = None,
    mode: Literal["polling", "webhook"] = "polling",
) -> AsyncIterator[TelegramChannel]:
    options = TelegramOptions(
        token=tg.token,
        api_base_url=tg.base_url,
        mode=mode,
        webhook_url="https://bot.example/telegram/webhook" if mode == "webhook" else "",
        webhook_secret=TELEGRAM_SECRET if mode == "webhook" else "",
        polling_timeout=1,
        rate_limits=None,
        retry_backoff=0.05,
    )
    channel = TelegramChannel(
        options, state=state or MemoryState(), seen=seen if seen is not None else MemorySeen()
    )
    await channel.start(handler)
    try:
        yield channel
    finally:
        await channel.stop()


@asynccontextmanager
async def running_zalo(
    server: FakeZalo,
    handler: Handler,
    *,
    seen: MemorySeen | None = None,
    mode: Literal["polling", "webhook"] = "polling",
    handover_grace: float = 10.0,
) -> AsyncIterator[ZaloChannel]:
    client = ZaloBotClient(
        server.token, base_url=server.base_url, backoff_initial=0.01, backoff_max=0.05
    )
    settings = ZaloSettings(
        mode=mode,
        webhook_url="https://bot.example/zalo/webhook" if mode == "webhook" else "",
        webhook_secret=ZALO_SECRET if mode == "webhook" else "",
        poll_timeout=1,
        backoff_initial=0.02,
        backoff_max=0.2,
        handover_grace=handover_grace,
    )
    channel = ZaloChannel(client, settings, seen if seen is not None else MemorySeen())
    await channel.start(handler)
    try:
        yield channel
    finally:
        await channel.stop()


@asynccontextmanager
async def running_slack(
    server: FakeSlack,
    handler: Handler,
    mode: Literal["http", "socket"],
    *,
    seen: MemorySeen | None = None,
) -> AsyncIterator[tuple[SlackChannel, EventSender]]:
    """The started adapter, and a signed Events API sender that reaches it (HTTP mode)."""
    settings = SlackSettings(
        bot_token=server.bot_token,
        app_token=server.app_token,
        signing_secret=server.signing_secret,
        api_base_url=server.base_url,
        mode=mode,
        ping_interval=0.5,
        pace_per_second=None,
    )
    channel = SlackChannel(settings, seen=seen if seen is not None else MemorySeen())
    await channel.start(handler)
    http = webhook_client(channel.webhook_path, channel.handle_webhook)
    try:
        if mode == "socket":
            await server.wait_for(lambda: server.socket_open)
        yield channel, EventSender(http, server.signing_secret)
    finally:
        await http.aclose()
        await channel.stop()
