"""The dashboard over plain HTTP: who gets in, CSRF, and the JSON API (``/admin/api/``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from agent_core import RunStatus
from bot.admin.auth import ADMIN_COOKIE, AdminSessions, LoginLimiter
from bot.app import Loopgate
from bot.config import ConfigFileError, parse_config
from bot.redaction import secrets_of
from channels import ChatRef, ChatType
from tests.admin_support import BEARER, TOKEN, admin_config, client_of, csrf_of, log_in
from tests.conftest import ChatDriver, make_config
from tests.fakes.llm_server import FakeLLM, delay, text


@pytest.fixture
async def admin_app(tmp_path: Path, llm: FakeLLM) -> AsyncIterator[Loopgate]:
    async with Loopgate(admin_config(tmp_path, llm)) as started:
        yield started


@pytest.fixture
async def client(admin_app: Loopgate) -> AsyncIterator[httpx.AsyncClient]:
    async for c in client_of(admin_app):
        yield c


@pytest.fixture
def chat(admin_app: Loopgate) -> ChatDriver:
    return ChatDriver(admin_app, ChatRef("web", "dm-alice", ChatType.DIRECT))


class TestOff:
    async def test_no_token_no_dashboard(self, tmp_path: Path, llm: FakeLLM) -> None:
        async with Loopgate(make_config(tmp_path, llm)) as app:
            async for client in client_of(app):
                for path in ("/admin/", "/admin/login", "/admin/api/runs", "/admin/runs"):
                    assert (await client.get(path)).status_code == 404, path
                    assert (await client.get(path, headers=BEARER)).status_code == 404, path
                login = await client.post("/admin/login", data={"token": "x"})
                assert login.status_code == 404

    def test_short_token_is_a_config_error(self) -> None:
        with pytest.raises(ConfigFileError, match=r"admin\.token: .*at least 16 characters"):
            parse_config({"admin": {"token": "secret"}}, {})

    def test_token_from_the_environment_is_masked_in_logs(self) -> None:
        config = parse_config({"admin": {"token": "${ADMIN_TOKEN}"}}, {"ADMIN_TOKEN": TOKEN})
        assert config.admin.token == TOKEN
        assert TOKEN in secrets_of(config)


class TestAnonymous:
    async def test_refused_everywhere_with_nothing_in_the_body(
        self, client: httpx.AsyncClient, chat: ChatDriver
    ) -> None:
        await chat.ask("my secret question")
        for path in ("/admin/api/sessions", "/admin/api/traces", "/admin/api/runs"):
            response = await client.get(path)
            assert response.status_code == 401, path
            assert response.json() == {
                "error": "unauthorized: send Authorization: Bearer <admin.token>"
            }
            assert response.headers["www-authenticate"].startswith("Bearer")
        for path in ("/admin/", "/admin/sessions", "/admin/static/admin.js", "/admin/nope"):
            page = await client.get(path)
            assert page.status_code == 401, path
            assert 'name="token"' in page.text  # the login form, and nothing else
            assert "dm-alice" not in page.text and "secret question" not in page.text
        stop = await client.post("/admin/api/runs/x/stop")
        assert stop.status_code == 401

    async def test_wrong_bearer_token(self, client: httpx.AsyncClient) -> None:
        response = await client.get("/admin/api/runs", headers={"Authorization": "Bearer nope"})
        assert response.status_code == 401

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


class TestBearer:
    async def test_reads_every_endpoint(self, client: httpx.AsyncClient, chat: ChatDriver) -> None:
        await chat.ask("hello")
        for path in ("runs", "sessions", "traces?last=5", "channels", "inbox", "agents"):
            response = await client.get(f"/admin/api/{path}", headers=BEARER)
            assert response.status_code == 200, (path, response.text)
        sessions = (await client.get("/admin/api/sessions", headers=BEARER)).json()["sessions"]
        key = "agent:main:web:direct:dm-alice"
        assert [s["key"] for s in sessions] == [key]
        assert sessions[0]["channel"] == "web" and sessions[0]["messages"] == 2
        messages = await client.get(f"/admin/api/sessions/{key}/messages", headers=BEARER)
        assert [m["content"] for m in messages.json()["messages"]] == ["hello", "echo: hello"]
        traces = (await client.get("/admin/api/traces?last=1", headers=BEARER)).json()["traces"]
        tree = (await client.get(f"/admin/api/traces/{traces[0]['id']}", headers=BEARER)).json()
        assert tree["status"] == "completed" and tree["session_key"] == key
        root = tree["spans"][0]
        assert root["kind"] == "agent" and [s["kind"] for s in root["spans"]] == ["llm"]
        by_run = await client.get(f"/admin/api/traces/{tree['run_id']}", headers=BEARER)
        assert by_run.json()["id"] == tree["id"]
        health = (await client.get("/admin/api/channels", headers=BEARER)).json()
        assert health["channels"] == {"web": "up", "cli": "up"}
        inbox = (await client.get("/admin/api/inbox", headers=BEARER)).json()
        assert inbox == {"counts": {"depth": 0, "queued": 0, "running": 0}, "entries": []}

    async def test_post_needs_no_csrf(self, client: httpx.AsyncClient) -> None:
        response = await client.post("/admin/api/runs/nope/stop", headers=BEARER)
        assert response.status_code == 404  # authorized, and there is no such run

    async def test_stop_a_run_as_stop_does(
        self, admin_app: Loopgate, client: httpx.AsyncClient, chat: ChatDriver, llm: FakeLLM
    ) -> None:
        llm.script(delay(30, text("too late")))
        done = await chat.send("long task")
        assert done is not None
        await chat.wait_for(lambda: len(llm.chat_requests) == 1)
        runs = (await client.get("/admin/api/runs", headers=BEARER)).json()["runs"]
        assert [(r["agent_id"], r["channel"], r["chat_id"]) for r in runs] == [
            ("main", "web", "dm-alice")
        ]
        assert runs[0]["phase"] == "thinking"
        run_id = runs[0]["run_id"]
        stopped = await client.post(f"/admin/api/runs/{run_id}/stop", headers=BEARER)
        assert stopped.json() == {"stopped": run_id}
        result = await asyncio.wait_for(done, 5)
        assert result is not None and result.status is RunStatus.CANCELLED
        assert chat.texts() == ["Stopped."]
        await chat.wait_for(lambda: chat.kinds()[-1] == "reaction_removed")
        assert "typing" not in chat.kinds()[chat.kinds().index("message") :]
        assert admin_app.registry.active_runs == 0
        trace = await client.get(f"/admin/api/traces/{run_id}", headers=BEARER)
        assert trace.json()["status"] == "cancelled"

    async def test_edit_agents(self, admin_app: Loopgate, client: httpx.AsyncClient) -> None:
        put = await client.put(
            "/admin/api/agents/helper",
            headers=BEARER,
            json={"model": "other-model", "system_prompt": "Be brief."},
        )
        assert put.status_code == 200, put.text
        agent = put.json()
        assert agent["source"] == "db" and agent["resolved"]["model"] == "other-model"
        cleared = await client.put(
            "/admin/api/agents/helper", headers=BEARER, json={"system_prompt": ""}
        )
        assert cleared.json()["stored"] == {"id": "helper", "model": "other-model"}
        bad = await client.put("/admin/api/agents/helper", headers=BEARER, json={"provider": "x"})
        assert bad.status_code == 400 and "unknown provider" in bad.json()["fields"]["provider"]
        odd = await client.put("/admin/api/agents/helper", headers=BEARER, json={"tools": 1})
        assert odd.status_code == 400 and "tools" in odd.json()["fields"]
        ids = [a["id"] for a in (await client.get("/admin/api/agents", headers=BEARER)).json()[
            "agents"]]  # fmt: skip
        assert ids == ["main", "helper"]
        assert (await client.delete("/admin/api/agents/helper", headers=BEARER)).status_code == 200
        assert (await client.get("/admin/api/agents/helper", headers=BEARER)).status_code == 404


class TestLogin:
    async def test_cookie_is_a_signed_session_not_the_token(
        self, client: httpx.AsyncClient
    ) -> None:
        response = await log_in(client)
        assert response.status_code == 303 and response.headers["location"] == "/admin/runs"
        cookie = response.headers["set-cookie"]
        assert cookie.startswith(f"{ADMIN_COOKIE}=") and TOKEN not in cookie
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/admin/" in cookie
        assert "Secure" not in cookie
        page = await client.get("/admin/runs")
        assert page.status_code == 200 and "Live runs" in page.text

    async def test_secure_cookie_over_https(self, admin_app: Loopgate) -> None:
        async for client in client_of(admin_app, https=True):
            response = await log_in(client)
            assert "Secure" in response.headers["set-cookie"]

    async def test_wrong_token(self, client: httpx.AsyncClient) -> None:
        response = await log_in(client, "not-the-token-at-all")
        assert response.status_code == 401 and "not right" in response.text
        assert "set-cookie" not in response.headers

    async def test_post_with_the_cookie_needs_the_csrf_token(
        self, client: httpx.AsyncClient
    ) -> None:
        await log_in(client)
        refused = await client.post("/admin/api/runs/nope/stop")
        assert refused.status_code == 403 and "CSRF" in refused.json()["error"]
        form = await client.post("/admin/runs/nope/stop", data={"csrf_token": "forged"})
        assert form.status_code == 403
        csrf = csrf_of((await client.get("/admin/runs")).text)
        header = await client.post("/admin/api/runs/nope/stop", headers={"X-CSRF-Token": csrf})
        assert header.status_code == 404  # past the checks: no such run
        field = await client.post("/admin/runs/nope/stop", data={"csrf_token": csrf})
        assert field.status_code == 303 and "not+running" in field.headers["location"]

    async def test_logout_ends_the_session(self, client: httpx.AsyncClient) -> None:
        await log_in(client)
        cookie = client.cookies[ADMIN_COOKIE]
        csrf = csrf_of((await client.get("/admin/runs")).text)
        out = await client.post("/admin/logout", data={"csrf_token": csrf})
        assert out.status_code == 303
        client.cookies.set(ADMIN_COOKIE, cookie, path="/admin/")  # a copy kept by someone
        assert (await client.get("/admin/api/runs")).status_code == 401

    async def test_next_never_leaves_the_dashboard(self, client: httpx.AsyncClient) -> None:
        for wanted in ("//evil.example/", "https://evil.example/admin/", "/elsewhere"):
            response = await client.post("/admin/login", data={"token": TOKEN, "next": wanted})
            assert response.headers["location"] == "/admin/", wanted

    async def test_failed_logins_are_rate_limited(self, client: httpx.AsyncClient) -> None:
        for _ in range(5):
            assert (await log_in(client, "wrong-wrong-wrong")).status_code == 401
        locked = await log_in(client)  # even the right token, while locked
        assert locked.status_code == 429 and int(locked.headers["retry-after"]) > 0
        api = await client.get("/admin/api/runs", headers=BEARER)
        assert api.status_code == 429


class TestUnits:
    def test_session_cookie_expires_and_resists_forgery(self) -> None:
        now = [1000.0]
        sessions = AdminSessions(TOKEN, max_age=60, clock=lambda: now[0])
        session, cookie = sessions.new()
        assert sessions.read(cookie) == session
        sid, expires, signature = cookie.split(".")
        assert sessions.read(f"{sid}.{int(expires) + 999}.{signature}") is None
        assert AdminSessions("another-token-0123456789", max_age=60).read(cookie) is None
        now[0] += 61
        assert sessions.read(cookie) is None

    def test_limiter_forgets_old_failures(self) -> None:
        now = [0.0]
        limiter = LoginLimiter(attempts=2, window=10, clock=lambda: now[0])
        limiter.failed("a")
        limiter.failed("a")
        assert limiter.retry_after("a") == 10 and limiter.retry_after("b") == 0
        now[0] = 10.5
        assert limiter.retry_after("a") == 0
