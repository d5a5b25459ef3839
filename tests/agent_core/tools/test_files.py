"""read_file, write_file and list_files: confined to the workspace, within their limits."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from agent_core.errors import ToolError
from agent_core.tools.files import FILE_TOOLS, LIST_FILES, MAX_LIST_ENTRIES, READ_FILE, WRITE_FILE
from tests.agent_core.test_workspace_quota import ctx, run


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace


class TestReadWrite:
    async def test_write_then_read_creates_parent_folders(self, ws: Path) -> None:
        out = await run(WRITE_FILE, ws, path="notes/today.md", content="héllo")
        assert out == "wrote 5 characters to notes/today.md"
        assert (ws / "notes" / "today.md").read_text(encoding="utf-8") == "héllo"
        assert await run(READ_FILE, ws, path="notes/today.md") == "héllo"

    async def test_overwrite_replaces_the_content(self, ws: Path) -> None:
        await run(WRITE_FILE, ws, path="a.txt", content="first version")
        await run(WRITE_FILE, ws, path="a.txt", content="second")
        assert await run(READ_FILE, ws, path="a.txt") == "second"

    async def test_lone_surrogate_is_replaced_not_a_crash(self, ws: Path) -> None:
        await run(WRITE_FILE, ws, path="s.txt", content="a\ud800b")
        text = (ws / "s.txt").read_text(encoding="utf-8")  # valid UTF-8
        assert text == "a\ufffdb"  # the replacement character, not a "?" that looks typed

    async def test_missing_file(self, ws: Path) -> None:
        with pytest.raises(ToolError, match=r"no such file: nope\.txt"):
            await run(READ_FILE, ws, path="nope.txt")

    async def test_reading_a_directory_is_no_such_file(self, ws: Path) -> None:
        (ws / "dir").mkdir()
        with pytest.raises(ToolError, match="no such file"):
            await run(READ_FILE, ws, path="dir")

    @pytest.mark.parametrize("args", [{}, {"path": ""}, {"path": 3}])
    async def test_path_is_required(self, ws: Path, args: dict[str, object]) -> None:
        for tool in (READ_FILE, WRITE_FILE):
            with pytest.raises(ToolError, match="'path'") as info:
                await tool.handler({**args, "content": "x"}, ctx(ws))
            assert info.value.tool_name == tool.name

    @pytest.mark.parametrize("content", [None, 5, ["x"]])
    async def test_content_must_be_a_string(self, ws: Path, content: object) -> None:
        with pytest.raises(ToolError, match="'content'"):
            await WRITE_FILE.handler({"path": "a.txt", "content": content}, ctx(ws))
        assert not (ws / "a.txt").exists()

    @pytest.mark.parametrize("path", [".", "./", "sub/.."])
    async def test_the_workspace_itself_is_not_a_file(self, ws: Path, path: str) -> None:
        with pytest.raises(ToolError, match="must name a file"):
            await run(WRITE_FILE, ws, path=path, content="x")

    async def test_a_directory_is_not_overwritten(self, ws: Path) -> None:
        (ws / "dir").mkdir()
        with pytest.raises(ToolError, match="is a directory"):
            await run(WRITE_FILE, ws, path="dir", content="x")
        assert (ws / "dir").is_dir()

    async def test_file_limit_allows_exactly_the_limit(self, ws: Path) -> None:
        limits = ctx(ws, max_file_bytes=10)
        await WRITE_FILE.handler({"path": "a.txt", "content": "x" * 10}, limits)
        with pytest.raises(ToolError, match="11 bytes"):
            await WRITE_FILE.handler({"path": "b.txt", "content": "x" * 11}, limits)
        assert not (ws / "b.txt").exists()


class TestEscape:
    @pytest.mark.parametrize("path", ["../outside.txt", "a/../../outside.txt", "../ws2/x.txt"])
    async def test_relative_escape_is_refused(self, ws: Path, path: str) -> None:
        with pytest.raises(ToolError, match="access denied"):
            await run(WRITE_FILE, ws, path=path, content="x")
        with pytest.raises(ToolError, match="access denied"):
            await run(READ_FILE, ws, path=path)
        assert sorted(p.name for p in ws.parent.iterdir()) == ["ws"]

    async def test_absolute_path_outside_is_refused(self, ws: Path, tmp_path: Path) -> None:
        secret = tmp_path / "secret.txt"
        secret.write_text("top secret")
        for tool, args in [
            (READ_FILE, {"path": str(secret)}),
            (WRITE_FILE, {"path": str(secret), "content": "pwned"}),
            (LIST_FILES, {"path": str(tmp_path)}),
        ]:
            with pytest.raises(ToolError, match="access denied"):
                await tool.handler(args, ctx(ws))
        assert secret.read_text() == "top secret"

    async def test_absolute_path_inside_the_workspace_is_allowed(self, ws: Path) -> None:
        await run(WRITE_FILE, ws, path=str(ws / "abs.txt"), content="ok")
        assert await run(READ_FILE, ws, path="abs.txt") == "ok"

    async def test_symlink_out_of_the_workspace_is_refused(self, ws: Path, tmp_path: Path) -> None:
        (tmp_path / "secret.txt").write_text("top secret")
        (ws / "link.txt").symlink_to(tmp_path / "secret.txt")
        with pytest.raises(ToolError, match="access denied"):
            await run(READ_FILE, ws, path="link.txt")

    async def test_extra_root_is_reachable_by_absolute_path(self, ws: Path, tmp_path: Path) -> None:
        team = tmp_path / "team"
        team.mkdir()
        context = dataclasses.replace(ctx(ws), extra_roots=(team,))
        await WRITE_FILE.handler({"path": str(team / "plan.md"), "content": "plan"}, context)
        assert (team / "plan.md").read_text() == "plan"
        assert await READ_FILE.handler({"path": str(team / "plan.md")}, context) == "plan"
        listing = await LIST_FILES.handler({"path": str(team)}, context)
        assert listing == (team / "plan.md").resolve().as_posix()
        # A relative path still means the run's own workspace.
        with pytest.raises(ToolError, match="no such file"):
            await READ_FILE.handler({"path": "plan.md"}, context)


class TestList:
    async def test_lists_sorted_relative_with_folders_marked(self, ws: Path) -> None:
        (ws / "b.txt").write_text("b")
        (ws / "a").mkdir()
        (ws / "a" / "inner.md").write_text("i")
        assert await run(LIST_FILES, ws) == "a/\nb.txt"
        assert await run(LIST_FILES, ws, path="a") == "a/inner.md"

    async def test_empty_or_missing_workspace(self, tmp_path: Path, ws: Path) -> None:
        assert await run(LIST_FILES, ws) == "(empty)"
        assert await run(LIST_FILES, tmp_path / "not-created") == "(empty)"

    async def test_missing_folder_and_file(self, ws: Path) -> None:
        (ws / "f.txt").write_text("x")
        assert await run(LIST_FILES, ws, path="nope") == "no such directory: nope"
        with pytest.raises(ToolError, match=r"not a directory: f\.txt"):
            await run(LIST_FILES, ws, path="f.txt")

    async def test_listing_is_capped(self, ws: Path) -> None:
        for i in range(MAX_LIST_ENTRIES + 5):
            (ws / f"f{i:04d}").touch()
        entries = (await run(LIST_FILES, ws)).splitlines()
        assert len(entries) == MAX_LIST_ENTRIES
        assert entries[0] == "f0000" and entries[-1] == f"f{MAX_LIST_ENTRIES - 1:04d}"


def test_tool_definitions() -> None:
    assert [t.name for t in FILE_TOOLS] == ["read_file", "write_file", "list_files"]
    assert READ_FILE.read_only and LIST_FILES.read_only and not WRITE_FILE.read_only
    assert WRITE_FILE.spec.parameters["required"] == ["path", "content"]
