"""Traces: spans stored in the database, verbose input, cancellation, ``loopgate traces``."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent_core import AgentSettings, EventBus, Loop, RunRequest, Tool, ToolRegistry
from agent_core.messages import ImagePart, Message
from agent_core.testing import ScriptedProvider, call, reply, tool_calls
from agent_core.tools import FILE_TOOLS
from agent_core.tracing import VERBOSE_INPUT_CHARS, Trace, messages_as_json, render_tree
from bot.storage import Database, SqlSessionStore, SqlTraceStore, open_database
from tests.waiting import wait_until


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await open_database(f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}")
    yield database
    await database.aclose()


def sql_loop(db: Database, tmp_path: Path, provider: ScriptedProvider, **kw: object) -> Loop:
    async def fails(args: dict[str, object], ctx: object) -> str:
        raise RuntimeError("nope")

    tools = ToolRegistry.of([*FILE_TOOLS, Tool("fails", "f", {"type": "object"}, fails)])
    settings = AgentSettings(id="main", model="m", workspace=tmp_path / "ws", **kw)  # type: ignore[arg-type]
    return Loop(settings, provider, tools, SqlSessionStore(db), SqlTraceStore(db), EventBus())


async def test_spans_are_stored_with_tokens_errors_and_durations(
    db: Database, tmp_path: Path
) -> None:
    provider = ScriptedProvider(
        tool_calls(call("list_files"), call("fails")), reply("x" * 800, input_tokens=7)
    )
    loop = sql_loop(db, tmp_path, provider)
    await loop.run(RunRequest(session_key="s1", message="hi", user_id="u"))
    [trace] = await SqlTraceStore(db).recent_traces(session_key="s1")
    kinds = [(s.kind.value, s.name, s.error) for s in trace.spans]
    assert kinds == [
        ("agent", "main", False),
        ("llm", "scripted/m", False),
        ("tool", "list_files", False),
        ("tool", "fails", True),
        ("llm", "scripted/m", False),
    ]
    llm = trace.spans[4]
    assert llm.attributes["input_tokens"] == 7 and llm.attributes["iteration"] == 2
    assert llm.attributes["provider"] == "scripted" and llm.attributes["model"] == "m"
    assert all(s.duration_ms >= 0 for s in trace.spans) and trace.root.duration_ms > 0
    assert all(s.parent_id == trace.root.id for s in trace.spans[1:])
    assert (trace.input_tokens, trace.output_tokens) == (17, 10)  # (10+7, 5+5)
    assert trace.output_preview == "x" * 500
    assert "input_preview" not in llm.attributes  # not verbose


async def test_verbose_mode_records_the_llm_input(
    db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOOPGATE_TRACE_VERBOSE", "1")
    provider = ScriptedProvider(tool_calls(call("list_files")), reply("ok"))
    loop = sql_loop(db, tmp_path, provider, max_message_chars=200_000)
    await loop.run(RunRequest(session_key="s1", message="find it", user_id="u"))
    await loop.run(RunRequest(session_key="s2", message="y" * 60_000, user_id="u"))
    store = SqlTraceStore(db)
    [trace] = await store.recent_traces(session_key="s1")
    first, second = [s for s in trace.spans if s.kind.value == "llm"]
    sent = json.loads(first.attributes["input_preview"])
    assert sent[-1] == {"role": "user", "content": "find it"}
    later = json.loads(second.attributes["input_preview"])
    assert later[-1]["role"] == "tool" and later[-2]["tool_calls"][0]["name"] == "list_files"
    [big] = await store.recent_traces(session_key="s2")
    llm = next(s for s in big.spans if s.kind.value == "llm")
    assert len(llm.attributes["input_preview"]) == VERBOSE_INPUT_CHARS


async def test_a_cancelled_run_still_saves_its_trace(db: Database, tmp_path: Path) -> None:
    provider = ScriptedProvider(reply("late"), delay=30)
    loop = sql_loop(db, tmp_path, provider)
    task = asyncio.create_task(loop.run(RunRequest(session_key="s1", message="hi", user_id="u")))
    await wait_until(lambda: provider.requests)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    [trace] = await SqlTraceStore(db).recent_traces(session_key="s1")
    assert trace.status == "cancelled" and trace.ended_at is not None
    llm = next(s for s in trace.spans if s.kind.value == "llm")
    assert llm.error  # the interrupted model call
    assert await SqlSessionStore(db).get_session("s1") is None


class SlowTraceStore(SqlTraceStore):
    """Saving takes a while: long enough for a second cancel to arrive mid-save."""

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self.saving = asyncio.Event()

    async def save_trace(self, trace: Trace) -> None:
        self.saving.set()
        await asyncio.sleep(0.2)  # kept: a slow save (the window for the second cancel)
        await super().save_trace(trace)


async def test_a_second_cancel_does_not_abandon_the_trace_save(
    db: Database, tmp_path: Path
) -> None:
    # /stop then shutdown: the run must not return before its trace is written, or shutdown
    # closes the database under a detached save.
    provider = ScriptedProvider(reply("late"), delay=30)
    traces = SlowTraceStore(db)
    settings = AgentSettings(id="main", model="m", workspace=tmp_path / "ws")
    loop = Loop(settings, provider, ToolRegistry(), SqlSessionStore(db), traces, EventBus())
    task = asyncio.create_task(loop.run(RunRequest(session_key="s1", message="hi", user_id="u")))
    await wait_until(lambda: provider.requests)
    task.cancel()
    await traces.saving.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    [trace] = await SqlTraceStore(db).recent_traces(session_key="s1")
    assert trace.status == "cancelled"


async def test_print_traces_renders_a_tree(db: Database, tmp_path: Path) -> None:
    for session, answer in (("sA", "alpha"), ("sB", "beta")):
        provider = ScriptedProvider(tool_calls(call("fails")), reply(answer))
        loop = sql_loop(db, tmp_path, provider)
        await loop.run(RunRequest(session_key=session, message="q", user_id="u"))
    [trace] = await SqlTraceStore(db).recent_traces(session_key="sA")
    lines = render_tree(trace)
    assert "completed" in lines[0] and "session=sA" in lines[0]
    assert lines[1].startswith("  └─ agent main")
    assert any(line.startswith("    └─ llm scripted/m") and "iter=1" in line for line in lines)
    assert any(line.startswith("    └─ tool fails") and "ERROR" in line for line in lines)
    assert lines[-1] == "  output: alpha"


def test_loopgate_traces_command(tmp_path: Path) -> None:
    """The installed command, as a subprocess, on a database a run wrote to."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'cli.sqlite'}"

    async def populate() -> None:
        database = await open_database(url)
        try:
            for session in ("sA", "sB"):
                provider = ScriptedProvider(tool_calls(call("fails")), reply(f"hi {session}"))
                loop = sql_loop(database, tmp_path, provider)
                await loop.run(RunRequest(session_key=session, message="q", user_id="u"))
        finally:
            await database.aclose()

    asyncio.run(populate())
    config = tmp_path / "config.yaml"
    config.write_text(f"database: {{url: '{url}'}}\n")

    def traces(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "bot", "traces", "--config", str(config), *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return done.stdout

    out = traces("--session", "sA")
    assert "session=sA" in out and "session=sB" not in out
    assert "└─ tool fails" in out and "output: hi sA" in out
    assert traces("--last", "1").count("session=") == 1
    assert traces("--session", "nobody").strip() == "no traces for session nobody"


def test_the_verbose_input_names_an_image_but_never_carries_its_bytes() -> None:
    photo = ImagePart("cat.jpg", "inbox/cat.jpg", 8, 6, "image/jpeg", b"\xff\xd8" * 100)
    text = messages_as_json([Message.user("what?", (photo,))])
    assert json.loads(text) == [
        {
            "role": "user",
            "content": "what?",
            "images": ["[image: cat.jpg, 8×6, saved to inbox/cat.jpg]"],
        }
    ]
    assert photo.base64()[:12] not in text


def test_an_llm_spans_cost_is_shown_when_it_is_known() -> None:
    from agent_core import SpanKind
    from agent_core.tracing import new_trace

    trace = new_trace("r1", "s1", "main")
    priced = trace.start_span(SpanKind.LLM, "openai/gpt-4o-mini", iteration=1)
    priced.end(input_tokens=1000, output_tokens=10, cost_usd=0.000156)
    unknown = trace.start_span(SpanKind.LLM, "local/llama", iteration=2)
    unknown.end(input_tokens=5, output_tokens=1, cost_usd=None)
    lines = render_tree(trace)
    assert "tokens=1000/10 $0.000156" in lines[2]
    assert lines[3].endswith("tokens=5/1")
