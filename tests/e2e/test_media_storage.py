"""History and traces keep references to what users sent, never the bytes (issue 29): after a
photo, a voice message and a PDF went through the whole service, no row of any table (the
session's messages, the traces and their spans, the inbox) holds base64, a data URL or a
piece of the files; the history names the saved paths instead."""

from __future__ import annotations

import base64
import sqlite3
from pathlib import Path

from bot.app import Loopgate
from tests.conftest import make_config
from tests.document_support import pdf_with_pages
from tests.fakes.llm_server import FakeLLM
from tests.fakes.telegram_server import FakeTelegram
from tests.image_support import jpeg
from tests.telegram_support import telegram_section


def every_row(db: Path) -> dict[str, list[str]]:
    """Each table's rows, each row as one text (blobs decoded as Latin-1, so bytes show)."""
    out: dict[str, list[str]] = {}
    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            rows = conn.execute(f'SELECT * FROM "{table}"').fetchall()
            out[table] = [
                " | ".join(v.decode("latin-1") if isinstance(v, bytes) else str(v) for v in row)
                for row in rows
            ]
    return out


async def test_no_bytes_of_a_photo_a_voice_message_or_a_pdf_are_stored(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    photo = jpeg(300, 200, "green")
    voice = b"OggS-voice-bytes-" * 50
    pdf = pdf_with_pages("the contract text")
    llm.script_transcripts("remember the milk")
    config = make_config(tmp_path, llm, channels={"telegram": telegram_section(tg)})
    async with Loopgate(config):
        sent = tg.private_message(None, photo=tg.photo(photo, width=300, height=200), caption="a")
        tg.push(sent)
        await tg.wait_for(lambda: len(tg.texts()) == 1)
        tg.push(tg.private_message(None, voice=tg.voice(voice, duration=4)))
        await tg.wait_for(lambda: len(tg.texts()) == 2)
        tg.push(tg.private_message(None, document=tg.document(pdf, "c.pdf", "application/pdf")))
        await tg.wait_for(lambda: len(tg.texts()) == 3)
    # The image part really went to the model, as base64 in a data URL...
    first = llm.chat_requests[0].json["messages"][-1]["content"]
    url = first[1]["image_url"]["url"]
    encoded = url.split(",", 1)[1]

    rows = every_row(tmp_path / "loopgate.db")
    stored = "\n".join(text for table in rows.values() for text in table)
    # ... and none of it, nor any file's bytes, is in the database.
    assert "data:image" not in stored and "base64" not in stored
    assert encoded[100:160] not in stored
    assert base64.b64encode(photo)[100:160].decode() not in stored
    assert "OggS-voice-bytes" not in stored
    assert "%PDF" not in stored
    # What is kept: the references, in the history and in the traces.
    name = f"photo_{sent['message']['message_id']}.jpg"
    history = "\n".join(rows["messages"])
    assert f"saved to inbox/{name}" in history
    assert "[voice message, 0:04] remember the milk" in history
    assert "saved to inbox/c.pdf" in history and "the contract text" in history
    # The traces were written (the scan above covered them): one per turn, with their spans.
    assert len(rows["traces"]) == 3 and rows["spans"]
