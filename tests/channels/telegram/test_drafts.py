"""The Telegram adapter's streaming side on its own, against the fake Bot API: editing and
deleting sent messages (send + edit streaming) and draft previews in private chats."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from itertools import pairwise
from typing import Any

import pytest
from structlog.testing import capture_logs
from telegram.error import BadRequest as PtbBadRequest

from channels import (
    ChatRef,
    ChatType,
    MessageEditor,
    MessageRef,
    NativeStreaming,
    RetryAfter,
    StreamUnsupported,
)
from channels.errors import BadRequest
from channels.telegram import RateLimits, TelegramChannel, TelegramOptions
from channels.telegram._drafts import draft_preview
from tests.fakes.telegram_server import FakeTelegram
from tests.inbound_support import TELEGRAM_SECRET, Handler, MemorySeen, MemoryState
from tests.telegram_support import GROUP

DM = ChatRef("telegram", "42", ChatType.DIRECT)
TEAM = ChatRef("telegram", str(GROUP), ChatType.GROUP)


@asynccontextmanager
async def telegram(tg: FakeTelegram, **options: Any) -> AsyncIterator[TelegramChannel]:
    """A started adapter (webhook mode: no poller in the way) sending to the fake."""
    settings: dict[str, Any] = {
        "token": tg.token,
        "api_base_url": tg.base_url,
        "mode": "webhook",
        "webhook_url": "https://bot.example/telegram/webhook",
        "webhook_secret": TELEGRAM_SECRET,
        "rate_limits": None,
        "retry_backoff": 0.01,
        **options,
    }
    channel = TelegramChannel(TelegramOptions(**settings), state=MemoryState(), seen=MemorySeen())
    await channel.start(Handler())
    try:
        yield channel
    finally:
        await channel.stop()


def key(message: MessageRef) -> tuple[int, int]:
    return int(message.chat.chat_id), int(message.message_id)


def draft_texts(tg: FakeTelegram) -> list[list[str]]:
    return list(tg.drafts.values())


class TestEdits:
    async def test_the_adapter_edits_and_deletes(self, tg: FakeTelegram) -> None:
        async with telegram(tg) as channel:
            assert isinstance(channel, MessageEditor)
            assert isinstance(channel, NativeStreaming)
            assert channel.capabilities.edits

    async def test_edit_changes_the_text(self, tg: FakeTelegram) -> None:
        async with telegram(tg) as channel:
            sent = await channel.send_text(DM, "<b>Hello</b>")
            await channel.edit_text(sent, "<b>Hello</b>, world &amp; more")
        assert tg.message_history[key(sent)] == ["Hello", "Hello, world & more"]
        (edit,) = tg.calls_of("editMessageText")
        assert edit.params["parse_mode"] == "HTML"
        assert edit.params["message_id"] == int(sent.message_id)

    async def test_unchanged_edit_is_not_an_error(self, tg: FakeTelegram) -> None:
        async with telegram(tg) as channel:
            sent = await channel.send_text(DM, "<b>same</b>")
            await channel.edit_text(sent, "<b>same</b>")  # Telegram: "message is not modified"
            await channel.edit_text(sent, "<strong>same</strong>")  # the same entity
            await channel.edit_text(sent, "same")  # not bold any more: a real change
        assert len(tg.calls_of("editMessageText")) == 3
        assert tg.message_history[key(sent)] == ["same", "same"]

    async def test_html_rejected_on_edit_falls_back_to_plain(self, tg: FakeTelegram) -> None:
        async with telegram(tg) as channel:
            sent = await channel.send_text(DM, "draft")
            with capture_logs() as logs:
                await channel.edit_text(sent, "<b>bold</b> <blink>x</blink> &amp; y")
            # The same rejected HTML again: the plain text is already there, nothing changes.
            await channel.edit_text(sent, "<b>bold</b> <blink>x</blink> &amp; y")
        assert tg.message_history[key(sent)] == ["draft", "bold x & y"]
        edits = tg.calls_of("editMessageText")
        assert [c.params.get("parse_mode") for c in edits] == ["HTML", None, "HTML", None]
        assert edits[1].params["text"] == "bold x & y"
        assert [e["event"] for e in logs].count("telegram.html_rejected") == 1

    async def test_429_on_edit_raises_retry_after_and_holds_the_chat(
        self, tg: FakeTelegram
    ) -> None:
        async with telegram(tg) as channel:
            sent = await channel.send_text(DM, "one")
            tg.fail_next("editMessageText", 429, retry_after=7)
            with pytest.raises(RetryAfter) as info:
                await channel.edit_text(sent, "two")
            assert info.value.retry_after == 7
            assert channel.pacer.held_for(DM.chat_id) > 6
        assert tg.message_history[key(sent)] == ["one"]
        assert len(tg.calls_of("editMessageText")) == 1  # not retried behind the caller's back

    async def test_edits_are_paced_like_sends(self, tg: FakeTelegram) -> None:
        limits = RateLimits(chat_per_second=5.0, chat_burst=1)
        async with telegram(tg, rate_limits=limits) as channel:
            sent = await channel.send_text(DM, "1")
            await channel.edit_text(sent, "2")
            await channel.edit_text(sent, "3")
        times = [c.at for c in tg.calls if c.method in ("sendMessage", "editMessageText")]
        assert len(times) == 3
        assert all(later - earlier >= 0.15 for earlier, later in pairwise(times))
        assert tg.message_history[key(sent)] == ["1", "2", "3"]

    async def test_other_refusals_are_raised(self, tg: FakeTelegram) -> None:
        async with telegram(tg) as channel:
            gone = MessageRef(DM, "31337")
            with pytest.raises(BadRequest, match=r"(?i)message to edit not found"):
                await channel.edit_text(gone, "text")

    async def test_edit_after_a_5xx_is_retried(self, tg: FakeTelegram) -> None:
        async with telegram(tg) as channel:
            sent = await channel.send_text(DM, "one")
            tg.fail_next("editMessageText", 502)
            await channel.edit_text(sent, "two")
        assert tg.message_history[key(sent)] == ["one", "two"]


class TestDelete:
    async def test_delete_true_then_false(self, tg: FakeTelegram) -> None:
        async with telegram(tg) as channel:
            sent = await channel.send_text(TEAM, "preview")
            assert tg.visible(*key(sent)) == "preview"
            assert await channel.delete_message(sent) is True
            assert tg.visible(*key(sent)) is None
            assert await channel.delete_message(sent) is False  # already gone
            assert await channel.delete_message(MessageRef(TEAM, "424242")) is False
            assert await channel.delete_message(MessageRef(TEAM, "not-an-id")) is False
        assert tg.message_history[key(sent)] == ["preview"]  # what the user had seen

    async def test_refusals_are_false(self, tg: FakeTelegram) -> None:
        async with telegram(tg) as channel:
            sent = await channel.send_text(TEAM, "old")
            tg.fail_next("deleteMessage", 400, "Bad Request: message can't be deleted")
            assert await channel.delete_message(sent) is False
            tg.fail_next("deleteMessage", 403, "Forbidden: not enough rights")
            assert await channel.delete_message(sent) is False
            assert tg.visible(*key(sent)) == "old"

    async def test_429_on_delete_raises_retry_after(self, tg: FakeTelegram) -> None:
        async with telegram(tg) as channel:
            sent = await channel.send_text(DM, "x")
            tg.fail_next("deleteMessage", 429, retry_after=3)
            with pytest.raises(RetryAfter):
                await channel.delete_message(sent)
            assert tg.visible(*key(sent)) == "x"


class TestDrafts:
    async def test_a_dm_streams_as_drafts(self, tg: FakeTelegram) -> None:
        async with telegram(tg) as channel:
            stream = channel.open_stream(DM, reply_to="7")
            assert stream is not None
            await stream.update("")  # nothing to show yet: no placeholder
            await stream.update("Hello")
            await stream.update("Hello")  # unchanged: no call
            await stream.update("Hello **wor")
            assert await stream.finish("Hello **world**") == []
            await stream.update("late")  # after finish: ignored
        assert draft_texts(tg) == [["Hello", "Hello **wor"]]
        (chat_id, draft_id) = next(iter(tg.drafts))
        assert chat_id == 42 and draft_id != 0
        assert all("parse_mode" not in c.params for c in tg.calls_of("sendMessageDraft"))
        assert not tg.sent  # finish sent nothing: the bot delivers the answer

    async def test_each_stream_has_its_own_draft(self, tg: FakeTelegram) -> None:
        async with telegram(tg) as channel:
            for text in ("first", "second"):
                stream = channel.open_stream(DM)
                assert stream is not None
                await stream.update(text)
                await stream.finish(text)
        assert draft_texts(tg) == [["first"], ["second"]]

    async def test_a_long_preview_shows_its_tail(self, tg: FakeTelegram) -> None:
        text = "".join(f"line {i}\n" for i in range(800)) + "😀" * 10
        async with telegram(tg) as channel:
            stream = channel.open_stream(DM)
            assert stream is not None
            await stream.update(text)
        (shown,) = draft_texts(tg)[0]
        assert len(shown.encode("utf-16-le")) // 2 <= 4096
        assert shown.startswith("…") and text.endswith(shown[1:])
        assert len(shown.encode("utf-16-le")) // 2 >= 4090
        assert draft_preview("short") == "short"

    async def test_no_drafts_in_groups_or_when_off(self, tg: FakeTelegram) -> None:
        async with telegram(tg) as channel:
            assert channel.open_stream(TEAM) is None
        async with telegram(tg, drafts=False) as channel:
            assert channel.open_stream(DM) is None
        assert not tg.calls_of("sendMessageDraft")

    async def test_fake_refuses_drafts_outside_private_chats(self, tg: FakeTelegram) -> None:
        async with telegram(tg) as channel:
            with pytest.raises(PtbBadRequest):
                await channel.bot.send_message_draft(GROUP, 1, "hi")
        assert not tg.drafts

    async def test_unknown_method_then_no_more_streams(self, tg: FakeTelegram) -> None:
        tg.unknown_methods.add("sendMessageDraft")  # a Bot API server older than drafts
        async with telegram(tg) as channel:
            stream = channel.open_stream(DM)
            assert stream is not None
            with capture_logs() as logs, pytest.raises(StreamUnsupported):
                await stream.update("Hello")
            await stream.update("Hello again")  # a refused stream stays quiet
            assert channel.open_stream(DM) is None
        assert len(tg.calls_of("sendMessageDraft")) == 1
        assert any(e["event"] == "telegram.drafts_unsupported" for e in logs)

    async def test_not_allowed_then_no_more_streams(self, tg: FakeTelegram) -> None:
        tg.fail_next("sendMessageDraft", 400, "Bad Request: method is not available")
        async with telegram(tg) as channel:
            stream = channel.open_stream(DM)
            assert stream is not None
            with pytest.raises(StreamUnsupported):
                await stream.update("Hello")
            assert channel.open_stream(DM) is None

    async def test_a_blocked_user_ends_that_stream_only(self, tg: FakeTelegram) -> None:
        tg.fail_next("sendMessageDraft", 403)
        async with telegram(tg) as channel:
            stream = channel.open_stream(DM)
            assert stream is not None
            with pytest.raises(StreamUnsupported):
                await stream.update("Hello")
            again = channel.open_stream(DM)
            assert again is not None
            await again.update("Hello")
        assert draft_texts(tg) == [["Hello"]]

    async def test_a_later_refusal_is_quiet(self, tg: FakeTelegram) -> None:
        async with telegram(tg) as channel:
            stream = channel.open_stream(DM)
            assert stream is not None
            await stream.update("one")
            tg.fail_next("sendMessageDraft", 400, "Bad Request: something odd")
            await stream.update("one two")  # no StreamUnsupported after the first draft
            await stream.update("one two three")
            assert channel.open_stream(DM) is not None
        assert draft_texts(tg) == [["one"]]

    async def test_429_skips_previews_while_held(self, tg: FakeTelegram) -> None:
        async with telegram(tg) as channel:
            stream = channel.open_stream(DM)
            assert stream is not None
            await stream.update("one")
            tg.fail_next("sendMessageDraft", 429, retry_after=5)
            await stream.update("one two")  # refused: no error, the chat is held
            assert channel.pacer.held_for(DM.chat_id) > 4
            await stream.update("one two three")  # held: not even tried
        assert len(tg.calls_of("sendMessageDraft")) == 2
        assert draft_texts(tg) == [["one"]]

    async def test_discard_without_marker_sends_nothing(self, tg: FakeTelegram) -> None:
        async with telegram(tg) as channel:
            stream = channel.open_stream(DM)
            assert stream is not None
            await stream.update("partial")
            await stream.discard()
            await stream.update("more")
        assert draft_texts(tg) == [["partial"]]
        assert not tg.calls_of("sendMessage")

    async def test_discard_with_marker_keeps_what_was_shown(self, tg: FakeTelegram) -> None:
        async with telegram(tg) as channel:
            stream = channel.open_stream(DM, reply_to="77")
            assert stream is not None
            await stream.update("Hello <wor")
            await stream.discard(marker=" (stopped)")
            await stream.discard(marker=" (stopped)")  # once only
            unseen = channel.open_stream(DM)
            assert unseen is not None
            await unseen.discard(marker=" (stopped)")  # nothing was shown: nothing to keep
        (kept,) = tg.sent
        assert kept["text"] == "Hello <wor (stopped)"
        assert "parse_mode" not in kept
        assert kept["reply_parameters"]["message_id"] == 77
        assert tg.message_history[(42, kept["_message_id"])] == ["Hello <wor (stopped)"]

    async def test_a_marker_interrupted_by_429_is_completed_once(self, tg: FakeTelegram) -> None:
        shown = "word " * 700 + "\n" + "more " * 600  # two messages' worth
        async with telegram(tg) as channel:
            stream = channel.open_stream(DM)
            assert stream is not None
            await stream.update(shown)
            tg.fail_next("sendMessage", 429, retry_after=1, match=lambda p: "more" in p["text"])
            with pytest.raises(RetryAfter):
                await stream.discard(marker=" (stopped)")
            await stream.discard(marker=" (stopped)")
        texts = tg.texts()
        assert len(texts) == 2
        assert (" ".join(texts)).split() == (shown + " (stopped)").split()
