"""Shared set-up for the orchestration tests: a started Loopgate with several agents, and
helpers to read what the fake LLM was asked."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from agent_core import Event, EventType
from bot.app import Loopgate
from bot.storage.orchestration import SqlOrchestrationStore
from channels import ChatRef, ChatType
from tests.conftest import ChatDriver, make_config
from tests.fakes.llm_server import FakeLLM, RecordedRequest


@asynccontextmanager
async def service(
    tmp_path: Path, llm: FakeLLM, *agents: str, **defaults: Any
) -> AsyncIterator[Loopgate]:
    """Loopgate with ``main`` and ``agents`` configured; ``defaults`` go to agents.defaults."""
    config = make_config(
        tmp_path,
        llm,
        agents={
            "list": [{"id": "main"}, *({"id": a} for a in agents)],
            "defaults": {"workspace": str(tmp_path / "workspaces"), **defaults},
        },
    )
    async with Loopgate(config) as app:
        yield app


def store(app: Loopgate) -> SqlOrchestrationStore:
    return SqlOrchestrationStore(app.db)


def dm(app: Loopgate, chat: str = "dm-alice") -> ChatDriver:
    return ChatDriver(app, ChatRef("web", chat, ChatType.DIRECT))


def system_prompt(request: RecordedRequest) -> str:
    return str(request.json["messages"][0]["content"])


def requests_of(llm: FakeLLM, marker: str) -> list[RecordedRequest]:
    return [r for r in llm.chat_requests if marker in system_prompt(r)]


def offered_tools(request: RecordedRequest) -> set[str]:
    return {t["function"]["name"] for t in request.json.get("tools") or []}


def tool_results(request: RecordedRequest) -> list[str]:
    return [str(m["content"]) for m in request.json["messages"] if m["role"] == "tool"]


def args(**kw: Any) -> str:
    return json.dumps(kw)


class EventLog:
    """Every event of the service, and the most children running at once."""

    def __init__(self, app: Loopgate) -> None:
        self.events: list[Event] = []
        self.peak_children = 0
        self._changed = asyncio.Event()
        app.events.subscribe(self._record)

    async def _record(self, event: Event) -> None:
        self.events.append(event)
        if event.type in (EventType.CHILD_STARTED, EventType.CHILD_COMPLETED):
            self.peak_children = max(self.peak_children, event.payload["active_children"])
        self._changed.set()

    def of(self, type_: EventType) -> list[Event]:
        return [e for e in self.events if e.type is type_]

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 10) -> None:
        async def loop() -> None:
            while not predicate():
                self._changed.clear()
                await self._changed.wait()

        await asyncio.wait_for(loop(), timeout)
