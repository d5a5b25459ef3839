"""Telegram pieces without the network: normalization, entities, pacing, error translation."""

from __future__ import annotations

from typing import Any

import pytest
from telegram import Update
from telegram import error as tg

from bot.config import parse_config
from channels import BadRequest, ChatType, Forbidden, InboundMessage, RetryAfter
from channels.telegram import BotIdentity, SendPacer, normalize_update, translate_telegram_errors
from channels.telegram._errors import ChatMigrated, TelegramTimedOut, TelegramUnavailable
from channels.telegram._normalize import Skipped
from channels.telegram._ratelimit import RateLimits
from channels.telegram._text import html_to_plain, split_units

ME = BotIdentity(999, "loopgate_bot")


def update(text: str | None, entities: list[dict[str, Any]] | None = None, **msg: Any) -> Update:
    message: dict[str, Any] = {
        "message_id": 1,
        "date": 0,
        "chat": msg.pop("chat", {"id": 42, "type": "private"}),
        "from": msg.pop("sender", {"id": 42, "is_bot": False, "first_name": "Ann"}),
        **msg,
    }
    if text is not None:
        message["text"] = text
    if entities:
        message["entities"] = entities
    return Update.de_json({"update_id": 1, "message": message}, None)


def normalized(*args: Any, **kw: Any) -> InboundMessage:
    result = normalize_update(update(*args, **kw), ME)
    assert isinstance(result, InboundMessage), result
    return result


class TestEntities:
    def test_formatting_becomes_markdown_with_utf16_offsets(self) -> None:
        text = "😀 bold italic code link"
        entities = [
            {"type": "bold", "offset": 3, "length": 4},
            {"type": "italic", "offset": 8, "length": 6},
            {"type": "code", "offset": 15, "length": 4},
            {"type": "text_link", "offset": 20, "length": 4, "url": "https://x.test"},
        ]
        assert normalized(text, entities).text == (
            "😀 **bold** *italic* `code` [link](https://x.test)"
        )

    def test_nested_pre_and_blockquote(self) -> None:
        text = "big bold\nx = 1\nq1\nq2"
        entities = [
            {"type": "bold", "offset": 0, "length": 8},
            {"type": "italic", "offset": 4, "length": 4},
            {"type": "pre", "offset": 9, "length": 6, "language": "python"},
            {"type": "blockquote", "offset": 15, "length": 5},
        ]
        assert normalized(text, entities).text == (
            "**big *bold***\n```python\nx = 1\n```\n> q1\n> q2"
        )

    def test_spaces_stay_outside_markers(self) -> None:
        assert normalized("a b c", [{"type": "bold", "offset": 1, "length": 3}]).text == (
            "a **b** c"
        )


class TestNormalize:
    def test_dm_is_addressed(self) -> None:
        msg = normalized("hi")
        assert msg.chat.chat_type is ChatType.DIRECT and msg.addressed
        assert msg.metadata["bot_username"] == "loopgate_bot"
        assert (msg.sender.id, msg.sender.name) == ("42", "Ann")

    def test_group_needs_mention_and_handle_is_stripped(self) -> None:
        group = {"id": -1001, "type": "supergroup", "title": "T"}
        assert not normalized("hello", chat=group).addressed
        mention = [{"type": "mention", "offset": 6, "length": 13}]
        msg = normalized("hello @LoopGate_bot  there", mention, chat=group)
        assert msg.addressed and msg.text == "hello there"
        other = [{"type": "mention", "offset": 6, "length": 6}]
        assert not normalized("hello @other", other, chat=group).addressed

    def test_command_for_this_bot_or_another(self) -> None:
        group = {"id": -1001, "type": "supergroup"}
        ours = normalized(
            "/stop@loopgate_bot", [{"type": "bot_command", "offset": 0, "length": 18}], chat=group
        )
        assert ours.addressed and ours.text == "/stop@loopgate_bot"
        theirs = normalized(
            "/stop@other_bot", [{"type": "bot_command", "offset": 0, "length": 15}], chat=group
        )
        assert not theirs.addressed

    def test_anonymous_admin_and_hidden_forward(self) -> None:
        group = {"id": -1001, "type": "supergroup", "title": "T"}
        msg = normalized(
            "x",
            chat=group,
            sender={"id": 1087968824, "is_bot": True, "first_name": "Group"},
            sender_chat=group,
            forward_origin={"type": "hidden_user", "date": 0, "sender_user_name": "Zed"},
        )
        assert msg.sender_is_admin
        assert msg.text == "[Forwarded from Zed]\nx"

    def test_partial_quote_is_preferred(self) -> None:
        reply = {
            "message_id": 0,
            "date": 0,
            "chat": {"id": 42, "type": "private"},
            "from": {"id": 7, "is_bot": False, "first_name": "Bo"},
            "text": "a b c d",
        }
        msg = normalized("why?", reply_to_message=reply, quote={"text": "c d", "position": 4})
        assert msg.reply_to_text == "c d"
        assert msg.text == '[Replying to Bo: "c d"]\nwhy?'

    @pytest.mark.parametrize(
        ("fields", "reason"),
        [
            (
                {"new_chat_members": [{"id": 5, "is_bot": False, "first_name": "N"}]},
                "service_message",
            ),
            ({"chat": {"id": -1, "type": "channel"}}, "channel_post"),
            ({"sender": {"id": 999, "is_bot": True, "first_name": "me"}}, "own_message"),
        ],
    )
    def test_skipped(self, fields: dict[str, Any], reason: str) -> None:
        text = None if "new_chat_members" in fields else "x"
        result = normalize_update(update(text, **fields), ME)
        assert isinstance(result, Skipped) and result.reason == reason

    def test_migration_is_reported(self) -> None:
        result = normalize_update(
            update(None, chat={"id": -5, "type": "group"}, migrate_to_chat_id=-1005), ME
        )
        assert isinstance(result, Skipped) and result.migrate_to_chat_id == -1005


class TestPacer:
    async def test_burst_then_sustained_rate(self) -> None:
        now = [0.0]
        pacer = SendPacer(RateLimits(chat_per_second=1, chat_burst=3), clock=lambda: now[0])
        for _ in range(3):  # a normal exchange is never delayed
            assert await pacer.acquire("c", group=False) == 0
        bucket = pacer._chats["c"]
        assert bucket.delay(now[0]) == pytest.approx(1.0)
        now[0] += 1.0
        assert await pacer.acquire("c", group=False) == 0

    async def test_group_budget_is_per_minute(self) -> None:
        now = [0.0]
        limits = RateLimits(chat_per_second=100, chat_burst=100, group_per_minute=20, group_burst=5)
        pacer = SendPacer(limits, clock=lambda: now[0])
        for _ in range(5):
            await pacer.acquire("g", group=True)
        assert pacer._groups["g"].delay(now[0]) == pytest.approx(3.0)

    async def test_off_never_waits_but_a_hold_does(self) -> None:
        now = [0.0]
        pacer = SendPacer(None, clock=lambda: now[0])
        for _ in range(100):
            assert await pacer.acquire("c", group=True) == 0
        pacer.hold("c", 0.05)
        now[0] = 0.1  # the clock moves while we wait: acquire sleeps, then passes
        assert await pacer.acquire("c", group=False) == 0


class TestErrors:
    @pytest.mark.parametrize(
        ("raised", "expected"),
        [
            (tg.RetryAfter(3), RetryAfter),
            (tg.Forbidden("Forbidden: bot was blocked by the user"), Forbidden),
            (tg.BadRequest("Bad Request: can't parse entities"), BadRequest),
            (tg.ChatMigrated(-100), ChatMigrated),
            (tg.TimedOut(), TelegramTimedOut),
            (tg.NetworkError("Bad Gateway"), TelegramUnavailable),
        ],
    )
    def test_translation(self, raised: Exception, expected: type[Exception]) -> None:
        with pytest.raises(expected) as info, translate_telegram_errors():
            raise raised
        assert info.value.__cause__ is raised
        if isinstance(info.value, RetryAfter):
            assert info.value.retry_after == 3


def test_plain_fallback_and_utf16_split() -> None:
    assert html_to_plain("<b>a &lt; b</b> &amp; <a href='x'>c</a>") == "a < b & c"
    pieces = split_units("😀" * 10, 6)
    assert "".join(pieces) == "😀" * 10
    assert all(len(p.encode("utf-16-le")) // 2 <= 6 for p in pieces)


def test_config_keys() -> None:
    config = parse_config(
        {"channels": {"telegram": {"enabled": True, "token": "t", "rate_limit": False}}}, {}
    )
    assert config.channels.telegram.rate_limit == "off"
    default = parse_config({}, {}).channels.telegram
    assert default.allowed_updates == ["message"]
    assert default.rate_limit != "off" and default.rate_limit.per_group_per_minute == 20
