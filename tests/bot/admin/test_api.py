"""The dashboard's JSON API (``/admin/api/``, ``bot/admin/api.py``) with the Bearer token."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from agent_core import RunStatus
from bot.app import Loopgate
from channels import ChatRef, ChatType
from tests.admin_support import BEARER, admin_config, client_of, seed_suggestion
from tests.conftest import ChatDriver
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


class TestSuggestions:
    async def test_api_reject_and_conflicts(
        self, admin_app: Loopgate, client: httpx.AsyncClient
    ) -> None:
        suggestion = await seed_suggestion(admin_app)
        url = f"/admin/api/suggestions/{suggestion.id}"
        rejected = await client.post(f"{url}/reject", headers=BEARER, json={"reason": "not now"})
        assert rejected.status_code == 200
        assert (rejected.json()["status"], rejected.json()["reason"]) == ("rejected", "not now")
        again = await client.post(f"{url}/approve", headers=BEARER)
        assert again.status_code == 409
        missing = await client.post("/admin/api/suggestions/nope/approve", headers=BEARER)
        assert missing.status_code == 404
        listed = await client.get("/admin/api/suggestions?status=rejected", headers=BEARER)
        assert [s["id"] for s in listed.json()["suggestions"]] == [suggestion.id]
        assert (
            await client.get("/admin/api/suggestions?status=odd", headers=BEARER)
        ).status_code == 400
        metrics = await client.get("/admin/api/metrics", headers=BEARER)
        assert metrics.status_code == 200 and "metrics" in metrics.json()

    async def test_filtered_by_agent_and_the_reason_is_cut(
        self, admin_app: Loopgate, client: httpx.AsyncClient
    ) -> None:
        mine = await seed_suggestion(admin_app, agent_id="main")
        await seed_suggestion(admin_app, agent_id="other")
        listed = await client.get("/admin/api/suggestions?agent=main", headers=BEARER)
        assert [s["id"] for s in listed.json()["suggestions"]] == [mine.id]
        every = await client.get("/admin/api/suggestions?status=all", headers=BEARER)
        assert len(every.json()["suggestions"]) == 2
        rejected = await client.post(
            f"/admin/api/suggestions/{mine.id}/reject", headers=BEARER, json={"reason": "x" * 5000}
        )
        assert rejected.json()["reason"] == "x" * 1000

    async def test_unknown_suggestion(self, client: httpx.AsyncClient) -> None:
        found = await client.get("/admin/api/suggestions/nope", headers=BEARER)
        assert found.status_code == 404 and found.json() == {"error": "no such suggestion"}
        rejected = await client.post("/admin/api/suggestions/nope/reject", headers=BEARER)
        assert rejected.status_code == 404


class TestReads:
    async def test_limits_of_sessions_and_messages(
        self, admin_app: Loopgate, client: httpx.AsyncClient, chat: ChatDriver
    ) -> None:
        other = ChatDriver(admin_app, ChatRef("web", "dm-bob", ChatType.DIRECT))
        await chat.ask("first")
        await other.ask("second")
        newest = await client.get("/admin/api/sessions?limit=1", headers=BEARER)
        assert [s["chat_id"] for s in newest.json()["sessions"]] == ["dm-bob"]
        odd = await client.get("/admin/api/sessions?limit=many", headers=BEARER)
        assert len(odd.json()["sessions"]) == 2  # a bad number is the default, not an error
        key = "agent:main:web:direct:dm-alice"
        last = await client.get(f"/admin/api/sessions/{key}/messages?limit=1", headers=BEARER)
        assert [m["content"] for m in last.json()["messages"]] == ["echo: first"]

    async def test_traces_of_one_session(
        self, admin_app: Loopgate, client: httpx.AsyncClient, chat: ChatDriver
    ) -> None:
        other = ChatDriver(admin_app, ChatRef("web", "dm-bob", ChatType.DIRECT))
        await chat.ask("first")
        await other.ask("second")
        key = "agent:main:web:direct:dm-bob"
        found = await client.get(f"/admin/api/traces?session={key}", headers=BEARER)
        assert [t["session_key"] for t in found.json()["traces"]] == [key]
        every = await client.get("/admin/api/traces?session=", headers=BEARER)
        assert len(every.json()["traces"]) == 2

    async def test_unknown_things_are_404(self, client: httpx.AsyncClient) -> None:
        for path, error in (
            ("sessions/agent:main:web:direct:nobody/messages", "no session"),
            ("traces/nope", "no such trace"),
            ("agents/nobody", "no agent nobody"),
        ):
            response = await client.get(f"/admin/api/{path}", headers=BEARER)
            assert response.status_code == 404, path
            assert error in response.json()["error"], path
        gone = await client.delete("/admin/api/agents/main", headers=BEARER)  # only configured
        assert gone.status_code == 404 and "no stored agent" in gone.json()["error"]

    async def test_put_needs_a_json_object(self, client: httpx.AsyncClient) -> None:
        for body in (b"not json", b"[1, 2]", b"\xff\xfe"):
            response = await client.put("/admin/api/agents/helper", headers=BEARER, content=body)
            assert response.status_code == 400, body
            assert response.json() == {"error": "expected a JSON object"}
        unknown = await client.put("/admin/api/agents/helper", headers=BEARER, json={"soul": 1})
        assert unknown.status_code == 400 and "not editable" in unknown.json()["fields"]["soul"]
