"""Shared pieces of the dashboard tests (``test_admin_*.py``): the token, a started Loopgate
with ``admin.token`` set, and HTTP clients talking to its ASGI app in-process."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bot.app import Loopgate
from bot.config import Config
from bot.evolution.records import Suggestion, SuggestionStatus
from bot.evolution.store import SuggestionStore
from bot.http.server import create_app
from tests.conftest import make_config
from tests.fakes.llm_server import FakeLLM

TOKEN = "admin-token-for-tests-0123456789"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


def admin_config(tmp_path: Path, llm: FakeLLM, token: str = TOKEN, **sections: Any) -> Config:
    return make_config(tmp_path, llm, admin={"token": token}, **sections)


async def client_of(
    app: Loopgate, *, https: bool = False, headers: dict[str, str] | None = None
) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the server's ASGI app (``app`` already started): no socket, same routes."""
    transport = httpx.ASGITransport(app=create_app(app, manage_lifespan=False))
    base = "https://testserver" if https else "http://testserver"
    async with httpx.AsyncClient(transport=transport, base_url=base, headers=headers) as client:
        yield client


async def log_in(client: httpx.AsyncClient, token: str = TOKEN) -> httpx.Response:
    return await client.post("/admin/login", data={"token": token, "next": "/admin/runs"})


def csrf_of(page: str) -> str:
    marker = 'name="csrf-token" content="'
    start = page.index(marker) + len(marker)
    return page[start : page.index('"', start)]


async def seed_suggestion(app: Loopgate, *, agent_id: str = "main") -> Suggestion:
    """A pending suggestion as a cycle would leave it: raise ``max_iterations`` 20 → 22."""
    suggestion = Suggestion(
        id=uuid.uuid4().hex[:12],
        agent_id=agent_id,
        rule="IterationLimitRule",
        status=SuggestionStatus.PENDING,
        evidence={"runs": 150, "capped": 30},
        change={"kind": "param", "param": "max_iterations", "from": 20, "to": 22},
        summary="Runs often hit max_iterations: allow a few more.",
        created_at=datetime.now(UTC),
        decided_by=None,
        decided_at=None,
        applied_at=None,
        baseline=None,
        outcome=None,
    )
    await SuggestionStore(app.db).add(suggestion)
    return suggestion
