"""Memory: chunking, searching through the SQL index (SQLite FTS5; Postgres full-text when
LOOPGATE_TEST_POSTGRES_URL is set; the index itself is tested in
tests/bot/storage/test_memory_index.py), freshness, the memory_search / memory_get tools, and the
whole path over real HTTP: the model writes memory files with write_file, then memory_search
finds them, ranked.

Also the issue-5 leftovers that live next to memory: post-run compaction traces, compactions
cancelled at shutdown, and the BUDGET_EXCEEDED outcome delivered to the user.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agent_core import EventBus, MemoryStore, RunRequest, RunStatus
from agent_core.context_budget import BUDGET_EXCEEDED_REPLY
from agent_core.errors import ToolError
from agent_core.memory import (
    MemorySync,
    chunk_markdown,
    is_memory_path,
    memory_tools,
    query_terms,
    scan_memory_files,
    workspace_key,
)
from agent_core.tools.base import Tool, ToolContext
from agent_core.workspace import user_workspace
from bot.agents.router import AgentRouter
from bot.app import Loopgate
from bot.storage import Database
from bot.storage.memory_index import SqlMemoryIndex
from channels import ChatRef, ChatType
from tests.agent_core.test_compaction import RoleProvider, pairs
from tests.conftest import ChatDriver, make_config
from tests.fakes.llm_server import FakeLLM, call, text, tool_calls
from tests.waiting import wait_until

NOTES = """# Preferences
Alice drinks green tea, never coffee.

# Infrastructure
The billing service is deployed with Kubernetes on Tuesdays.
Deploys on Fridays are forbidden.
"""
DAY = """# Deployment log
We deployed the billing service to production; the billing database migration ran first.

# Lunch
Pizza on Friday.
"""


# -- pure functions ------------------------------------------------------------------------


def test_memory_paths() -> None:
    assert is_memory_path("MEMORY.md")
    assert is_memory_path("memory/2025-01-31.md") and is_memory_path("memory/a/b.md")
    assert not is_memory_path("memory/notes.txt")
    assert not is_memory_path("USER.md") and not is_memory_path("x/memory/a.md")
    assert not is_memory_path("memory.md")


def test_chunks_follow_headings_and_skip_code_fences() -> None:
    chunks = chunk_markdown("intro\n# A\none\n```\n# not a heading\n```\n## B\ntwo\n")
    assert [(c.heading, c.start_line, c.end_line) for c in chunks] == [
        ("", 1, 1),
        ("A", 2, 6),
        ("B", 7, 8),
    ]
    assert "# not a heading" in chunks[1].content


def test_long_sections_are_split() -> None:
    body = "# Big\n" + "\n".join(f"line {i}" for i in range(100))
    chunks = chunk_markdown(body, max_lines=40)
    assert [c.start_line for c in chunks] == [1, 41, 81]
    assert all(c.heading == "Big" for c in chunks)
    assert chunks[-1].end_line == 101


def test_query_terms_drop_operators() -> None:
    assert query_terms('Billing "deploy" OR (NEAR*) -x: billing') == [
        "billing",
        "deploy",
        "or",
        "near",
        "x",
    ]
    assert query_terms("?!* ()") == []


# -- searching and syncing through the SQL index, on each backend ----------------------


def _write(ws: Path, relative: str, content: str) -> None:
    path = ws / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")


async def test_index_ranks_by_relevance(db: Database, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _write(ws, "MEMORY.md", NOTES)
    _write(ws, "memory/2025-01-31.md", DAY)
    sync = MemorySync(SqlMemoryIndex(db))
    hits = await sync.search(ws, "billing deployment", 10)
    # "billing" twice + "deployed" (stemmed) beats "billing" once + "deployed" beats nothing.
    assert [(h.path, h.heading) for h in hits] == [
        ("memory/2025-01-31.md", "Deployment log"),
        ("MEMORY.md", "Infrastructure"),
    ]
    assert hits[0].score > hits[1].score
    assert (hits[1].start_line, hits[1].end_line) == (4, 6)
    tea = await sync.search(ws, "tea", 10)
    assert [h.heading for h in tea] == ["Preferences"]
    assert await sync.search(ws, "kubernetes", 1) != []
    assert await sync.search(ws, "submarine", 10) == []


async def test_sync_reindexes_only_changed_files(db: Database, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _write(ws, "MEMORY.md", NOTES)
    _write(ws, "memory/a.md", "# A\nwalrus\n")
    _write(ws, "notes.md", "# Not memory\nwalrus\n")  # outside MEMORY.md / memory/: ignored
    sync = MemorySync(SqlMemoryIndex(db))
    assert await sync.refresh(ws) == 2
    assert await sync.refresh(ws) == 0  # nothing changed
    _write(ws, "memory/a.md", "# A\nnarwhal, no longer the other animal\n")
    assert await sync.refresh(ws) == 1
    assert [h.path for h in await sync.search(ws, "walrus", 5)] == []
    assert [h.path for h in await sync.search(ws, "narwhal", 5)] == ["memory/a.md"]
    (ws / "memory" / "a.md").unlink()
    assert await sync.search(ws, "narwhal", 5) == []  # the search itself noticed the deletion
    assert set(await SqlMemoryIndex(db).stamps(workspace_key(ws))) == {"MEMORY.md"}


async def test_refreshes_of_one_workspace_take_turns_and_leave_no_lock(
    db: Database, tmp_path: Path
) -> None:
    """Two refreshes of one workspace never index at once, and no per-workspace lock outlives
    them (one per user who ever searched would pile up for the life of the process)."""
    index = SqlMemoryIndex(db)
    sync = MemorySync(index)
    inside: dict[str, int] = {}
    most: dict[str, int] = {}
    reindex = index.reindex

    async def watched(key: str, *args: Any) -> None:
        inside[key] = inside.get(key, 0) + 1
        most[key] = max(most.get(key, 0), inside[key])
        await asyncio.sleep(0.05)
        await reindex(key, *args)
        inside[key] -= 1

    index.reindex = watched  # type: ignore[method-assign]
    workspaces = [tmp_path / "a", tmp_path / "b"]
    for ws in workspaces:
        _write(ws, "MEMORY.md", NOTES)
    counts = await asyncio.gather(*(sync.refresh(ws) for ws in [*workspaces, workspaces[0]]))
    assert sorted(counts) == [0, 1, 1]  # the second refresh of "a" found it done
    assert list(most.values()) == [1, 1]  # each workspace indexed by one refresh at a time
    assert sync._locks == {}


def test_scan_skips_symlinks_out_of_the_workspace(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _write(ws, "memory/ok.md", "x")
    _write(tmp_path, "outside.md", "secret")
    (ws / "memory" / "leak.md").symlink_to(tmp_path / "outside.md")
    assert set(scan_memory_files(ws)) == {"memory/ok.md"}


# -- the tools -----------------------------------------------------------------------------


def _ctx(ws: Path) -> ToolContext:
    return ToolContext(workspace=ws, session_key="s", user_id="u", agent_id="main", run_id="r")


def _tools(db: Database) -> dict[str, Tool]:
    return {t.name: t for t in memory_tools(SqlMemoryIndex(db))}


async def test_write_file_to_memory_reindexes_at_once(db: Database, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    tools = _tools(db)
    index = SqlMemoryIndex(db)
    args = {"path": "memory/2025-02-01.md", "content": "# Trip\nflight to Oslo"}
    await tools["write_file"].handler(args, _ctx(ws))
    assert [h.heading for h in await index.search(workspace_key(ws), "oslo", 5)] == ["Trip"]
    await tools["write_file"].handler({"path": "other.md", "content": "Oslo"}, _ctx(ws))
    assert set(await index.stamps(workspace_key(ws))) == {"memory/2025-02-01.md"}


async def test_memory_search_tool_output(db: Database, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _write(ws, "MEMORY.md", NOTES)
    _write(ws, "memory/2025-01-31.md", DAY)
    search = _tools(db)["memory_search"]
    out = await search.handler({"query": "billing deployment", "limit": 1}, _ctx(ws))
    assert out.startswith("1 memory match(es)")
    assert "memory/2025-01-31.md:1-2 (Deployment log)" in out and "MEMORY.md" not in out
    assert "No memory matches" in await search.handler({"query": "zeppelin"}, _ctx(ws))
    with pytest.raises(ToolError):
        await search.handler({"query": "  "}, _ctx(ws))


async def test_memory_get_file_section_and_lines(db: Database, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _write(ws, "MEMORY.md", NOTES)
    get = _tools(db)["memory_get"]
    whole = await get.handler({"path": "MEMORY.md"}, _ctx(ws))
    assert whole.startswith("MEMORY.md:1-6\n") and "Fridays" in whole
    section = await get.handler({"path": "MEMORY.md", "section": "infra"}, _ctx(ws))
    assert section.startswith("MEMORY.md:4-6\n# Infrastructure") and "tea" not in section
    lines = await get.handler({"path": "MEMORY.md", "from_line": 2, "lines": 1}, _ctx(ws))
    assert lines == "MEMORY.md:2-2\nAlice drinks green tea, never coffee."
    with pytest.raises(ToolError, match="no section"):
        await get.handler({"path": "MEMORY.md", "section": "nope"}, _ctx(ws))


@pytest.mark.parametrize(
    "path", ["../MEMORY.md", "/etc/passwd", "memory/../../x.md", "USER.md", "memory/\x00.md"]
)
async def test_memory_get_stays_in_memory_files(db: Database, tmp_path: Path, path: str) -> None:
    ws = tmp_path / "ws"
    _write(ws, "USER.md", "private")
    _write(tmp_path, "MEMORY.md", "outside")
    with pytest.raises(ToolError):
        await _tools(db)["memory_get"].handler({"path": path}, _ctx(ws))


# -- end to end over real HTTP -------------------------------------------------------------


def _tool_results(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


async def test_model_writes_memories_then_finds_them_ranked(
    tmp_path: Path, llm: FakeLLM, app: Loopgate, dm: ChatDriver
) -> None:
    llm.script(
        tool_calls(
            call("write_file", {"path": "MEMORY.md", "content": NOTES}),
            call("write_file", {"path": "memory/2025-01-31.md", "content": DAY}),
        ),
        text("Noted."),
        tool_calls(call("memory_search", {"query": "billing deployment"})),
        text("You deployed billing on the 31st."),
    )
    await dm.ask("remember this")
    result = await dm.ask("when did we deploy billing?")
    assert result is not None and result.status is RunStatus.COMPLETED
    assert dm.texts() == ["Noted.", "You deployed billing on the 31st."]

    requests = llm.chat_requests
    offered = {t["function"]["name"] for t in requests[0].json["tools"]}
    assert {"memory_search", "memory_get", "write_file"} <= offered
    [found] = _tool_results(requests[-1].json)[-1:]
    first = found.index("memory/2025-01-31.md:1-2 (Deployment log)")
    second = found.index("MEMORY.md:4-6 (Infrastructure)")
    assert first < second and "Preferences" not in found


async def test_budget_exceeded_notice_reaches_the_user(tmp_path: Path, llm: FakeLLM) -> None:
    config = make_config(
        tmp_path, llm, agents={"defaults": {
            "workspace": str(tmp_path / "ws"),
            "context_window": 3_000,
            "context_pruning": {"mode": "off"},
            "compaction": {"enabled": False},
        }},
    )  # fmt: skip
    ws = user_workspace(tmp_path / "ws", "web:dave")
    _write(ws, "big.txt", "lorem ipsum " * 5_000)
    llm.script(tool_calls(call("read_file", {"path": "big.txt"}), usage=(0, 0)))
    async with Loopgate(config) as app:
        dm = ChatDriver(app, ChatRef("web", "dm-dave", ChatType.DIRECT))
        result = await dm.ask("read big.txt", sender="dave")
        assert result is not None and result.status is RunStatus.BUDGET_EXCEEDED
        assert dm.texts() == [BUDGET_EXCEEDED_REPLY]
        assert len(llm.chat_requests) == 1  # the over-budget request was never sent


# -- post-run compaction: its own trace, cancelled at shutdown ------------------------------


def _router(tmp_path: Path, provider: RoleProvider, store: MemoryStore) -> AgentRouter:
    return AgentRouter(
        make_config(tmp_path, None),
        store=store,
        traces=store,
        events=EventBus(),
        providers={"openai": provider},
    )


async def test_post_run_compaction_is_traced(tmp_path: Path) -> None:
    store = MemoryStore()
    store.sessions["s1"] = pairs(25)
    router = _router(tmp_path, RoleProvider(), store)
    loop = router.get("main")
    await loop.run(RunRequest(session_key="s1", message="more", user_id="u1", run_id="r1"))
    await loop.context.compactor.wait_idle()
    run_trace, compaction = store.traces
    assert run_trace.run_id == "r1" and compaction.run_id == "r1:compaction"
    assert compaction.status == "completed" and compaction.session_key == "s1"
    assert [s.name for s in compaction.spans[1:]] == ["post_run_compaction", "memory_flush"]
    assert compaction.spans[1].attributes["compacted"] is True
    assert compaction.input_tokens > 0  # the flush's usage
    await router.aclose()


async def test_shutdown_cancels_background_compactions(tmp_path: Path) -> None:
    store = MemoryStore()
    store.sessions["s1"] = pairs(25)
    provider = RoleProvider(delay=3600)  # the summary would never come back
    router = _router(tmp_path, provider, store)
    loop = router.get("main")
    await loop.run(RunRequest(session_key="s1", message="more", user_id="u1"))
    assert loop.context.compactor.pending

    await wait_until(lambda: provider.of("summary"), 30)  # the compaction is under way
    router.invalidate("main")  # a replaced loop's compaction is cancelled too
    await asyncio.wait_for(router.aclose(), 30)
    assert not loop.context.compactor.pending
    assert "s1" not in store.summaries
    assert store.traces[-1].status == "cancelled"
    assert json.dumps(store.traces[-1].spans[1].attributes)  # serializable for the SQL store
