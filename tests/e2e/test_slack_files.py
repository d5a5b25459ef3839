"""Files shared in a Slack message reach the model (issue 29): the bot downloads each one's
``url_private_download`` from the fake Slack with the bot token, saves it in the user's
workspace and passes it on as an image, a transcript or a document's text."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from agent_core import user_workspace
from bot.app import Loopgate
from bot.http.server import create_app
from tests.conftest import make_config
from tests.document_support import pdf_with_pages
from tests.fakes.llm_server import FakeLLM
from tests.fakes.slack_events import EventSender, message_event
from tests.fakes.slack_server import FakeSlack
from tests.image_support import jpeg, size_of
from tests.slack_support import Bot, slack_section


@asynccontextmanager
async def running(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack, **sections: Any
) -> AsyncIterator[Bot]:
    config = make_config(
        tmp_path, llm, channels={"slack": slack_section(slack, "http")}, **sections
    )
    app = Loopgate(config)
    await app.start()
    transport = httpx.ASGITransport(app=create_app(app, manage_lifespan=False))
    http = httpx.AsyncClient(transport=transport, base_url="http://loopgate")
    bot = Bot(app, slack, "http", http, EventSender(http, slack.signing_secret))
    try:
        yield bot
    finally:
        await bot.close()


def shared(text: str, *files: dict[str, Any]) -> dict[str, Any]:
    return message_event(text, channel="D1", subtype="file_share", files=list(files))


def inbox_file(tmp_path: Path, name: str) -> Path:
    return user_workspace(tmp_path / "workspaces", "slack:UALICE") / "inbox" / name


def last_user_content(llm: FakeLLM) -> Any:
    return llm.last_request.json["messages"][-1]["content"]


async def test_a_shared_pdf_is_fetched_with_the_bot_token_and_read(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> None:
    pdf = pdf_with_pages("quarterly numbers")
    async with running(tmp_path, llm, slack) as bot:
        await bot.event(shared("summarize", slack.add_file(pdf, "q3.pdf", "application/pdf")))
        await slack.wait_for(lambda: slack.posts)
        await bot.settle()

    assert slack.file_downloads == [(f"{slack.team_id}-F0001/download/q3.pdf", slack.bot_token)]
    assert last_user_content(llm) == (
        "summarize\n[document: q3.pdf, 1 page, saved to inbox/q3.pdf]\nquarterly numbers"
    )
    assert inbox_file(tmp_path, "q3.pdf").read_bytes() == pdf


async def test_a_picture_and_a_text_file_in_one_message(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> None:
    picture = slack.add_file(jpeg(40, 30), "cat.jpg", "image/jpeg")
    notes = slack.add_file(b"feed at 6", "notes.txt", "text/plain")
    async with running(tmp_path, llm, slack) as bot:
        await bot.event(shared("look", picture, notes))
        await slack.wait_for(lambda: slack.posts)
        await bot.settle()

    text_part, image_part = last_user_content(llm)
    assert text_part["text"] == "look\n[document: notes.txt, saved to inbox/notes.txt]\nfeed at 6"
    encoded = image_part["image_url"]["url"].split(",", 1)[1]
    assert size_of(base64.b64decode(encoded)) == ("JPEG", (40, 30))


async def test_a_slack_audio_clip_is_transcribed(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> None:
    llm.script_transcripts("ping me later")
    clip = slack.add_file(
        b"webm audio", "audio_message.webm", "audio/webm", subtype="slack_audio", duration_ms=7400
    )
    async with running(tmp_path, llm, slack) as bot:
        await bot.event(shared("", clip))
        await slack.wait_for(lambda: slack.posts)
        await bot.settle()

    (upload,) = llm.audio_uploads
    assert (upload.filename, upload.content_type, upload.data) == (
        "audio_message.webm",
        "audio/webm",
        b"webm audio",
    )
    assert last_user_content(llm) == (
        "[voice message, 0:07] ping me later\n[the audio is saved to inbox/audio_message.webm]"
    )


async def test_a_file_over_the_stated_size_is_never_downloaded(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> None:
    big = slack.add_file(b"tiny", "video.pdf", "application/pdf", size=50 << 20)
    async with running(tmp_path, llm, slack) as bot:
        await bot.event(shared("and this", big))
        await slack.wait_for(lambda: len(slack.posts) == 2)
        await bot.settle()

    assert [p.text for p in slack.posts] == [
        "Skipped: video.pdf (50.0 MB, over the 20.0 MB limit).",
        "echo: and this\n[attachment skipped: video.pdf (50.0 MB, over the 20.0 MB limit)]",
    ]
    assert slack.file_downloads == []


async def test_a_file_larger_than_stated_is_cut_off_while_downloading(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> None:
    lying = slack.add_file(b"x" * 4096, "notes.txt", "text/plain", size=10)
    async with running(tmp_path, llm, slack, media={"max_bytes": 1024}) as bot:
        await bot.event(shared("read", lying))
        await slack.wait_for(lambda: len(slack.posts) == 2)
        await bot.settle()

    assert slack.posts[0].text.startswith("Skipped: notes.txt (")
    assert "over the 1 KB limit" in slack.posts[0].text
    assert not inbox_file(tmp_path, "notes.txt").exists()


async def test_the_token_goes_to_no_other_host(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> None:
    elsewhere = slack.add_file(b"data", "a.txt", "text/plain")
    elsewhere["url_private_download"] = "http://127.0.0.2:9/files-pri/a.txt"
    async with running(tmp_path, llm, slack) as bot:
        await bot.event(shared("read", elsewhere))
        await slack.wait_for(lambda: len(slack.posts) == 2)
        await bot.settle()

    assert slack.posts[0].text == "Skipped: a.txt (could not be downloaded)."
    assert slack.file_downloads == []
