"""The door of the dashboard (``bot/admin/gate.py``) over plain HTTP: who gets in, CSRF, the
login and logout, the lock-out after failed attempts, and where a login may lead."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from starlette.requests import Request

from bot.admin.auth import ADMIN_COOKIE
from bot.admin.gate import is_api, safe_next
from bot.app import Loopgate
from channels import ChatRef, ChatType
from tests.admin_support import BEARER, TOKEN, admin_config, client_of, csrf_of, log_in
from tests.conftest import ChatDriver
from tests.fakes.llm_server import FakeLLM


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


def request_at(path: str, root_path: str = "/admin") -> Request:
    """A request as the ``/admin`` mount hands it to a handler."""
    scope = {"type": "http", "method": "GET", "path": path, "root_path": root_path,
             "headers": []}  # fmt: skip
    return Request(scope)


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

    async def test_a_page_asked_for_anonymously_is_where_the_login_leads(
        self, client: httpx.AsyncClient
    ) -> None:
        page = await client.get("/admin/sessions")
        assert page.status_code == 401
        assert 'name="next" value="/admin/sessions"' in page.text
        posted = await client.post("/admin/runs/x/stop")  # a form's target is no page to show
        assert posted.status_code == 401
        assert 'name="next" value="/admin/"' in posted.text

    async def test_login_form_of_a_signed_in_browser_redirects_to_the_dashboard(
        self, client: httpx.AsyncClient
    ) -> None:
        form = await client.get("/admin/login?next=/admin/traces")
        assert form.status_code == 200 and 'name="next" value="/admin/traces"' in form.text
        await log_in(client)
        again = await client.get("/admin/login")
        assert again.status_code == 303 and again.headers["location"] == "/admin/"

    async def test_csrf_refusal_on_a_page_is_an_html_page(self, client: httpx.AsyncClient) -> None:
        await log_in(client)
        refused = await client.post("/admin/logout", data={"csrf_token": "forged"})
        assert refused.status_code == 403
        assert refused.headers["content-type"].startswith("text/html")
        assert "CSRF" in refused.text
        assert (await client.get("/admin/runs")).status_code == 200  # still signed in

    async def test_logout_deletes_the_cookie(self, client: httpx.AsyncClient) -> None:
        await log_in(client)
        csrf = csrf_of((await client.get("/admin/runs")).text)
        out = await client.post("/admin/logout", data={"csrf_token": csrf})
        assert out.headers["location"] == "/admin/login"
        cookie = out.headers["set-cookie"]
        assert cookie.startswith(f'{ADMIN_COOKIE}=""') and "Max-Age=0" in cookie
        assert "Path=/admin/" in cookie

    async def test_a_locked_out_page_says_when_to_try_again(
        self, client: httpx.AsyncClient
    ) -> None:
        for _ in range(5):
            await log_in(client, "wrong-wrong-wrong")
        page = await client.get("/admin/runs")
        assert page.status_code == 429
        retry = int(page.headers["retry-after"])
        assert retry > 0 and f"try again in {retry} seconds" in page.text

    async def test_a_signed_in_session_is_not_locked_out_by_failures_from_its_address(
        self, client: httpx.AsyncClient
    ) -> None:
        await log_in(client)
        wrong = {"Authorization": "Bearer wrong-wrong-wrong-wrong"}
        statuses = [(await client.get("/admin/api/runs", headers=wrong)).status_code
                    for _ in range(5)]  # fmt: skip
        assert statuses == [401, 401, 401, 401, 429]  # the fifth failure locks at once
        # Bearer guesses from this address are locked out, the right token too...
        assert (await client.get("/admin/api/runs", headers=BEARER)).status_code == 429
        # ... but the session signed in before keeps working.
        assert (await client.get("/admin/api/runs")).status_code == 200


class TestUnits:
    def test_safe_next_stays_on_dashboard_pages(self) -> None:
        request = request_at("/admin/login")
        assert safe_next(request, "/admin/traces") == "/admin/traces"
        assert safe_next(request, "/admin/sessions?x=1") == "/admin/sessions"  # path only
        for wanted in (
            "",
            "/admin",  # not under the mount
            "/admin/api/runs",  # JSON, not a page
            "/admin/login",  # a loop
            "/admin//evil.example/",
            "//evil.example/admin/",
            "https://evil.example/admin/",
            "javascript:alert(1)",
        ):
            assert safe_next(request, wanted) == "/admin/", wanted

    def test_safe_next_follows_a_proxys_root_path(self) -> None:
        request = request_at("/ops/admin/login", root_path="/ops/admin/")
        assert safe_next(request, "/ops/admin/runs") == "/ops/admin/runs"
        assert safe_next(request, "/admin/runs") == "/ops/admin/"

    def test_is_api(self) -> None:
        assert is_api(request_at("/admin/api/runs"))
        assert not is_api(request_at("/admin/runs"))
        assert not is_api(request_at("/admin/apiary"))
