"""bot/http/metrics.py: ``GET /metrics`` behind ``admin.token`` (401 without it), open without
one, and still answered when the inbox can't be read."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families
from structlog.testing import capture_logs

from bot.app import Loopgate
from bot.http.server import create_app
from tests.conftest import make_config
from tests.fakes.llm_server import FakeLLM

ADMIN_TOKEN = "metrics-admin-token-0123456789"


@asynccontextmanager
async def serving(app: Loopgate) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(create_app(app, manage_lifespan=False))
    async with httpx.AsyncClient(transport=transport, base_url="http://loopgate") as client:
        yield client


def families(body: str) -> set[str]:
    return {family.name for family in text_string_to_metric_families(body)}


class UnreadableInbox:
    async def backlog(self) -> object:
        raise ConnectionError("database is gone")


class TestAdminToken:
    async def test_with_admin_token_only_its_bearer_gets_the_metrics(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        config = make_config(tmp_path, llm, admin={"token": ADMIN_TOKEN})
        async with Loopgate(config) as app, serving(app) as client:
            missing = await client.get("/metrics")
            wrong = await client.get("/metrics", headers={"authorization": "Bearer nope"})
            in_query = await client.get(f"/metrics?token={ADMIN_TOKEN}")
            basic = await client.get("/metrics", headers={"authorization": f"Basic {ADMIN_TOKEN}"})
            right = await client.get("/metrics", headers={"authorization": f"Bearer {ADMIN_TOKEN}"})
        for refused in (missing, wrong, in_query, basic):
            assert refused.status_code == 401
            assert refused.headers["www-authenticate"].startswith("Bearer")
            assert "loopgate_" not in refused.text
        assert right.status_code == 200
        assert {"loopgate_turns", "loopgate_active_runs"} <= families(right.text)

    async def test_without_admin_token_metrics_are_open(self, tmp_path: Path, llm: FakeLLM) -> None:
        async with Loopgate(make_config(tmp_path, llm)) as app, serving(app) as client:
            response = await client.get("/metrics")
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
        assert {"loopgate_channel_up", "loopgate_inbox_depth"} <= families(response.text)


async def test_an_unreadable_inbox_leaves_its_metrics_out_and_the_rest_in(
    tmp_path: Path, llm: FakeLLM
) -> None:
    async with Loopgate(make_config(tmp_path, llm)) as app, serving(app) as client:
        inbox = app.inbox
        app.inbox = UnreadableInbox()  # type: ignore[assignment]
        try:
            with capture_logs() as logs:
                response = await client.get("/metrics")
        finally:
            app.inbox = inbox
    assert response.status_code == 200
    names = families(response.text)
    assert "loopgate_inbox_depth" not in names and "loopgate_turns" in names
    assert any(entry["event"] == "metrics.inbox_unreadable" for entry in logs)
