"""Workspace quotas and confinement (issue 18, point 4): per-write and per-workspace byte
limits, bounded reads of huge files, and symlinks planted in a workspace that point out of it."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

import agent_core.tools.files as files_module
from agent_core import EventBus, MemoryStore, RunRequest
from agent_core.errors import ToolError
from agent_core.memory import MemoryDocument, MemoryHit, memory_tools
from agent_core.memory_flush import run_memory_flush
from agent_core.messages import Message
from agent_core.settings import AgentSettings
from agent_core.testing import ScriptedProvider, call, reply, tool_calls
from agent_core.tools.base import Tool, ToolContext
from agent_core.tools.files import LIST_FILES, MAX_READ_CHARS, READ_FILE, WRITE_FILE
from agent_core.workspace import resolve_inside, user_workspace, workspace_size
from bot.agents.router import AgentRouter
from bot.config import ConfigFileError, parse_config

SECRET = "s3cr3t-outside"


def ctx(ws: Path, **limits: int) -> ToolContext:
    return ToolContext(ws, "s", "u", "main", "r", **limits)


async def run(tool: Tool, ws: Path, **args: Any) -> str:
    return await tool.handler(args, ctx(ws))


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the workspace holding a secret file."""
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_text(SECRET)
    return out


# -- symlinks ------------------------------------------------------------------------------


class TestPlantedSymlinks:
    @pytest.mark.parametrize("relative", [False, True], ids=["absolute", "relative"])
    async def test_file_link_out_is_denied_for_read_write_and_list(
        self, ws: Path, outside: Path, relative: bool
    ) -> None:
        target = Path("../outside/secret.txt") if relative else outside / "secret.txt"
        (ws / "link.txt").symlink_to(target)
        for tool, args in [
            (READ_FILE, {"path": "link.txt"}),
            (WRITE_FILE, {"path": "link.txt", "content": "overwritten"}),
            (LIST_FILES, {"path": "link.txt"}),
        ]:
            with pytest.raises(ToolError, match="access denied"):
                await tool.handler(args, ctx(ws))
        assert (outside / "secret.txt").read_text() == SECRET

    @pytest.mark.parametrize("relative", [False, True], ids=["absolute", "relative"])
    async def test_directory_link_out_is_denied(
        self, ws: Path, outside: Path, relative: bool
    ) -> None:
        (ws / "sub").mkdir()
        (ws / "sub" / "door").symlink_to(Path("../../outside") if relative else outside)
        for tool, args in [
            (LIST_FILES, {"path": "sub/door"}),
            (READ_FILE, {"path": "sub/door/secret.txt"}),
            (WRITE_FILE, {"path": "sub/door/new.txt", "content": "x"}),
            (WRITE_FILE, {"path": "sub/door/deep/er/new.txt", "content": "x"}),
        ]:
            with pytest.raises(ToolError, match="access denied"):
                await tool.handler(args, ctx(ws))
        assert names(outside) == ["secret.txt"]

    async def test_listing_the_parent_of_a_link_does_not_list_what_it_points_to(
        self, ws: Path, outside: Path
    ) -> None:
        (ws / "door").symlink_to(outside)
        listing = await run(LIST_FILES, ws)
        assert "secret.txt" not in listing

    async def test_dangling_links_to_new_outside_paths_are_not_written_through(
        self, ws: Path, outside: Path
    ) -> None:
        (ws / "new.txt").symlink_to(outside / "created.txt")
        (ws / "newdir").symlink_to(outside / "created_dir")
        for path in ["new.txt", "newdir/file.txt"]:
            with pytest.raises(ToolError, match="access denied"):
                await run(WRITE_FILE, ws, path=path, content="escaped")
        assert not (outside / "created.txt").exists()
        assert not (outside / "created_dir").exists()

    async def test_memory_get_refuses_links_out(self, ws: Path, outside: Path) -> None:
        (outside / "notes.md").write_text(f"# Secret\n{SECRET}\n")
        (ws / "MEMORY.md").symlink_to(outside / "notes.md")
        (ws / "memory").symlink_to(outside)
        get = _memory_get()
        for path in ["MEMORY.md", "memory/notes.md"]:
            with pytest.raises(ToolError, match="access denied"):
                await get.handler({"path": path}, ctx(ws))

    async def test_links_that_stay_inside_keep_working(self, ws: Path) -> None:
        (ws / "real").mkdir()
        (ws / "real" / "a.txt").write_text("inside")
        (ws / "alias").symlink_to("real")
        (ws / "a-link.txt").symlink_to(ws / "real" / "a.txt")
        assert await run(READ_FILE, ws, path="alias/a.txt") == "inside"
        assert await run(READ_FILE, ws, path="a-link.txt") == "inside"
        await run(WRITE_FILE, ws, path="alias/b.txt", content="via alias")
        assert (ws / "real" / "b.txt").read_text() == "via alias"
        assert "real/a.txt" in await run(LIST_FILES, ws, path="alias")


def _plant_after_check(monkeypatch: pytest.MonkeyPatch, plant: Callable[[Path], None]) -> None:
    """Let the path check pass, then plant a link: the race a tool must survive."""

    def checked_then_raced(workspace: Path, relative: str) -> Path:
        resolved = resolve_inside(workspace, relative)
        plant(resolved)
        return resolved

    monkeypatch.setattr(files_module, "resolve_inside", checked_then_raced)


class TestLinkPlantedAfterTheCheck:
    async def test_write_does_not_follow_a_link_at_the_target(
        self, ws: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        _plant_after_check(monkeypatch, lambda p: p.symlink_to(outside / "secret.txt"))
        with pytest.raises(ToolError):
            await run(WRITE_FILE, ws, path="x.txt", content="overwritten")
        assert (outside / "secret.txt").read_text() == SECRET

    async def test_write_does_not_follow_a_link_at_a_parent(
        self, ws: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        _plant_after_check(monkeypatch, lambda p: p.parent.symlink_to(outside))
        with pytest.raises(ToolError, match="access denied"):
            await run(WRITE_FILE, ws, path="sub/x.txt", content="escaped")
        assert names(outside) == ["secret.txt"]

    async def test_read_does_not_follow_a_link_at_the_target(
        self, ws: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        (ws / "x.txt").write_text("harmless")

        def swap(p: Path) -> None:
            p.unlink()
            p.symlink_to(outside / "secret.txt")

        _plant_after_check(monkeypatch, swap)
        with pytest.raises(ToolError, match="access denied"):
            await run(READ_FILE, ws, path="x.txt")


# -- quotas --------------------------------------------------------------------------------


class TestFileLimit:
    async def test_content_over_the_limit_in_utf8_bytes_is_refused(self, ws: Path) -> None:
        content = "é" * 600  # 600 characters, 1200 bytes
        with pytest.raises(ToolError) as info:
            await WRITE_FILE.handler(
                {"path": "a.txt", "content": content}, ctx(ws, max_file_bytes=1000)
            )
        message = str(info.value)
        assert "1200 bytes" in message and "1000 bytes" in message and "split" in message
        assert not (ws / "a.txt").exists()
        ok = {"path": "a.txt", "content": "é" * 500}
        await WRITE_FILE.handler(ok, ctx(ws, max_file_bytes=1000))
        assert (ws / "a.txt").read_bytes() == ("é" * 500).encode()


class TestWorkspaceQuota:
    async def test_a_write_past_the_quota_is_refused(self, ws: Path) -> None:
        (ws / "deep" / "er").mkdir(parents=True)
        (ws / "deep" / "er" / "old.bin").write_bytes(b"x" * 600)
        limits = ctx(ws, workspace_max_bytes=1000)
        with pytest.raises(ToolError, match="quota") as info:
            await WRITE_FILE.handler({"path": "new.txt", "content": "y" * 500}, limits)
        assert "1000 bytes" in str(info.value) and "1100" in str(info.value)
        assert not (ws / "new.txt").exists()
        await WRITE_FILE.handler({"path": "new.txt", "content": "y" * 400}, limits)  # 1000: fits
        assert workspace_size(ws) == 1000

    async def test_overwriting_a_file_frees_its_bytes(self, ws: Path) -> None:
        (ws / "a.txt").write_bytes(b"x" * 900)
        limits = ctx(ws, workspace_max_bytes=1000)
        await WRITE_FILE.handler({"path": "a.txt", "content": "y" * 1000}, limits)
        assert (ws / "a.txt").read_text() == "y" * 1000
        with pytest.raises(ToolError, match="quota"):
            await WRITE_FILE.handler({"path": "b.txt", "content": "z"}, limits)
        await WRITE_FILE.handler({"path": "a.txt", "content": "short"}, limits)
        await WRITE_FILE.handler({"path": "b.txt", "content": "z"}, limits)

    def test_size_does_not_follow_links(self, ws: Path, outside: Path) -> None:
        (outside / "big.bin").write_bytes(b"x" * 50_000)
        (ws / "own.txt").write_bytes(b"x" * 10)
        (ws / "big-link").symlink_to(outside / "big.bin")
        (ws / "dir-link").symlink_to(outside)
        assert workspace_size(ws) == 10
        assert workspace_size(ws / "not-created-yet") == 0


class TestBoundedReads:
    async def test_a_huge_file_is_read_in_part_with_its_real_size(self, ws: Path) -> None:
        size = 20_000_000
        with (ws / "huge.log").open("wb") as f:
            f.truncate(size)  # sparse: cheap to create, reads as NUL characters
        tracemalloc.start()
        try:
            out = await run(READ_FILE, ws, path="huge.log")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 5_000_000  # not the 20 MB the whole file would take
        body, notice = out.rsplit("\n", 1)
        assert len(body) == MAX_READ_CHARS
        assert "truncated" in notice and f"{size} bytes" in notice

    async def test_memory_get_reads_a_bounded_part(self, ws: Path) -> None:
        line = "remember this line, it is forty chars.\n"
        (ws / "memory").mkdir()
        with (ws / "memory" / "big.md").open("w") as f:
            f.write("# Top\n")
            for _ in range(30_000_000 // len(line)):
                f.write(line)
        size = (ws / "memory" / "big.md").stat().st_size
        tracemalloc.start()
        try:
            out = await _memory_get().handler({"path": "memory/big.md", "lines": 3}, ctx(ws))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 15_000_000  # not the 30 MB of the file
        assert out.startswith("memory/big.md:1-3\n# Top\nremember")
        assert f"{size} bytes" in out


# -- config → tool -------------------------------------------------------------------------


def test_config_keys_defaults_and_units() -> None:
    defaults = parse_config({}, {}).agents.defaults
    assert defaults.max_file_bytes == 1_048_576
    assert defaults.workspace_max_bytes == 104_857_600
    config = parse_config(
        {
            "agents": {
                "defaults": {"max_file_bytes": "512KiB", "workspace_max_bytes": "100MB"},
                "list": [{"id": "big", "max_file_bytes": 5_000_000}],
            }
        },
        {},
    )
    assert config.agents.defaults.max_file_bytes == 512 * 1024
    assert config.agents.defaults.workspace_max_bytes == 100_000_000
    assert config.agents.list[0].max_file_bytes == 5_000_000


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"defaults": {"max_file_bytes": 0}}, "agents.defaults.max_file_bytes"),
        ({"defaults": {"workspace_max_bytes": -1}}, "agents.defaults.workspace_max_bytes"),
        ({"defaults": {"workspace_max_bytes": "lots"}}, "agents.defaults.workspace_max_bytes"),
        ({"list": [{"id": "a", "max_file_bytes": 0}]}, "agents.list.0.max_file_bytes"),
    ],
)
def test_bad_limits_are_rejected_with_their_key(data: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigFileError, match=key.replace(".", r"\.")):
        parse_config({"agents": data}, {})


def _router(
    tmp_path: Path, agents: dict[str, Any], provider: ScriptedProvider, store: MemoryStore
) -> AgentRouter:
    agents = {**agents, "defaults": {"workspace": str(tmp_path), **agents.get("defaults", {})}}
    return AgentRouter(
        parse_config({"agents": agents}, {}),
        store=store,
        traces=store,
        events=EventBus(),
        providers={"openai": provider},
    )


async def test_configured_limit_reaches_write_file_as_a_tool_error(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        tool_calls(call("write_file", {"path": "big.txt", "content": "x" * 2000})),
        reply("could not write it"),
    )
    store = MemoryStore()
    router = _router(tmp_path, {"defaults": {"max_file_bytes": "1KiB"}}, provider, store)
    result = await router.get("main").run(
        RunRequest(session_key="s1", message="write", user_id="u1")
    )
    assert result.content == "could not write it"  # the run goes on: no crash
    tool_msg = next(m for m in store.sessions["s1"] if m.role == "tool")
    assert tool_msg.content.startswith("Error:") and "1024 bytes" in tool_msg.content
    assert not (user_workspace(tmp_path, "u1") / "big.txt").exists()


def test_per_agent_limits_override_the_defaults(tmp_path: Path) -> None:
    agents = {
        "defaults": {"workspace_max_bytes": "10MiB"},
        "list": [{"id": "main", "workspace_max_bytes": 2000, "max_file_bytes": "1KB"}],
    }
    settings = _router(tmp_path, agents, ScriptedProvider(), MemoryStore()).settings("main")
    assert (settings.max_file_bytes, settings.workspace_max_bytes) == (1000, 2000)


async def test_memory_flush_writes_obey_the_quotas(tmp_path: Path) -> None:
    """The flush turn is the model writing into the user's workspace: same limits."""
    ws = tmp_path / "ws"
    provider = ScriptedProvider(
        tool_calls(call("write_file", {"path": "memory/2025-01-01.md", "content": "x" * 500})),
        reply("NO_REPLY"),
    )
    settings = AgentSettings(id="main", model="m", workspace=tmp_path, max_file_bytes=100)
    await run_memory_flush(
        provider=provider,
        settings=settings,
        request=RunRequest(session_key="s", message="hi", user_id="u"),
        workspace=ws,
        messages=[Message.user("hi"), Message.assistant("hello")],
    )
    assert not (ws / "memory" / "2025-01-01.md").exists()
    tool_result = provider.requests[-1].messages[-1]
    assert tool_result.role == "tool" and "500 bytes" in tool_result.content


# -- helpers -------------------------------------------------------------------------------


class _NoIndex:
    async def search(self, workspace_key: str, query: str, limit: int) -> list[MemoryHit]:
        return []

    async def stamps(self, workspace_key: str) -> dict[str, Any]:
        return {}

    async def reindex(
        self, workspace_key: str, files: Sequence[MemoryDocument], removed: Sequence[str] = ()
    ) -> None:
        return None


def _memory_get() -> Tool:
    return next(t for t in memory_tools(_NoIndex()) if t.name == "memory_get")
