"""Documents sent on Telegram reach the model as text (issue 29): text, Markdown, CSV and JSON as
they are, PDFs through pypdf; a long text goes to the workspace; what can't be read gets the
service's short reply and the caption is still answered."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from agent_core import user_workspace
from bot.app import Loopgate
from tests.conftest import make_config
from tests.document_support import encrypted_pdf, pdf_with_pages
from tests.fakes.llm_server import FakeLLM, delay, text
from tests.fakes.telegram_server import FakeTelegram
from tests.image_support import png, size_of
from tests.telegram_support import telegram_section


def config(tmp_path: Path, llm: FakeLLM, tg: FakeTelegram, **sections: Any) -> Any:
    return make_config(tmp_path, llm, channels={"telegram": telegram_section(tg)}, **sections)


def inbox_file(tmp_path: Path, name: str) -> Path:
    return user_workspace(tmp_path / "workspaces", "telegram:42") / "inbox" / name


def last_user_content(llm: FakeLLM) -> Any:
    return llm.last_request.json["messages"][-1]["content"]


async def send(tmp_path: Path, llm: FakeLLM, tg: FakeTelegram, replies: int, **kw: Any) -> None:
    """One private message with ``kw`` (document=..., caption=...), until ``replies`` texts."""
    media = kw.pop("media", {})
    async with Loopgate(config(tmp_path, llm, tg, media=media)):
        tg.push(tg.private_message(None, **kw))
        await tg.wait_for(lambda: len(tg.texts()) == replies)


@pytest.mark.parametrize(
    ("name", "mime", "body"),
    [
        ("notes.md", "text/markdown", "# Plan\n\n- ship it"),
        ("table.csv", "text/csv", "a,b\n1,2"),
        ("data.json", "application/json", '{"answer": 42}'),
        ("readme.txt", "text/plain", "plain words"),
    ],
)
async def test_a_text_document_and_its_caption_reach_the_model(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram, name: str, mime: str, body: str
) -> None:
    document = tg.document(body.encode(), name, mime)
    await send(tmp_path, llm, tg, 1, document=document, caption="summarize")

    assert last_user_content(llm) == (
        f"summarize\n[document: {name}, saved to inbox/{name}]\n{body}"
    )
    assert inbox_file(tmp_path, name).read_text() == body


async def test_a_pdf_is_read_page_by_page(tmp_path: Path, llm: FakeLLM, tg: FakeTelegram) -> None:
    document = tg.document(
        pdf_with_pages("alpha page", "beta page"), "report.pdf", "application/pdf"
    )
    await send(tmp_path, llm, tg, 1, document=document)

    assert last_user_content(llm) == (
        "[document: report.pdf, 2 pages, saved to inbox/report.pdf]\nalpha page\n\nbeta page"
    )


async def test_a_long_text_goes_to_the_workspace_and_the_model_gets_its_start(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    body = "".join(f"line {i:04d}\n" for i in range(100))  # 1,000 characters
    document = tg.document(body.encode(), "log.txt", "text/plain")
    await send(tmp_path, llm, tg, 1, document=document, media={"document_max_chars": 200})

    content = last_user_content(llm)
    assert content == (
        f"[document: log.txt, saved to inbox/log.txt]\n{body[:200]}\n"
        "[log.txt: only the first 200 of 1,000 characters are shown; "
        "the whole text is saved to inbox/log.txt.txt]"
    )
    assert inbox_file(tmp_path, "log.txt.txt").read_text() == body
    assert "line 0099" not in content


@pytest.mark.parametrize(
    ("name", "mime", "data", "reason"),
    [
        ("report.pdf", "application/pdf", encrypted_pdf("secret plans"), "encrypted PDF"),
        ("broken.pdf", "application/pdf", b"%PDF-1.4\nnot really", "not a readable document"),
        ("tool.exe", "application/x-msdownload", b"MZ\x90\x00", "unsupported file type"),
        ("blob.txt", "text/plain", b"\x00\x01\x02binary", "not a readable document"),
    ],
)
async def test_what_cant_be_read_is_named_and_the_caption_still_answered(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram, name: str, mime: str, data: bytes, reason: str
) -> None:
    await send(tmp_path, llm, tg, 2, document=tg.document(data, name, mime), caption="read it")

    skipped, answer = tg.texts()
    assert skipped.startswith(f"Skipped: {name} ({reason}")
    assert answer.startswith(f"echo: read it\n[attachment skipped: {name} ({reason}")
    assert answer.endswith(f"; saved to inbox/{name}]")
    assert inbox_file(tmp_path, name).read_bytes() == data  # saved anyway, for the file tools
    assert "secret plans" not in str(llm.last_request.json)


async def test_a_picture_sent_as_a_file_is_an_image(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    document = tg.document(png(40, 30), "diagram.png", "image/png")
    await send(tmp_path, llm, tg, 1, document=document, caption="explain")

    text_part, image_part = last_user_content(llm)
    assert text_part == {"type": "text", "text": "explain"}
    encoded = image_part["image_url"]["url"].split(",", 1)[1]
    assert size_of(base64.b64decode(encoded))[1] == (40, 30)


async def test_a_document_over_the_stated_size_limit_is_never_downloaded(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    document = tg.document(b"small really", "big.pdf", "application/pdf", size=25 << 20)
    await send(tmp_path, llm, tg, 2, document=document, caption="and?")

    assert tg.texts()[0] == "Skipped: big.pdf (25.0 MB, over the 20.0 MB limit)."
    assert not tg.calls_of("getFile")
    assert tg.file_downloads == []


async def test_a_document_cut_off_by_a_restart_is_fetched_and_read_again(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    llm.script(delay(30, text("never sent")), text("read it"))
    pdf = pdf_with_pages("clause one")
    cfg = make_config(
        tmp_path,
        llm,
        channels={"telegram": telegram_section(tg)},
        bot={"shutdown_grace": 0.2},
    )
    async with Loopgate(cfg):
        document = tg.document(pdf, "deal.pdf", "application/pdf")
        tg.push(tg.private_message(None, document=document, caption="check"))
        await llm.wait_for(lambda: len(llm.chat_requests) == 1)
    inbox_file(tmp_path, "deal.pdf").unlink()  # the workspace may be gone too (a new host)
    async with Loopgate(cfg):
        await tg.wait_for(lambda: tg.texts() == ["read it"])

    assert len(tg.file_downloads) == 2
    first, second = (r.json["messages"][-1]["content"] for r in llm.chat_requests)
    assert (
        first
        == second
        == ("check\n[document: deal.pdf, 1 page, saved to inbox/deal.pdf]\nclause one")
    )
    assert inbox_file(tmp_path, "deal.pdf").read_bytes() == pdf
