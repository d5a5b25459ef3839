"""The ``send_file`` tool on Zalo (issue 29). The Bot API takes no upload: ``sendPhoto`` wants a
URL that Zalo downloads itself. In webhook mode Loopgate's server is public, so a picture goes
by ``sendPhoto`` from a signed link that the fake Zalo fetches over real HTTP; in polling mode,
and for anything but a picture, the chat gets an honest note and the model is told."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from starlette.types import ASGIApp, Receive, Scope, Send

from bot.app import Loopgate
from bot.http.server import create_app
from tests.e2e.test_zalo import zalo_config
from tests.fakes.llm_server import FakeLLM, text
from tests.fakes.loopback import LoopbackServer
from tests.fakes.zalo_server import FakeZalo, text_event
from tests.image_support import jpeg, png
from tests.send_file_support import send_file, tool_results, workspace_file

USER = "zalo:user-1"
SECRET = "webhook-secret-123"


class TestPolling:
    async def test_a_document_becomes_a_note_and_the_model_is_told(
        self, tmp_path: Path, llm: FakeLLM, zalo: FakeZalo
    ) -> None:
        workspace_file(tmp_path, USER, "report.pdf", b"%PDF" + bytes(120_000))
        llm.script(send_file("report.pdf", "Your report"), text("I could not attach it."))
        async with Loopgate(zalo_config(tmp_path, llm, zalo)):
            zalo.push(text_event("report please"))
            await zalo.wait_for(lambda: len(zalo.messages) == 2)

        assert zalo.texts() == [
            "Your report\n[file: report.pdf, 120 KB — not sent: Zalo bots can't send files]",
            "I could not attach it.",
        ]
        assert not zalo.calls("sendPhoto")
        [result] = tool_results(llm)
        assert result.startswith("report.pdf (120 KB) could not be sent: the zalo chat")

    async def test_a_picture_becomes_a_note_without_a_public_server(
        self, tmp_path: Path, llm: FakeLLM, zalo: FakeZalo
    ) -> None:
        workspace_file(tmp_path, USER, "photo.jpg", jpeg())
        llm.script(send_file("photo.jpg"), text("See above."))
        async with Loopgate(zalo_config(tmp_path, llm, zalo)):
            zalo.push(text_event("photo please"))
            await zalo.wait_for(lambda: len(zalo.messages) == 2)

        note = zalo.texts()[0]
        assert note.startswith("[file: photo.jpg, ")
        assert note.endswith("not sent: a Zalo bot can send a picture only from a public link]")
        assert not zalo.calls("sendPhoto")
        assert "could not be sent" in tool_results(llm)[0]


@asynccontextmanager
async def public_bot(tmp_path: Path, llm: FakeLLM, zalo: FakeZalo) -> AsyncIterator[str]:
    """Loopgate in webhook mode, its HTTP server listening on 127.0.0.1 (the "public" URL Zalo
    posts to and fetches links from); yields the webhook URL."""
    target: list[ASGIApp] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await target[0](scope, receive, send)  # the server listens before Loopgate exists

    server = LoopbackServer(app, name="loopgate")
    port = await server.start()
    hook = f"http://127.0.0.1:{port}/zalo/webhook"
    config = zalo_config(
        tmp_path, llm, zalo, mode="webhook", webhook_url=hook, webhook_secret=SECRET
    )
    try:
        async with Loopgate(config) as loopgate:
            target.append(create_app(loopgate, manage_lifespan=False))
            await zalo.wait_for(lambda: zalo.calls("setWebhook"))
            yield hook
    finally:
        await server.stop()


class TestWebhook:
    async def test_a_picture_goes_by_send_photo_and_zalo_fetches_it_intact(
        self, tmp_path: Path, llm: FakeLLM, zalo: FakeZalo
    ) -> None:
        picture = png(80, 60)
        workspace_file(tmp_path, USER, "charts/q3.png", picture)
        llm.script(send_file("charts/q3.png", "Q3"), text("Here."))
        async with public_bot(tmp_path, llm, zalo) as hook:
            await zalo.post_webhook(hook, text_event("chart please"), secret=SECRET)
            await zalo.wait_for(lambda: zalo.texts() == ["Here."])
            # The same link with one character of its signature changed is refused.
            prefix, name = zalo.photos[0].url.rsplit("/", 1)
            forged_link = f"{prefix[:-1]}{'B' if prefix.endswith('A') else 'A'}/{name}"
            async with httpx.AsyncClient() as client:
                forged = await client.get(forged_link)

        [photo] = zalo.photos
        assert photo.data == picture
        assert (photo.chat_id, photo.body["caption"]) == ("user-1", "Q3")
        assert photo.url.startswith(hook.removesuffix("webhook") + "files/")
        assert photo.url.endswith("/q3.png")
        assert forged.status_code == 404
        assert tool_results(llm) == [f"Sent q3.png ({len(picture)} B) to the chat as a photo."]

    async def test_a_document_is_still_a_note(
        self, tmp_path: Path, llm: FakeLLM, zalo: FakeZalo
    ) -> None:
        workspace_file(tmp_path, USER, "notes.txt", b"hello")
        llm.script(send_file("notes.txt"), text("Noted."))
        async with public_bot(tmp_path, llm, zalo) as hook:
            await zalo.post_webhook(hook, text_event("notes please"), secret=SECRET)
            await zalo.wait_for(lambda: len(zalo.texts()) == 2)

        assert zalo.texts()[0] == "[file: notes.txt, 5 B — not sent: Zalo bots can't send files]"
        assert not zalo.calls("sendPhoto")

    async def test_a_picture_zalo_cannot_fetch_becomes_a_note(
        self, tmp_path: Path, llm: FakeLLM, zalo: FakeZalo
    ) -> None:
        path = workspace_file(tmp_path, USER, "gone.jpg", jpeg())
        llm.script(send_file("gone.jpg"), text("Hm."))
        async with public_bot(tmp_path, llm, zalo) as hook:
            original = zalo._m_sendPhoto

            async def delete_first(body: dict[str, object]) -> object:
                path.unlink()  # gone between the link and Zalo's fetch
                return await original(body)

            zalo._m_sendPhoto = delete_first  # type: ignore[method-assign]
            await zalo.post_webhook(hook, text_event("photo please"), secret=SECRET)
            await zalo.wait_for(lambda: len(zalo.texts()) == 2)

        assert zalo.texts()[0].endswith("— not sent: Zalo could not fetch it]")
        assert len(zalo.calls("sendPhoto")) == 1 and not zalo.photos
        assert "could not be sent" in tool_results(llm)[0]
