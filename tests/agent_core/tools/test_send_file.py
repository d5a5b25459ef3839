"""``send_file``: the path confined as the file tools confine theirs, the file checked, then
handed to the bot's sender with its name, type, size and caption."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from agent_core.errors import ToolError
from agent_core.tools import SEND_FILE, OutgoingFile, ToolContext, send_file_tool
from agent_core.tools.send_file import MAX_CAPTION_CHARS
from tests.agent_core.test_workspace_quota import ctx


class Recorder:
    """A FileSender that keeps what it was given."""

    def __init__(self) -> None:
        self.sent: list[OutgoingFile] = []

    async def send_file(self, context: ToolContext, file: OutgoingFile) -> str:
        self.sent.append(file)
        return f"sent {file.name}"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace


async def call(
    ws: Path, sender: Recorder, context: ToolContext | None = None, **args: object
) -> str:
    return await send_file_tool(sender).handler(args, context or ctx(ws))


async def refused(ws: Path, **args: object) -> str:
    sender = Recorder()
    with pytest.raises(ToolError) as info:
        await call(ws, sender, **args)
    assert info.value.tool_name == SEND_FILE
    assert sender.sent == []  # nothing reaches the chat
    return str(info.value)


async def test_the_file_goes_to_the_sender_named_and_typed(ws: Path) -> None:
    (ws / "out").mkdir()
    (ws / "out" / "report.pdf").write_bytes(b"%PDF-1.4 data")
    sender = Recorder()
    assert await call(ws, sender, path="out/report.pdf", caption="Q3") == "sent report.pdf"
    [file] = sender.sent
    assert file.path == (ws / "out" / "report.pdf").resolve()
    assert (file.shown_path, file.name, file.mime) == (
        "out/report.pdf",
        "report.pdf",
        "application/pdf",
    )
    assert (file.size, file.caption) == (13, "Q3")


@pytest.mark.parametrize(
    ("name", "mime"),
    [("a.png", "image/png"), ("a.JPG", "image/jpeg"), ("notes", "application/octet-stream")],
)
async def test_the_type_comes_from_the_name(ws: Path, name: str, mime: str) -> None:
    (ws / name).write_bytes(b"x")
    sender = Recorder()
    await call(ws, sender, path=name)
    assert sender.sent[0].mime == mime


class TestRefused:
    async def test_a_relative_path_escaping_the_workspace(self, ws: Path) -> None:
        (ws.parent / "secret.txt").write_text("no")
        assert "access denied" in await refused(ws, path="../secret.txt")

    async def test_an_absolute_path_outside(self, ws: Path) -> None:
        secret = ws.parent / "secret.txt"
        secret.write_text("no")
        assert "access denied" in await refused(ws, path=str(secret))

    async def test_a_link_pointing_out_of_the_workspace(self, ws: Path) -> None:
        (ws.parent / "secret.txt").write_text("no")
        os.symlink(ws.parent / "secret.txt", ws / "innocent.txt")
        assert "access denied" in await refused(ws, path="innocent.txt")

    async def test_a_missing_file(self, ws: Path) -> None:
        assert await refused(ws, path="gone.pdf") == "no such file: gone.pdf (see list_files)"

    async def test_a_folder(self, ws: Path) -> None:
        (ws / "dir").mkdir()
        assert "is a folder" in await refused(ws, path="dir")
        assert "is a folder" in await refused(ws, path=".")

    async def test_an_empty_file(self, ws: Path) -> None:
        (ws / "empty.txt").write_bytes(b"")
        assert await refused(ws, path="empty.txt") == "empty.txt is empty: nothing was sent"

    @pytest.mark.parametrize("args", [{}, {"path": ""}, {"path": 3}])
    async def test_no_path(self, ws: Path, args: dict[str, object]) -> None:
        assert "'path'" in await refused(ws, **args)

    async def test_a_caption_that_is_not_text(self, ws: Path) -> None:
        (ws / "a.txt").write_text("x")
        assert "'caption'" in await refused(ws, path="a.txt", caption=5)

    async def test_a_caption_over_the_limit(self, ws: Path) -> None:
        (ws / "a.txt").write_text("x")
        message = await refused(ws, path="a.txt", caption="x" * (MAX_CAPTION_CHARS + 1))
        assert f"over {MAX_CAPTION_CHARS}" in message


async def test_an_extra_root_is_reachable_by_absolute_path(ws: Path, tmp_path: Path) -> None:
    team = tmp_path / "team"
    team.mkdir()
    (team / "plan.md").write_text("# plan")
    context = dataclasses.replace(ctx(ws), extra_roots=(team,))
    sender = Recorder()
    await call(ws, sender, context, path=str(team / "plan.md"))
    assert sender.sent[0].path == (team / "plan.md").resolve()
