"""channels/telegram/_sending.py: sending, editing and deleting under Telegram's rules, against
the fake Bot API with python-telegram-bot's real Bot.

429 holds the chat and raises; 5xx is retried; a timed-out send is not (it may have arrived) but
a timed-out edit is; HTML Telegram can't parse goes again as plain text; "message is too long"
is re-split; a migrated group is followed; 403 is raised.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from telegram import Bot

from channels import BadRequest, ChatRef, ChatType, Forbidden, MessageRef, RetryAfter
from channels.telegram._aiohttp_request import AiohttpRequest
from channels.telegram._errors import TelegramTimedOut, TelegramUnavailable
from channels.telegram._migrations import ChatMigrations
from channels.telegram._ratelimit import SendPacer
from channels.telegram._sending import MAX_TEXT_UNITS, SEND_ATTEMPTS, TelegramSender
from tests.channels.telegram.test_aiohttp_request import make_bot
from tests.fakes.telegram_server import FakeTelegram
from tests.inbound_support import MemoryState

DM = ChatRef("telegram", "42", ChatType.DIRECT)
TOPIC = ChatRef("telegram", "-100777", ChatType.GROUP, "9")
BASIC_GROUP = ChatRef("telegram", "-555", ChatType.GROUP)
NEW_GROUP = -100555


@dataclass
class Sending:
    sender: TelegramSender
    state: MemoryState
    tg: FakeTelegram


async def started(tg: FakeTelegram, bot: Bot) -> AsyncIterator[Sending]:
    state = MemoryState()
    async with bot:
        sender = TelegramSender(
            bot, SendPacer(None), ChatMigrations(state, "telegram"), retry_backoff=0.01
        )
        yield Sending(sender, state, tg)


@pytest.fixture
async def s(tg: FakeTelegram) -> AsyncIterator[Sending]:
    async for sending in started(tg, make_bot(tg)):
        yield sending


@pytest.fixture
async def impatient(tg: FakeTelegram) -> AsyncIterator[Sending]:
    """A sender whose calls give up waiting for an answer after 0.3 s."""
    bot = make_bot(tg, AiohttpRequest(connection_pool_size=8, read_timeout=0.3))
    async for sending in started(tg, bot):
        yield sending


class TestSend:
    async def test_a_message_in_a_topic_replying_to_another(
        self, s: Sending, tg: FakeTelegram
    ) -> None:
        [ref] = await s.sender.send(TOPIC, "<b>hi</b>", "77", "HTML")
        [params] = tg.sent
        assert ref == MessageRef(TOPIC, str(params["_message_id"]))
        assert params["chat_id"] == -100777 and params["message_thread_id"] == 9
        assert params["reply_parameters"]["message_id"] == 77
        assert params["reply_parameters"]["allow_sending_without_reply"] is True
        assert tg.visible(-100777, int(ref.message_id)) == "hi"

    async def test_a_reply_to_an_id_that_is_no_message_id_is_no_reply(
        self, s: Sending, tg: FakeTelegram
    ) -> None:
        await s.sender.send(DM, "plain", "command:1", None)
        [params] = tg.sent
        assert "reply_parameters" not in params and "message_thread_id" not in params
        assert "parse_mode" not in params

    async def test_html_telegram_cannot_parse_goes_again_as_plain_text(
        self, s: Sending, tg: FakeTelegram
    ) -> None:
        [ref] = await s.sender.send(DM, "<b>bold &amp; <i>unclosed</b>", None, "HTML")
        first, second = tg.calls_of("sendMessage")
        assert first.params["parse_mode"] == "HTML" and "_message_id" not in first.params
        assert "parse_mode" not in second.params
        assert tg.visible(42, int(ref.message_id)) == "bold & unclosed"

    async def test_plain_text_is_not_sent_twice_on_a_parse_error(
        self, s: Sending, tg: FakeTelegram
    ) -> None:
        tg.fail_next("sendMessage", 400, "Bad Request: can't parse entities: odd")
        with pytest.raises(BadRequest, match=r"(?i)can't parse entities"):
            await s.sender.send(DM, "text", None, None)
        assert len(tg.calls_of("sendMessage")) == 1

    async def test_other_bad_requests_are_raised_at_once(
        self, s: Sending, tg: FakeTelegram
    ) -> None:
        tg.fail_next("sendMessage", 400, "Bad Request: chat not found")
        with pytest.raises(BadRequest, match=r"(?i)chat not found"):
            await s.sender.send(DM, "<b>x</b>", None, "HTML")
        assert len(tg.calls_of("sendMessage")) == 1

    async def test_a_message_too_long_is_split_smaller(self, s: Sending, tg: FakeTelegram) -> None:
        line = "é" * 99 + "𝔸"  # the astral letter counts two UTF-16 units
        text = "<b>" + "\n".join([line] * 45) + "</b>"  # 4500 characters, 4545 units
        assert len(text) < MAX_TEXT_UNITS * 1.2
        refs = await s.sender.send(TOPIC, text, "12", "HTML")
        accepted = tg.sent
        assert len(refs) == len(accepted) >= 3
        assert all("parse_mode" not in p for p in accepted)
        assert all(len(p["text"].encode("utf-16-le")) // 2 <= MAX_TEXT_UNITS // 2 for p in accepted)
        assert "\n".join(p["text"] for p in accepted).split("\n") == [line] * 45
        assert accepted[0]["reply_parameters"]["message_id"] == 12
        assert all("reply_parameters" not in p for p in accepted[1:])
        assert all(p["message_thread_id"] == 9 for p in accepted)

    async def test_a_migrated_group_is_followed_and_remembered(
        self, s: Sending, tg: FakeTelegram
    ) -> None:
        tg.fail_next("sendMessage", 400, "Bad Request: migrated", migrate_to_chat_id=NEW_GROUP)
        [ref] = await s.sender.send(BASIC_GROUP, "hello", None, None)
        assert [c.params["chat_id"] for c in tg.calls_of("sendMessage")] == [-555, NEW_GROUP]
        assert ref.chat == BASIC_GROUP and tg.visible(NEW_GROUP, int(ref.message_id)) == "hello"
        assert s.state.values[("telegram", "migrated:-555")] == str(NEW_GROUP)
        await s.sender.send(BASIC_GROUP, "again", None, None)
        assert tg.calls_of("sendMessage")[-1].params["chat_id"] == NEW_GROUP

    async def test_rate_limited_holds_the_chat_and_raises(
        self, s: Sending, tg: FakeTelegram
    ) -> None:
        tg.fail_next("sendMessage", 429, retry_after=30)
        with pytest.raises(RetryAfter) as raised:
            await s.sender.send(DM, "hi", None, None)
        assert raised.value.retry_after == 30
        assert 29 < s.sender.pacer.held_for("42") <= 30
        assert s.sender.pacer.held_for("43") == 0
        assert len(tg.calls_of("sendMessage")) == 1 and not tg.sent

    async def test_server_errors_are_retried(self, s: Sending, tg: FakeTelegram) -> None:
        tg.fail_next("sendMessage", 502, count=SEND_ATTEMPTS - 1)
        [ref] = await s.sender.send(DM, "hi", None, None)
        assert len(tg.calls_of("sendMessage")) == SEND_ATTEMPTS
        assert tg.visible(42, int(ref.message_id)) == "hi"

    async def test_server_errors_give_up_after_the_attempts(
        self, s: Sending, tg: FakeTelegram
    ) -> None:
        tg.fail_next("sendMessage", 500, count=SEND_ATTEMPTS)
        with pytest.raises(TelegramUnavailable):
            await s.sender.send(DM, "hi", None, None)
        assert len(tg.calls_of("sendMessage")) == SEND_ATTEMPTS and not tg.sent

    async def test_forbidden_is_raised_without_retry(self, s: Sending, tg: FakeTelegram) -> None:
        tg.fail_next("sendMessage", 403)
        with pytest.raises(Forbidden, match=r"(?i)blocked"):
            await s.sender.send(DM, "hi", None, None)
        assert len(tg.calls_of("sendMessage")) == 1

    async def test_a_timed_out_send_is_not_repeated(
        self, impatient: Sending, tg: FakeTelegram
    ) -> None:
        tg.delays["sendMessage"] = 1.0
        with pytest.raises(TelegramTimedOut):
            await impatient.sender.send(DM, "hi", None, None)
        await tg.wait_for(lambda: tg.sent)  # it did arrive
        assert len(tg.calls_of("sendMessage")) == 1


class TestEdit:
    async def test_edit_changes_the_text(self, s: Sending, tg: FakeTelegram) -> None:
        [ref] = await s.sender.send(DM, "one", None, None)
        await s.sender.edit_text(ref, "<i>two</i>")
        assert tg.message_history[(42, int(ref.message_id))] == ["one", "two"]
        [edit] = tg.calls_of("editMessageText")
        assert edit.params["parse_mode"] == "HTML"

    async def test_an_unchanged_text_counts_as_done(self, s: Sending, tg: FakeTelegram) -> None:
        [ref] = await s.sender.send(DM, "same", None, None)
        await s.sender.edit_text(ref, "same")
        assert len(tg.calls_of("editMessageText")) == 1

    async def test_html_it_cannot_parse_is_edited_in_as_plain_text(
        self, s: Sending, tg: FakeTelegram
    ) -> None:
        [ref] = await s.sender.send(DM, "one", None, None)
        await s.sender.edit_text(ref, "<b>two")
        assert tg.visible(42, int(ref.message_id)) == "two"
        assert [c.params.get("parse_mode") for c in tg.calls_of("editMessageText")] == [
            "HTML",
            None,
        ]

    async def test_a_missing_message_is_an_error(self, s: Sending) -> None:
        with pytest.raises(BadRequest, match=r"(?i)not found"):
            await s.sender.edit_text(MessageRef(DM, "99999"), "text")

    async def test_a_migrated_group_is_edited_where_it_lives_now(
        self, s: Sending, tg: FakeTelegram
    ) -> None:
        tg.fail_next("sendMessage", 400, "Bad Request: migrated", migrate_to_chat_id=NEW_GROUP)
        [ref] = await s.sender.send(BASIC_GROUP, "hello", None, None)
        await s.sender.edit_text(ref, "bye")
        assert tg.visible(NEW_GROUP, int(ref.message_id)) == "bye"

    async def test_a_rate_limited_edit_holds_the_chat(self, s: Sending, tg: FakeTelegram) -> None:
        [ref] = await s.sender.send(DM, "one", None, None)
        tg.fail_next("editMessageText", 429, retry_after=5)
        with pytest.raises(RetryAfter):
            await s.sender.edit_text(ref, "two")
        assert s.sender.pacer.held_for("42") > 4

    async def test_a_timed_out_edit_is_repeated(self, impatient: Sending, tg: FakeTelegram) -> None:
        [ref] = await impatient.sender.send(DM, "one", None, None)
        tg.delays["editMessageText"] = 1.0
        with pytest.raises(TelegramTimedOut):
            await impatient.sender.edit_text(ref, "two")
        assert len(tg.calls_of("editMessageText")) == SEND_ATTEMPTS


class TestDelete:
    async def test_delete(self, s: Sending, tg: FakeTelegram) -> None:
        [ref] = await s.sender.send(DM, "bye", None, None)
        assert await s.sender.delete_message(ref) is True
        assert tg.visible(42, int(ref.message_id)) is None

    async def test_a_refused_delete_is_false(self, s: Sending, tg: FakeTelegram) -> None:
        assert await s.sender.delete_message(MessageRef(DM, "99999")) is False
        tg.fail_next("deleteMessage", 403)
        assert await s.sender.delete_message(MessageRef(DM, "1")) is False

    async def test_an_id_that_is_no_message_id_is_not_asked(
        self, s: Sending, tg: FakeTelegram
    ) -> None:
        assert await s.sender.delete_message(MessageRef(DM, "draft:3")) is False
        assert not tg.calls_of("deleteMessage")

    async def test_a_rate_limited_delete_holds_the_chat(self, s: Sending, tg: FakeTelegram) -> None:
        tg.fail_next("deleteMessage", 429, retry_after=3)
        with pytest.raises(RetryAfter):
            await s.sender.delete_message(MessageRef(DM, "1"))
        assert s.sender.pacer.held_for("42") > 2

    async def test_server_errors_are_retried(self, s: Sending, tg: FakeTelegram) -> None:
        [ref] = await s.sender.send(DM, "bye", None, None)
        tg.fail_next("deleteMessage", 502)
        assert await s.sender.delete_message(ref) is True
        assert len(tg.calls_of("deleteMessage")) == 2


class TestDraft:
    async def test_a_draft_preview(self, s: Sending, tg: FakeTelegram) -> None:
        await s.sender.send_draft(DM, 7, "think")
        await s.sender.send_draft(DM, 7, "thinking")
        assert tg.drafts[(42, 7)] == ["think", "thinking"]

    async def test_a_rate_limited_draft_holds_the_chat(self, s: Sending, tg: FakeTelegram) -> None:
        tg.fail_next("sendMessageDraft", 429, retry_after=4)
        with pytest.raises(RetryAfter):
            await s.sender.send_draft(DM, 7, "x")
        assert s.sender.pacer.held_for("42") > 3

    async def test_a_draft_in_a_group_is_refused(self, s: Sending) -> None:
        with pytest.raises(BadRequest, match=r"(?i)textdraft_peer_invalid"):
            await s.sender.send_draft(TOPIC, 7, "x")
