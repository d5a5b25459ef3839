"""The whole service built from a Config (``bot/app.py``): what exists before and after
start, a start-up that fails half-way closes what it opened, the durable inbox on or off,
start-up warnings, and the drain's stop of intake with its grace for running answers."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from bot.app import Loopgate
from bot.config import AgentConfig
from bot.redaction import MASK, redact
from bot.storage import SqlAgentStore, StorageError, open_database
from channels import ChatRef, ChatType
from channels.errors import Forbidden
from tests.conftest import ChatDriver, make_config
from tests.fakes.llm_server import FakeLLM, delay, text
from tests.telegram_support import FakeTelegram, tg_config
from tests.waiting import wait_until

DM = ChatRef("web", "dm-1", ChatType.DIRECT)


class TestLifecycle:
    async def test_nothing_to_use_before_start(self, tmp_path: Path, llm: FakeLLM) -> None:
        app = Loopgate(make_config(tmp_path, llm))
        for name in ("gateway", "evolution", "db"):
            with pytest.raises(RuntimeError, match="Loopgate is not started"):
                getattr(app, name)
        assert await app.drain() == 0 and not app.draining  # nothing to drain yet
        await app.aclose()  # closing what never started is harmless

    async def test_started_with_the_local_channels_and_an_inbox(self, app: Loopgate) -> None:
        assert sorted(app.gateway.channels) == ["cli", "web"]
        assert app.inbox is not None and app.gateway.accepting
        assert app.evolution.db is app.db

    async def test_the_terminal_chat_has_no_inbox(self, tmp_path: Path, llm: FakeLLM) -> None:
        async with Loopgate(make_config(tmp_path, llm), durable=False) as app:
            assert app.inbox is None
            assert (await ChatDriver(app, DM).ask("hi")) is not None
            assert app.gateway.channels["web"] is app.web

    async def test_secrets_are_masked_from_the_moment_it_is_built(self, tmp_path: Path) -> None:
        token = "web-token-only-this-test-7f3a9c"
        Loopgate(make_config(tmp_path, None, web={"token": token}))
        assert redact(f"token {token} leaked") == f"token {MASK} leaked"

    async def test_an_unreachable_database_fails_the_start(self, tmp_path: Path) -> None:
        config = make_config(
            tmp_path, None, database={"url": "postgresql+asyncpg://x:y@127.0.0.1:1/none"}
        )
        app = Loopgate(config)
        with pytest.raises(StorageError):
            await app.start()
        with pytest.raises(RuntimeError):
            app.gateway  # noqa: B018  # never built

    async def test_a_start_failing_half_way_closes_what_it_opened(
        self, tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
    ) -> None:
        tg.fail_next("getMe", 401, "Unauthorized")  # the last step: starting the channels
        app = Loopgate(tg_config(tmp_path, llm, tg))
        before = threads()
        with pytest.raises(Forbidden):
            await app.start()
        assert not app.gateway.accepting  # built, then closed
        # The database was closed too: its SQLite connection and lane threads end.
        await wait_until(lambda: threads() <= before, 5, what=lambda: str(threads() - before))


def threads() -> set[threading.Thread]:
    """Live threads but the event loop's default executor (it lives as long as the loop)."""
    return {t for t in threading.enumerate() if not t.name.startswith("asyncio_")}


class TestStartUpWarnings:
    async def test_an_agent_nobody_defines(self, tmp_path: Path) -> None:
        config = make_config(tmp_path, None, agents={"default": "front"})
        with capture_logs() as logs:
            async with Loopgate(config):
                pass
        warnings = [e for e in logs if e["event"] == "agent.unknown"]
        assert [(w["key"], w["agent_id"], w["log_level"]) for w in warnings] == [
            ("agents.default", "front", "warning")
        ]

    async def test_a_stored_agent_is_known(self, tmp_path: Path) -> None:
        config = make_config(tmp_path, None, agents={"default": "front"})
        async with await open_database(config.database.url) as db:
            await SqlAgentStore(db).upsert(AgentConfig(id="front"))
        with capture_logs() as logs:
            async with Loopgate(config):
                pass
        assert [e for e in logs if e["event"] == "agent.unknown"] == []


class TestDrain:
    async def test_an_idle_service_drains_at_once_and_only_once(self, app: Loopgate) -> None:
        with capture_logs() as logs:
            assert await app.drain(grace=5) == 0
            assert await app.drain(grace=5) == 0
        assert app.draining
        assert [e["event"] for e in logs].count("loopgate.draining") == 1
        drained = [e for e in logs if e["event"] == "loopgate.drained"]
        assert [e["still_running"] for e in drained] == [0]

    async def test_a_run_longer_than_the_grace_is_counted(
        self, app: Loopgate, llm: FakeLLM
    ) -> None:
        llm.script(delay(30, text("too late")))
        done = await ChatDriver(app, DM).send("slow")
        assert done is not None
        await llm.wait_for(lambda: len(llm.chat_requests) == 1)
        assert await app.drain(grace=0.2) == 1
        assert not done.done()  # still running: aclose hands it back to the inbox

    async def test_a_run_within_the_grace_finishes(self, app: Loopgate, llm: FakeLLM) -> None:
        llm.script(delay(0.3, text("just in time")))
        chat = ChatDriver(app, DM)
        done = await chat.send("quick")
        assert done is not None
        await llm.wait_for(lambda: len(llm.chat_requests) == 1)
        assert await app.drain(grace=10) == 0
        assert done.done()
        await chat.wait_for(lambda: "just in time" in chat.texts())
