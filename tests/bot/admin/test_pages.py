"""The dashboard's pages and forms over HTTP with a login session, suggestions review, and the
live-runs event stream."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from bot.app import Loopgate
from bot.storage import SqlAgentStore
from channels import ChatRef, ChatType
from tests.admin_support import (
    admin_config,
    client_of,
    csrf_of,
    log_in,
    seed_suggestion,
)
from tests.conftest import ChatDriver
from tests.fakes.llm_server import FakeLLM, call, text, tool_calls

KEY = "agent:main:web:direct:dm-alice"


@pytest.fixture
async def admin_app(tmp_path: Path, llm: FakeLLM) -> AsyncIterator[Loopgate]:
    async with Loopgate(admin_config(tmp_path, llm)) as started:
        yield started


@pytest.fixture
async def browser(admin_app: Loopgate) -> AsyncIterator[httpx.AsyncClient]:
    """A client signed in through the login form, like a browser."""
    async for client in client_of(admin_app):
        assert (await log_in(client)).status_code == 303
        yield client


@pytest.fixture
def chat(admin_app: Loopgate) -> ChatDriver:
    return ChatDriver(admin_app, ChatRef("web", "dm-alice", ChatType.DIRECT))


async def csrf(client: httpx.AsyncClient) -> str:
    return csrf_of((await client.get("/admin/runs")).text)


class TestPages:
    async def test_every_page_renders(
        self, browser: httpx.AsyncClient, chat: ChatDriver, llm: FakeLLM
    ) -> None:
        llm.script(tool_calls(call("list_files", {})), text("<b>done</b>"))
        await chat.ask("<script>alert(1)</script>")
        trace = (await browser.get("/admin/api/traces?last=1")).json()["traces"][0]
        pages = {
            "/admin/": "Live runs",
            "/admin/sessions": KEY,
            f"/admin/sessions/{KEY}": "&lt;script&gt;alert(1)&lt;/script&gt;",
            "/admin/traces": trace["id"],
            f"/admin/traces/{trace['id']}": "list_files",
            "/admin/channels": "Every message was answered",
            "/admin/agents": "main",
            "/admin/agents/main": "Edit the stored copy",
            "/admin/suggestions": "No suggestion",
        }
        for path, expected in pages.items():
            page = await browser.get(path)
            assert page.status_code == 200, (path, page.text)
            assert expected in page.text, path
            assert "<script>alert" not in page.text
        assert (await browser.get("/admin/traces/nope")).status_code == 404
        assert (await browser.get("/admin/sessions/nope")).status_code == 404
        missing = await browser.get("/admin/api/nope")
        assert missing.status_code == 404 and missing.json() == {"error": "no such endpoint"}
        assert (
            (await browser.get("/admin/static/admin.js"))
            .headers["content-type"]
            .startswith("text/javascript")
        )

    async def test_trace_tree_nests_spans(
        self, browser: httpx.AsyncClient, chat: ChatDriver, llm: FakeLLM
    ) -> None:
        llm.script(tool_calls(call("read_file", {"path": "missing.txt"})), text("no file"))
        await chat.ask("read it")
        trace = (await browser.get("/admin/api/traces?last=1")).json()["traces"][0]
        tree = (await browser.get(f"/admin/api/traces/{trace['id']}")).json()
        kinds = [(s["kind"], s["name"], s["error"]) for s in tree["spans"][0]["spans"]]
        assert ("tool", "read_file", True) in kinds and kinds[0][0] == "llm"
        page = (await browser.get(f"/admin/traces/{trace['id']}")).text
        assert "span-error" in page and "read_file" in page

    async def test_edit_an_agent_with_the_form(
        self, admin_app: Loopgate, browser: httpx.AsyncClient
    ) -> None:
        token = await csrf(browser)
        form = {
            "csrf_token": token,
            "provider": "openai",
            "model": "m2",
            "max_iterations": "7",
            "system_prompt": "",
        }
        saved = await browser.post("/admin/agents/helper", data=form)
        assert saved.status_code == 303 and saved.headers["location"].endswith("?ok=Saved.")
        stored = await SqlAgentStore(admin_app.db).get("helper")
        assert stored is not None
        assert (stored.agent.model, stored.agent.max_iterations) == ("m2", 7)
        assert stored.agent.system_prompt is None
        bad = await browser.post("/admin/agents/helper", data={**form, "max_iterations": "x"})
        assert bad.status_code == 400 and "a whole number" in bad.text
        opened = await browser.get("/admin/agents?open=helper")
        assert opened.headers["location"] == "/admin/agents/helper"
        deleted = await browser.post("/admin/agents/helper/delete", data={"csrf_token": token})
        assert deleted.status_code == 303
        assert await SqlAgentStore(admin_app.db).get("helper") is None


class TestSuggestions:
    async def test_approve_with_the_form_applies_it(
        self, admin_app: Loopgate, browser: httpx.AsyncClient
    ) -> None:
        suggestion = await seed_suggestion(admin_app)
        page = await browser.get("/admin/suggestions?status=pending")
        assert suggestion.summary in page.text and "max_iterations 20 → 22" in page.text
        approved = await browser.post(
            f"/admin/suggestions/{suggestion.id}/approve", data={"csrf_token": await csrf(browser)}
        )
        assert approved.status_code == 303
        assert "now+applied" in approved.headers["location"]
        stored = await SqlAgentStore(admin_app.db).get("main")
        assert stored is not None and stored.agent.max_iterations == 22
        decided = (await browser.get(f"/admin/api/suggestions/{suggestion.id}")).json()
        assert decided["status"] == "applied" and decided["decided_by"] == "admin (session)"
        assert decided["baseline"] is not None
