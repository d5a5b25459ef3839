"""The ``/admin`` mount (``bot/admin/app.py``): absent without ``admin.token``, the redirect of
``/admin`` itself, and the security headers on every dashboard response."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from starlette.types import Message, Receive, Scope, Send

from bot.admin.app import SECURITY_HEADERS, SecurityHeaders
from bot.app import Loopgate
from tests.admin_support import BEARER, admin_config, client_of
from tests.conftest import make_config
from tests.fakes.llm_server import FakeLLM


@pytest.fixture
async def admin_app(tmp_path: Path, llm: FakeLLM) -> AsyncIterator[Loopgate]:
    async with Loopgate(admin_config(tmp_path, llm)) as started:
        yield started


@pytest.fixture
async def client(admin_app: Loopgate) -> AsyncIterator[httpx.AsyncClient]:
    async for c in client_of(admin_app):
        yield c


class TestOff:
    async def test_no_token_no_dashboard(self, tmp_path: Path, llm: FakeLLM) -> None:
        async with Loopgate(make_config(tmp_path, llm)) as app:
            async for client in client_of(app):
                for path in ("/admin/", "/admin/login", "/admin/api/runs", "/admin/runs"):
                    assert (await client.get(path)).status_code == 404, path
                    assert (await client.get(path, headers=BEARER)).status_code == 404, path
                login = await client.post("/admin/login", data={"token": "x"})
                assert login.status_code == 404

    async def test_every_method_is_a_plain_404_not_the_webhooks_405(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        async with Loopgate(make_config(tmp_path, llm)) as app:
            async for client in client_of(app):
                for method in ("GET", "HEAD", "POST", "PUT", "DELETE"):
                    response = await client.request(method, "/admin")
                    assert response.status_code == 404, method
                    assert "allow" not in response.headers, method
                    assert "content-security-policy" not in response.headers, method


class TestMounted:
    async def test_admin_without_its_slash_leads_to_the_dashboard(
        self, client: httpx.AsyncClient
    ) -> None:
        # It fell into the webhooks' POST-only route: 405 with "allow: POST".
        response = await client.get("/admin")
        assert response.status_code == 307
        assert response.headers["location"].endswith("/admin/")
        assert (await client.head("/admin")).status_code == 307

    async def test_security_headers(self, client: httpx.AsyncClient) -> None:
        page = await client.get("/admin/login")
        assert page.status_code == 200
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert page.headers["x-frame-options"] == "DENY"
        assert page.headers["cache-control"] == "no-store"

    async def test_refusals_and_json_carry_the_headers_too(self, client: httpx.AsyncClient) -> None:
        for response in (
            await client.get("/admin/api/runs"),  # 401, JSON
            await client.get("/admin/api/runs", headers=BEARER),  # 200, JSON
            await client.get("/admin/nope"),  # 401, the login page
        ):
            for name, value in SECURITY_HEADERS.items():
                assert response.headers.get(name) == value, (response.url, name)


async def _serve(app: SecurityHeaders, scope: Scope) -> list[Message]:
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent


class TestSecurityHeadersUnit:
    async def test_replaces_the_handlers_cache_control_instead_of_adding_one(self) -> None:
        async def inner(scope: Scope, receive: Receive, send: Send) -> None:
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"cache-control", b"max-age=3600"), (b"x-own", b"kept")],
                }
            )
            await send({"type": "http.response.body", "body": b"ok"})

        sent = await _serve(SecurityHeaders(inner), {"type": "http", "path": "/"})
        headers = sent[0]["headers"]
        assert [v for k, v in headers if k == b"cache-control"] == [b"no-store"]
        assert (b"x-own", b"kept") in headers
        assert (b"x-frame-options", b"DENY") in headers
        assert sent[1] == {"type": "http.response.body", "body": b"ok"}  # the body untouched

    async def test_other_scopes_pass_through_untouched(self) -> None:
        async def inner(scope: Scope, receive: Receive, send: Send) -> None:
            await send({"type": "websocket.accept", "headers": []})

        sent = await _serve(SecurityHeaders(inner), {"type": "websocket", "path": "/"})
        assert sent == [{"type": "websocket.accept", "headers": []}]
