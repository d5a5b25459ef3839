"""The dashboard's server-sent events (``bot/admin/stream.py``): what a tab is sent, what is
cut or dropped, heart-beats, and when a stream ends."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from agent_core import Event, EventType
from bot.admin import stream as stream_module
from bot.admin.runs import RunTracker
from bot.admin.stream import PREVIEW_CHARS, event_stream, events_response
from bot.app import Loopgate
from channels import ChatRef, ChatType
from tests.admin_support import admin_config
from tests.conftest import ChatDriver
from tests.fakes.llm_server import FakeLLM, call, delay, text, tool_calls
from tests.waiting import wait_until

KEY = "agent:main:web:direct:dm-alice"


@pytest.fixture
async def admin_app(tmp_path: Path, llm: FakeLLM) -> AsyncIterator[Loopgate]:
    async with Loopgate(admin_config(tmp_path, llm)) as started:
        yield started


@pytest.fixture
def chat(admin_app: Loopgate) -> ChatDriver:
    return ChatDriver(admin_app, ChatRef("web", "dm-alice", ChatType.DIRECT))


@pytest.fixture
def tracker(app: Loopgate) -> Iterator[RunTracker]:
    tracker = RunTracker(app)
    yield tracker
    tracker.close()


@pytest.fixture
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ticks of 10 ms instead of a second, and no heart-beat unless a test asks for one."""
    monkeypatch.setattr(stream_module, "TICK_SECONDS", 0.01)
    monkeypatch.setattr(stream_module, "HEARTBEAT_SECONDS", 3600.0)


def parse(message: str) -> tuple[str, object]:
    kind, data = message.split("\n", 1)
    return kind.removeprefix("event: "), json.loads(data.removeprefix("data: "))


async def publish(app: Loopgate, kind: EventType, **payload: object) -> None:
    await app.events.publish(Event(kind, "r1", KEY, dict(payload)))


class TestLive:
    async def test_stream_sends_the_runs_and_their_events(
        self, admin_app: Loopgate, chat: ChatDriver, llm: FakeLLM
    ) -> None:
        tracker = RunTracker(admin_app)
        stream = event_stream(admin_app, tracker)
        assert await anext(stream) == "retry: 2000\n\n"
        first = await anext(stream)  # the (empty) table
        assert first == "event: runs\ndata: []\n\n"
        llm.script(tool_calls(call("list_files", {})), delay(30, text("late")))
        done = await chat.send("work")
        assert done is not None
        seen: list[tuple[str, object]] = []

        async def until_tool_shown() -> None:
            async for message in stream:
                kind, data = message.split("\n", 1)
                if kind.startswith("event:"):
                    payload = json.loads(data.removeprefix("data: "))
                    seen.append((kind.removeprefix("event: "), payload))
                    if kind == "event: run" and payload["type"] == "tool.call":
                        return

        await asyncio.wait_for(until_tool_shown(), 10)
        runs = [data for kind, data in seen if kind == "runs" and data]
        assert runs and runs[0][0]["chat_id"] == "dm-alice"  # type: ignore[index]
        types = [data["type"] for kind, data in seen if kind == "run"]  # type: ignore[index]
        assert types[0] == "run.started" and types[-1] == "tool.call"
        run_id = runs[0][0]["run_id"]  # type: ignore[index]
        await chat.wait_for(lambda: tracker.runs()[0]["current_tool"] is None)
        assert await tracker.stop(run_id, by="test")
        await asyncio.wait_for(done, 5)
        await stream.aclose()
        tracker.close()
        assert tracker.runs() == []


@pytest.mark.usefixtures("fast")
class TestStream:
    async def test_only_run_events_are_sent_their_texts_cut_and_masked(
        self, app: Loopgate, tracker: RunTracker
    ) -> None:
        stream = event_stream(app, tracker)
        assert await anext(stream) == "retry: 2000\n\n"
        assert parse(await anext(stream)) == ("runs", [])
        await publish(app, EventType.CHUNK, text="a streamed piece")  # not for the dashboard
        await publish(
            app,
            EventType.TOOL_RESULT,
            id="c1",
            name="fetch",
            content="y" * 1000,
            error="GET https://x.example/?token=hunter2hunter2 failed",
            arguments={"secret": "not shown"},
        )
        kind, data = parse(await anext(stream))
        assert kind == "run"
        assert data == {
            "type": "tool.result",
            "run_id": "r1",
            "session_key": KEY,
            "payload": {
                "id": "c1",
                "name": "fetch",
                "content": "y" * PREVIEW_CHARS,
                "error": "GET https://x.example/?token=*** failed",
            },
        }
        await stream.aclose()

    async def test_a_full_queue_drops_events_instead_of_waiting(
        self, app: Loopgate, tracker: RunTracker, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(stream_module, "QUEUE_SIZE", 1)
        stream = event_stream(app, tracker)
        await anext(stream)  # subscribed from here
        for iteration in (1, 2, 3):  # a slow tab: nothing read meanwhile
            await publish(app, EventType.ACTIVITY, phase="thinking", iteration=iteration)
        sent = [parse(await anext(stream))]
        assert parse(await anext(stream)) == ("runs", [])  # the table follows the event
        await publish(app, EventType.ACTIVITY, phase="thinking", iteration=4)
        sent.append(parse(await anext(stream)))
        assert [data["payload"]["iteration"] for _, data in sent] == [1, 4]  # type: ignore[index]
        await stream.aclose()

    async def test_an_idle_stream_sends_heartbeats_not_the_same_table(
        self, app: Loopgate, tracker: RunTracker, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(stream_module, "HEARTBEAT_SECONDS", 0.0)
        stream = event_stream(app, tracker)
        await anext(stream)
        assert parse(await anext(stream)) == ("runs", [])
        assert await anext(stream) == ": keep-alive\n\n"
        assert await anext(stream) == ": keep-alive\n\n"
        await stream.aclose()

    async def test_ends_when_the_service_drains(self, app: Loopgate, tracker: RunTracker) -> None:
        received: list[str] = []

        async def read() -> None:
            async for message in event_stream(app, tracker):
                received.append(message)

        reader = asyncio.create_task(read())
        await wait_until(lambda: len(received) >= 2)
        app.draining = True
        await asyncio.wait_for(reader, 5)
        assert received == ["retry: 2000\n\n", "event: runs\ndata: []\n\n"]

    async def test_ends_after_its_longest_time(
        self, app: Loopgate, tracker: RunTracker, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(stream_module, "MAX_STREAM_SECONDS", 0.0)
        messages = [m async for m in event_stream(app, tracker)]
        assert messages == ["retry: 2000\n\n"]

    def test_response_is_an_uncached_event_stream(self, app: Loopgate, tracker: RunTracker) -> None:
        response = events_response(app, tracker)
        assert response.media_type == "text/event-stream"
        assert response.headers["cache-control"] == "no-store"
        assert response.headers["x-accel-buffering"] == "no"  # nginx must not buffer it
