"""Shared fixtures: a fake LLM over real HTTP and a started Loopgate wired to it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import structlog

from agent_core import RunResult
from bot.app import Loopgate
from bot.config import Config, parse_config
from channels import ChatRef, ChatType, InboundMessage, Sender
from channels.local import LocalChannel, Outbound
from tests.fakes.llm_server import FakeLLM

# A plugin rather than imports: the Slack test modules share its fixtures, and importing a fixture
# into a module reads as an unused import to ruff.
pytest_plugins = [
    "tests.slack_support",
    "tests.storage_support",
    "tests.telegram_support",
    "tests.zalo_support",
    "tests.cluster_support",  # last: it imports storage_support
]


@pytest.fixture(autouse=True)
def _reset_logging() -> Iterator[None]:
    """Tests that run the CLI in-process configure structlog; don't leak that to later tests."""
    yield
    structlog.reset_defaults()


@pytest.fixture
async def llm() -> AsyncIterator[FakeLLM]:
    async with FakeLLM() as server:
        yield server


def make_config(tmp_path: Path, llm: FakeLLM | None, **sections: Any) -> Config:
    data: dict[str, Any] = {
        "database": {"url": f"sqlite+aiosqlite:///{tmp_path / 'loopgate.db'}"},
        "agents": {"defaults": {"workspace": str(tmp_path / "workspaces")}},
        "bot": {"typing_interval": 0.05},
    }
    if llm is not None:
        data["providers"] = {"openai": {"base_url": llm.base_url, "model": "fake-model"}}
    for key, value in sections.items():
        data.setdefault(key, {}).update(value)
    return parse_config(data, {})


@dataclass
class ChatDriver:
    """Talks to a started Loopgate through its web channel and records what comes back."""

    app: Loopgate
    chat: ChatRef
    outbound: list[Outbound] = field(default_factory=list)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        async def record(o: Outbound) -> None:
            self.outbound.append(o)
            self._changed.set()

        self.app.web.listen(self.chat.chat_id, record)

    @property
    def channel(self) -> LocalChannel:
        return self.app.web

    def message(
        self,
        text: str,
        *,
        sender: str = "alice",
        message_id: str | None = None,
        admin: bool = False,
    ) -> InboundMessage:
        return InboundMessage(
            chat=self.chat,
            message_id=message_id or uuid.uuid4().hex,
            sender=Sender(sender, sender.title()),
            text=text,
            sender_is_admin=admin,
        )

    async def send(self, text: str, **kw: Any) -> asyncio.Future[RunResult | None] | None:
        job = await self.app.gateway.handle(self.message(text, **kw))
        return job.done if job is not None else None

    async def ask(self, text: str, **kw: Any) -> RunResult | None:
        done = await self.send(text, **kw)
        assert done is not None, "message was not queued"
        result = await asyncio.wait_for(done, 15)
        await self.app.gateway.turns.cleanups.flushed(15)  # its last reaction, sent after it
        return result

    def texts(self) -> list[str]:
        return [o.text for o in self.outbound if o.kind == "message"]

    def kinds(self) -> list[str]:
        return [o.kind for o in self.outbound]

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 10) -> None:
        async def loop() -> None:
            while not predicate():
                self._changed.clear()
                await self._changed.wait()

        await asyncio.wait_for(loop(), timeout)


@pytest.fixture
async def app(tmp_path: Path, llm: FakeLLM) -> AsyncIterator[Loopgate]:
    async with Loopgate(make_config(tmp_path, llm)) as started:
        yield started


@pytest.fixture
def dm(app: Loopgate) -> ChatDriver:
    return ChatDriver(app, ChatRef("web", "dm-alice", ChatType.DIRECT))


@pytest.fixture
def group(app: Loopgate) -> ChatDriver:
    return ChatDriver(app, ChatRef("web", "room-1", ChatType.GROUP))
