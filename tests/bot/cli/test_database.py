"""Opening the database for one command (``bot/cli/database.py``): the action's result is the
exit code, the database is closed after it whatever happens, and an unreachable one is one
line and exit code 2."""

from __future__ import annotations

import io
import threading
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent_core import Trace
from bot.cli.database import with_database
from bot.config import Config, parse_config
from bot.storage import Database, SqlTraceStore, open_database
from tests.waiting import wait_until


def config_at(url: str) -> Config:
    return parse_config({"database": {"url": url}}, {})


def a_trace() -> Trace:
    return Trace(uuid.uuid4().hex, "run-1", "agent:main:web:direct:x", "main", datetime.now(UTC))


def threads() -> set[threading.Thread]:
    """Live threads but the event loop's default executor (it lives as long as the loop)."""
    return {t for t in threading.enumerate() if not t.name.startswith("asyncio_")}


async def test_the_action_result_is_the_exit_code_and_the_database_is_closed(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'c.db'}"
    trace = a_trace()
    before = threads()

    async def action(db: Database) -> int:
        await SqlTraceStore(db).save_trace(trace)  # queued: written behind, flushed on close
        return 3

    assert await with_database(config_at(url), action) == 3
    # SQLite's connection and lane threads end with it (a closed connection's thread exits
    # just after).
    await wait_until(lambda: threads() <= before, 5, what=lambda: str(threads() - before))
    async with await open_database(url) as other:
        stored = await SqlTraceStore(other).get(trace.id)
    assert stored is not None and stored.run_id == "run-1"


async def test_closed_when_the_action_fails(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'c.db'}"
    trace = a_trace()

    async def action(db: Database) -> int:
        await SqlTraceStore(db).save_trace(trace)
        raise RuntimeError("boom")

    before = threads()
    with pytest.raises(RuntimeError, match="boom"):
        await with_database(config_at(url), action)
    await wait_until(lambda: threads() <= before, 5, what=lambda: str(threads() - before))
    async with await open_database(url) as other:
        assert await SqlTraceStore(other).get(trace.id) is not None


async def test_an_unreachable_database_is_exit_2_without_running_the_action() -> None:
    ran: list[Database] = []

    async def action(db: Database) -> int:
        ran.append(db)
        return 0

    err = io.StringIO()
    config = config_at("postgresql+asyncpg://nobody:secret@127.0.0.1:1/none")
    assert await with_database(config, action, err) == 2
    assert ran == []
    [line] = err.getvalue().splitlines()
    assert line.startswith("loopgate: ")


async def test_errors_go_to_stderr_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    async def action(db: Database) -> int:
        return 0

    config = config_at("postgresql+asyncpg://nobody:secret@127.0.0.1:1/none")
    assert await with_database(config, action) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("loopgate: ")
