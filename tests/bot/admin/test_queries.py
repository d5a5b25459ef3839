"""What the dashboard reads from the database (``bot/admin/queries.py``): query limits,
sessions and their messages, trace trees with the runs they started, and the inbox."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import insert

from agent_core import Span, SpanKind, Trace
from bot.admin import queries
from bot.admin.queries import MAX_LIMIT, clamp
from bot.app import Loopgate
from bot.storage import SqlTraceStore
from bot.storage.models import SessionRow
from tests.conftest import ChatDriver
from tests.fakes.llm_server import FakeLLM, text

KEY = "agent:main:web:direct:dm-alice"
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("given", "expected"),
    [(None, 20), ("", 20), ("abc", 20), ("7", 7), ("0", 1), ("-3", 1), ("99999", MAX_LIMIT)],
)
def test_clamp(given: str | None, expected: int) -> None:
    assert clamp(given, 20) == expected


class TestSessions:
    async def test_newest_first_with_counts_and_the_chat_from_the_key(
        self, app: Loopgate, dm: ChatDriver, group: ChatDriver
    ) -> None:
        await dm.ask("one")
        await dm.ask("two")
        await group.ask("hello", sender="bob")
        found = await queries.sessions(app)
        assert [(s["key"], s["messages"]) for s in found] == [
            ("agent:main:web:group:room-1", 2),
            (KEY, 4),
        ]
        alice = found[1]
        assert (alice["agent_id"], alice["channel"], alice["chat_type"], alice["chat_id"]) == (
            "main", "web", "direct", "dm-alice"
        )  # fmt: skip
        assert [s["key"] for s in await queries.sessions(app, limit=1)] == [found[0]["key"]]

    async def test_a_session_without_messages_and_an_odd_key(self, app: Loopgate) -> None:
        statement = insert(SessionRow).values(
            key="agent:helper:nowhere",
            agent_id="",
            user_id="",
            channel="",
            model="m",
            provider="p",
        )
        await app.db.run_write(lambda conn: conn.execute(statement).close())
        [found] = await queries.sessions(app)
        assert found["messages"] == 0
        assert (found["agent_id"], found["channel"], found["chat_id"]) == ("helper", "", "")

    async def test_messages_oldest_first_masked(
        self, app: Loopgate, dm: ChatDriver, llm: FakeLLM
    ) -> None:
        llm.script(text("see https://x.example/?token=abcdef123456"))
        await dm.ask("my link https://x.example/?access_token=zyxwvu987654")
        await dm.ask("again")
        found = await queries.session_messages(app, KEY)
        assert found is not None and found["key"] == KEY
        contents = [m["content"] for m in found["messages"]]
        assert contents == [
            "my link https://x.example/?access_token=***",
            "see https://x.example/?token=***",
            "again",
            "echo: again",
        ]
        newest = await queries.session_messages(app, KEY, limit=1)
        assert newest is not None and [m["content"] for m in newest["messages"]] == ["echo: again"]
        assert await queries.session_messages(app, "agent:main:web:direct:nobody") is None


def span(kind: SpanKind, name: str, parent: Span | None = None, **attributes: object) -> Span:
    return Span(
        id=uuid.uuid4().hex,
        kind=kind,
        name=name,
        started_at=T0,
        parent_id=parent.id if parent else None,
        duration_ms=12.345,
        attributes=dict(attributes),
    )


def trace(spans: list[Span], parent: Trace | None = None, parent_span: str | None = None) -> Trace:
    return Trace(
        id=uuid.uuid4().hex,
        run_id=uuid.uuid4().hex,
        session_key=KEY,
        agent_id="main",
        started_at=T0,
        status="completed",
        ended_at=T0 + timedelta(milliseconds=1500),
        spans=spans,
        parent_trace_id=parent.id if parent else None,
        parent_span_id=parent_span,
    )


class TestTraceTree:
    async def test_spans_nest_and_child_runs_hang_under_the_span_that_started_them(
        self, app: Loopgate
    ) -> None:
        root = span(SpanKind.AGENT, "main")
        llm_span = span(SpanKind.LLM, "fake-model", root, input_tokens=10, output_tokens=3)
        spawn = span(SpanKind.ASYNC_TOOL, "spawn", root)
        parent = trace([root, llm_span, spawn])
        child = trace([span(SpanKind.AGENT, "helper")], parent, spawn.id)
        orphan = trace([span(SpanKind.AGENT, "helper")], parent, "a-span-never-saved")
        store = SqlTraceStore(app.db)
        for saved in (parent, child, orphan):
            await store.save_trace(saved)

        tree = await queries.trace_tree(app, parent.run_id)  # by run id as well as trace id
        assert tree is not None and tree["id"] == parent.id and tree["duration_ms"] == 1500.0
        [top] = tree["spans"]
        assert [(s["kind"], s["name"]) for s in top["spans"]] == [
            ("llm", "fake-model"),
            ("async_tool", "spawn"),
        ]
        first = top["spans"][0]
        assert (first["input_tokens"], first["output_tokens"], first["duration_ms"]) == (
            10, 3, 12.3
        )  # fmt: skip
        assert [r["id"] for r in top["spans"][1]["runs"]] == [child.id]
        assert [r["id"] for r in top["runs"]] == [orphan.id]  # its span is unknown: the root
        assert await queries.trace_tree(app, "nope") is None

    async def test_a_running_trace_has_no_duration(self, app: Loopgate) -> None:
        running = trace([span(SpanKind.AGENT, "main")])
        running.ended_at = None
        await SqlTraceStore(app.db).save_trace(running)
        [found] = await queries.recent_traces(app, last=5)
        assert found["id"] == running.id and found["duration_ms"] is None
        assert found["ended_at"] is None


class TestChannels:
    async def test_health_and_the_unanswered_entries_cut_and_masked(
        self, app: Loopgate, dm: ChatDriver
    ) -> None:
        assert app.inbox is not None
        long = "token=? see https://x.example/?token=abcdef123456 " + "x" * 600
        await app.inbox.add(dm.message(long), session_key=KEY, agent_id="main")
        report = await queries.channels(app)
        assert report["health"]["database"] == "ok"
        [entry] = report["inbox"]
        assert entry["state"] == "queued" and entry["session_key"] == KEY
        assert entry["text"].startswith("token=? see https://x.example/?token=*** xx")
        assert entry["text"].endswith("x") and len(entry["text"]) < 500
        assert entry["age_s"] >= 0 and entry["parts_delivered"] == 0
        assert (await queries.channels(app, last=0))["inbox"] == []  # health only
