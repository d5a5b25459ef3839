"""The ``send_file`` tool on Telegram (issue 29): the fake model calls it, the real
python-telegram-bot uploads the workspace file to the fake Bot API (``sendPhoto`` for a picture,
``sendDocument`` otherwise) and the bytes arrive intact; what can't be sent is a tool error the
model reads, and the turn still ends with its answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.app import Loopgate
from tests.fakes.llm_server import FakeLLM, delay, text
from tests.fakes.telegram_server import FakeTelegram, Upload
from tests.image_support import jpeg, png
from tests.send_file_support import send_file, sparse_file, tool_results, workspace_file
from tests.telegram_support import GROUP, tg_config

USER = "telegram:42"


def upload(params: dict[str, Any], field: str) -> Upload:
    file = params[field]
    assert isinstance(file, Upload)
    return file


async def answered(tg: FakeTelegram, count: int = 1) -> None:
    await tg.wait_for(lambda: len(tg.sent) >= count)


class TestSending:
    async def test_a_picture_goes_as_a_photo_with_its_caption(
        self, tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
    ) -> None:
        picture = png(120, 80)
        workspace_file(tmp_path, USER, "charts/sales.png", picture)
        llm.script(send_file("charts/sales.png", "Sales, March"), text("Here is the chart."))
        async with Loopgate(tg_config(tmp_path, llm, tg)):
            tg.push(tg.private_message("chart please"))
            await answered(tg)

        [photo] = tg.uploads("sendPhoto")
        sent = upload(photo, "photo")
        assert sent.data == picture
        assert sent.filename == "sales.png"
        assert photo["chat_id"] == 42 and photo["caption"] == "Sales, March"
        assert not tg.calls_of("sendDocument")
        assert len(picture) < 1000  # sizes under 1 KB are told in bytes
        assert tool_results(llm) == [f"Sent sales.png ({len(picture)} B) to the chat as a photo."]
        assert tg.texts() == ["Here is the chart."]

    async def test_any_other_file_goes_as_a_document_into_the_forum_topic(
        self, tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
    ) -> None:
        report = b"%PDF-1.4\n" + bytes(range(256)) * 40
        workspace_file(tmp_path, USER, "report.pdf", report)
        llm.script(send_file("report.pdf"), text("Sent."))
        async with Loopgate(tg_config(tmp_path, llm, tg)):
            update = tg.group_message(
                "@loopgate_bot the report",
                forum=True,
                entities=tg.mention("@loopgate_bot the report"),
                message_thread_id=7,
                is_topic_message=True,
            )
            tg.push(update)
            await answered(tg)

        [document] = tg.uploads("sendDocument")
        sent = upload(document, "document")
        assert sent.data == report
        assert (sent.filename, sent.content_type) == ("report.pdf", "application/pdf")
        assert document["chat_id"] == GROUP and document["message_thread_id"] == 7
        assert document["reply_parameters"]["message_id"] == update["message"]["message_id"]
        assert "caption" not in document
        assert "as a document" in tool_results(llm)[0]

    async def test_a_picture_telegram_refuses_as_a_photo_goes_as_a_document(
        self, tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
    ) -> None:
        picture = jpeg(64, 48)
        workspace_file(tmp_path, USER, "wide.jpg", picture)
        tg.photo_dimensions_invalid = True
        llm.script(send_file("wide.jpg"), text("Done."))
        async with Loopgate(tg_config(tmp_path, llm, tg)):
            tg.push(tg.private_message("the panorama"))
            await answered(tg)

        assert len(tg.calls_of("sendPhoto")) == 1 and not tg.uploads("sendPhoto")
        [document] = tg.uploads("sendDocument")
        assert upload(document, "document").data == picture
        assert "as a document" in tool_results(llm)[0]

    async def test_a_caption_over_1024_characters_continues_in_a_message(
        self, tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
    ) -> None:
        workspace_file(tmp_path, USER, "photo.jpg", jpeg())
        caption = " ".join(f"word{i}" for i in range(300))  # about 2,100 characters
        llm.script(send_file("photo.jpg", caption), text("There."))
        async with Loopgate(tg_config(tmp_path, llm, tg)):
            tg.push(tg.private_message("photo with notes"))
            await answered(tg, 2)

        [photo] = tg.uploads("sendPhoto")
        head = photo["caption"]
        assert len(head) <= 1024
        rest, answer = tg.texts()
        assert answer == "There."
        assert f"{head} {rest}" == caption  # cut between two words, nothing lost


class TestRefusals:
    """Each refusal is a tool error the model reads; nothing is uploaded, the answer arrives."""

    async def _refused(self, tmp_path: Path, llm: FakeLLM, tg: FakeTelegram, path: str) -> str:
        llm.script(send_file(path), text("Sorry."))
        async with Loopgate(tg_config(tmp_path, llm, tg)):
            tg.push(tg.private_message("send it"))
            await answered(tg)
        assert not tg.calls_of("sendPhoto") and not tg.calls_of("sendDocument")
        assert tg.texts() == ["Sorry."]
        [result] = tool_results(llm)
        return result

    async def test_a_path_outside_the_workspace(
        self, tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
    ) -> None:
        secret = tmp_path / "secret.txt"
        secret.write_text("no")
        result = await self._refused(tmp_path, llm, tg, "../../secret.txt")
        assert result.startswith("Error") and "access denied" in result

    async def test_an_absolute_path_outside_the_workspace(
        self, tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
    ) -> None:
        secret = tmp_path / "secret.txt"
        secret.write_text("no")
        assert "access denied" in await self._refused(tmp_path, llm, tg, str(secret))

    async def test_a_missing_file(self, tmp_path: Path, llm: FakeLLM, tg: FakeTelegram) -> None:
        workspace_file(tmp_path, USER, "other.txt", b"x")
        result = await self._refused(tmp_path, llm, tg, "nothing-here.pdf")
        assert "no such file: nothing-here.pdf" in result

    async def test_a_file_over_telegrams_50_mb(
        self, tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
    ) -> None:
        sparse_file(workspace_file(tmp_path, USER, "video.mp4"), 60_000_000)
        result = await self._refused(tmp_path, llm, tg, "video.mp4")
        assert "video.mp4 is 60.0 MB, over Telegram's limit of 50.0 MB" in result
        assert "nothing was sent" in result


async def test_a_picture_over_10_mb_goes_as_a_document(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    big = jpeg() + bytes(12_000_000)  # a JPEG with trailing bytes: still the same upload
    workspace_file(tmp_path, USER, "big.jpg", big)
    llm.script(send_file("big.jpg"), text("Done."))
    async with Loopgate(tg_config(tmp_path, llm, tg)):
        tg.push(tg.private_message("big one"))
        await answered(tg)

    assert not tg.calls_of("sendPhoto")  # judged by size before any upload
    [document] = tg.uploads("sendDocument")
    assert upload(document, "document").data == big


async def test_the_same_file_is_sent_once_per_message(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    """A send is recorded under the message it answers: asking again (as a replayed turn
    would) sends nothing and says why."""
    workspace_file(tmp_path, USER, "a.txt", b"hello")
    llm.script(send_file("a.txt", "one"), send_file("a.txt", "one"), text("Done."))
    async with Loopgate(tg_config(tmp_path, llm, tg)):
        tg.push(tg.private_message("send a"))
        await answered(tg)

    assert len(tg.uploads("sendDocument")) == 1
    first, second = tool_results(llm)
    assert first.startswith("Sent a.txt (5 B)")
    assert second == "a.txt was already sent to this chat for this message; not sent again."


async def test_a_file_then_no_reply_sends_the_file_alone(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    workspace_file(tmp_path, USER, "a.txt", b"hello")
    llm.script(send_file("a.txt"), text("NO_REPLY"))
    async with Loopgate(tg_config(tmp_path, llm, tg)) as app:
        tg.push(tg.private_message("just the file"))
        await tg.wait_for(lambda: tg.uploads("sendDocument"))
        await tg.wait_for(lambda: not app.registry.active_runs)
    assert tg.texts() == []


async def test_a_turn_replayed_after_a_restart_does_not_send_the_file_again(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    """The first process sends the file, then is stopped before the answer (a short grace):
    the next one runs the turn again, and the model's second send_file finds it recorded."""
    workspace_file(tmp_path, USER, "report.pdf", b"%PDF report")
    llm.script(
        send_file("report.pdf"),
        delay(30, text("never sent")),
        send_file("report.pdf"),
        text("Here it is."),
    )
    config = tg_config(tmp_path, llm, tg, bot={"shutdown_grace": 0.2})
    async with Loopgate(config):
        tg.push(tg.private_message("the report"))
        await llm.wait_for(lambda: len(llm.chat_requests) == 2)
    assert len(tg.uploads("sendDocument")) == 1 and tg.texts() == []
    async with Loopgate(config):
        await tg.wait_for(lambda: tg.texts() == ["Here it is."])

    assert len(tg.uploads("sendDocument")) == 1
    assert tool_results(llm) == [
        "report.pdf was already sent to this chat for this message; not sent again."
    ]
