"""The ``send_file`` tool on Zalo (issue 29): the Bot API takes no uploads (``sendPhoto`` wants
a public URL Zalo downloads itself), so the chat gets an honest note naming the file, and the
model is told the file itself did not go."""

from __future__ import annotations

from pathlib import Path

from bot.app import Loopgate
from tests.e2e.test_zalo import zalo_config
from tests.fakes.llm_server import FakeLLM, text
from tests.fakes.zalo_server import FakeZalo, text_event
from tests.image_support import jpeg
from tests.send_file_support import send_file, tool_results, workspace_file

USER = "zalo:user-1"


async def test_a_document_becomes_a_note_and_the_model_is_told(
    tmp_path: Path, llm: FakeLLM, zalo: FakeZalo
) -> None:
    workspace_file(tmp_path, USER, "report.pdf", b"%PDF" + bytes(120_000))
    llm.script(send_file("report.pdf", "Your report"), text("I could not attach it, sorry."))
    async with Loopgate(zalo_config(tmp_path, llm, zalo)):
        zalo.push(text_event("report please"))
        await zalo.wait_for(lambda: len(zalo.messages) == 2)

    assert zalo.texts() == [
        "Your report\n[file: report.pdf, 120 KB — not sent: Zalo bots can't send files]",
        "I could not attach it, sorry.",
    ]
    assert not zalo.calls("sendPhoto")
    [result] = tool_results(llm)
    assert result.startswith("report.pdf (120 KB) could not be sent: the zalo chat")


async def test_a_picture_becomes_a_note_too(tmp_path: Path, llm: FakeLLM, zalo: FakeZalo) -> None:
    picture = jpeg()
    workspace_file(tmp_path, USER, "photo.jpg", picture)
    llm.script(send_file("photo.jpg"), text("See above."))
    async with Loopgate(zalo_config(tmp_path, llm, zalo)):
        zalo.push(text_event("photo please"))
        await zalo.wait_for(lambda: len(zalo.messages) == 2)

    note = zalo.texts()[0]
    assert note.startswith("[file: photo.jpg, ")
    assert note.endswith("not sent: a Zalo bot can send a picture only from a public link]")
    assert not zalo.calls("sendPhoto")
    assert "could not be sent" in tool_results(llm)[0]
