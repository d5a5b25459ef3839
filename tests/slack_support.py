"""What the Slack end-to-end tests share: a fake Slack, and a started bot to drive through it.

Registered as a plugin in ``tests/conftest.py``, so its fixtures (``slack``, ``bot``,
``progress_bot``, ``http_bot``) reach every Slack test module without imports that would only
look unused.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.app import Loopgate
from bot.http.server import create_app
from channels.slack import SlackChannel
from tests.conftest import make_config
from tests.fakes.llm_server import FakeLLM
from tests.fakes.slack_events import EventSender, event_callback
from tests.fakes.slack_server import FakeSlack

__all__ = ["Bot", "slack_section", "start_bot"]


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as server:
        yield server


def slack_section(slack: FakeSlack, mode: str, **extra: Any) -> dict[str, Any]:
    return {
        "enabled": True,
        "mode": mode,
        "bot_token": slack.bot_token,
        "app_token": slack.app_token,
        "signing_secret": slack.signing_secret,
        "api_base_url": slack.base_url,
        "ping_interval": 0.5,
        # These tests check whole-message delivery; streamed answers (the default) have their
        # own tests (test_streaming_e2e.py, test_slack_streaming.py).
        "streaming": "off",
        **extra,
    }


@dataclass
class Bot:
    """A started Loopgate with Slack, and a way to deliver events in its transport."""

    app: Loopgate
    slack: FakeSlack
    mode: str
    http: httpx.AsyncClient
    sender: EventSender
    acked: list[str] = field(default_factory=list)

    @property
    def channel(self) -> SlackChannel:
        channel = self.app.gateway.channels["slack"]
        assert isinstance(channel, SlackChannel)
        return channel

    async def deliver(self, payload: dict[str, Any], **kw: Any) -> None:
        """Deliver one event_callback and wait until Slack would consider it acknowledged."""
        if self.mode == "http":
            response = await self.sender.send(payload, **kw)
            assert response.status_code == 200, response.text
        else:
            envelope = await self.slack.push(payload)
            await self.slack.wait_for(lambda: envelope in self.slack.acks)
            self.acked.append(envelope)

    async def event(self, event: dict[str, Any], **kw: Any) -> None:
        await self.deliver(event_callback(event), **kw)

    async def settle(self, timeout: float = 10) -> None:
        """Wait until no run is active or queued and the adapter's tasks are done."""

        async def idle() -> None:
            while (
                self.app.registry.active_runs
                or self.app.gateway.scheduler.lanes
                or any(
                    t.get_name() in ("slack:event", "slack:command") for t in self.channel._tasks
                )
            ):
                await asyncio.sleep(0.01)

        await asyncio.wait_for(idle(), timeout)

    async def close(self) -> None:
        """Stop the bot once the runs still finishing (a cancelled one, say) are done: a run
        cancelled by shutdown in the middle of a database write can leak its connection."""
        with contextlib.suppress(TimeoutError):
            await self.settle(timeout=5)
        await self.http.aclose()
        await self.app.aclose()


async def start_bot(
    tmp_path: Path,
    llm: FakeLLM,
    slack: FakeSlack,
    mode: str,
    bot: dict[str, Any] | None = None,
    **extra: Any,
) -> tuple[Loopgate, httpx.AsyncClient]:
    config = make_config(
        tmp_path, llm, channels={"slack": slack_section(slack, mode, **extra)}, bot=bot or {}
    )
    app = Loopgate(config)
    await app.start()
    transport = httpx.ASGITransport(app=create_app(app, manage_lifespan=False))
    return app, httpx.AsyncClient(transport=transport, base_url="http://loopgate")


async def _running_bot(
    mode: str, tmp_path: Path, llm: FakeLLM, slack: FakeSlack, **sections: Any
) -> AsyncIterator[Bot]:
    app, http = await start_bot(tmp_path, llm, slack, mode, **sections)
    if mode == "socket":
        await slack.wait_for(lambda: slack.socket_connections >= 1)
    bot = Bot(app, slack, mode, http, EventSender(http, slack.signing_secret))
    try:
        yield bot
    finally:
        await bot.close()


@pytest.fixture(params=["http", "socket"])
async def bot(
    request: pytest.FixtureRequest, tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> AsyncIterator[Bot]:
    async for started in _running_bot(request.param, tmp_path, llm, slack):
        yield started


@pytest.fixture(params=["http", "socket"])
async def progress_bot(
    request: pytest.FixtureRequest, tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> AsyncIterator[Bot]:
    """Typing refreshed every 10 s: the status backstop (3 intervals) can't hide a missing
    cleanup within a test's 10 s wait."""
    async for started in _running_bot(
        request.param, tmp_path, llm, slack, bot={"typing_interval": 10}
    ):
        yield started


@pytest.fixture
async def http_bot(tmp_path: Path, llm: FakeLLM, slack: FakeSlack) -> AsyncIterator[Bot]:
    app, http = await start_bot(tmp_path, llm, slack, "http")
    bot = Bot(app, slack, "http", http, EventSender(http, slack.signing_secret))
    try:
        yield bot
    finally:
        await bot.close()
