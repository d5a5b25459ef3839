"""bot/http/health.py: what ``GET /healthz`` reports: the inbox depth, 503 while draining or
when the database is unreachable, and a degraded (still 200) service when a channel is not up."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from structlog.testing import capture_logs

from bot.app import Loopgate
from bot.http.health import health_report
from bot.http.server import create_app
from bot.platforms.startup import ChannelState
from channels import ChatRef, ChatType
from tests.conftest import ChatDriver, make_config
from tests.fakes.llm_server import FakeLLM, delay, text
from tests.waiting import wait_until

DM = ChatRef("web", "dm-alice", ChatType.DIRECT)


class UnreachableInbox:
    async def counts(self) -> dict[str, int]:
        raise ConnectionError("database is gone")


async def test_a_healthy_service_is_ok_with_its_channels_and_no_mcp_section(
    tmp_path: Path, llm: FakeLLM
) -> None:
    async with Loopgate(make_config(tmp_path, llm)) as app:
        body, status = await health_report(app)
    assert status == 200
    assert body == {
        "status": "ok",
        "database": "ok",
        "active_runs": 0,
        "channels": {"web": "up", "cli": "up"},
        "inbox": {"depth": 0, "queued": 0, "running": 0},
    }


async def test_a_channel_that_is_not_up_degrades_the_service_but_keeps_200(
    tmp_path: Path, llm: FakeLLM
) -> None:
    async with Loopgate(make_config(tmp_path, llm)) as app:
        app.channel_starter.states["web"] = ChannelState.RETRYING
        body, status = await health_report(app)
    assert status == 200 and body["status"] == "degraded"
    assert body["channels"]["web"] == "retrying"


async def test_an_unreachable_database_is_503_and_logged(tmp_path: Path, llm: FakeLLM) -> None:
    async with Loopgate(make_config(tmp_path, llm)) as app:
        inbox = app.inbox
        app.inbox = UnreachableInbox()  # type: ignore[assignment]
        try:
            with capture_logs() as logs:
                body, status = await health_report(app)
        finally:
            app.inbox = inbox
    assert (body, status) == ({"status": "error", "database": "unreachable"}, 503)
    [failure] = [e for e in logs if e["event"] == "healthz.database_failed"]
    assert failure["error"] == "database is gone"


async def test_healthz_answers_503_draining_with_the_inbox_depth(
    tmp_path: Path, llm: FakeLLM
) -> None:
    llm.script(delay(30, text("x")))
    async with Loopgate(make_config(tmp_path, llm)) as app:
        http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=create_app(app, manage_lifespan=False)),
            base_url="http://loopgate",
        )
        async with http:
            health = await http.get("/healthz")
            assert health.status_code == 200 and health.json()["inbox"]["depth"] == 0
            dm = ChatDriver(app, DM)
            await dm.send("slow")
            await dm.wait_for(lambda: app.registry.active_runs == 1)
            assert (await http.get("/healthz")).json()["inbox"] == {
                "depth": 1,
                "queued": 0,
                "running": 1,
            }
            drain = asyncio.create_task(app.drain(grace=30))

            async def draining() -> httpx.Response | None:
                response = await http.get("/healthz")
                return response if response.status_code == 503 else None

            health = await wait_until(draining, 5)
            assert health.status_code == 503 and health.json()["status"] == "draining"
            drain.cancel()
