"""channels/zalo/_types.py: typed views of the Zalo Bot API's JSON, parsed tolerantly."""

from __future__ import annotations

from typing import Any

import pytest

from channels.zalo._types import (
    BotInfo,
    SentMessage,
    WebhookInfo,
    ZaloEvent,
    ZaloUser,
    parse_bot_info,
    parse_message,
    parse_sent_message,
    parse_update,
    parse_updates,
    parse_webhook_info,
)


def message(**fields: Any) -> dict[str, Any]:
    return {
        "message_id": "m1",
        "from": {"id": "u1", "display_name": "Lan"},
        "chat": {"id": "c1", "chat_type": "PRIVATE"},
        **fields,
    }


def test_event_names() -> None:
    assert ZaloEvent("message.text.received") is ZaloEvent.TEXT
    assert ZaloEvent.UNSUPPORTED.value == "message.unsupported.received"


class TestSmallResults:
    def test_bot_info(self) -> None:
        info = parse_bot_info(
            {"id": 42, "account_name": "bot.x", "name": "Bot X", "can_join_groups": 1, "new": 1}
        )
        assert info == BotInfo(
            id="42", account_name="bot.x", display_name="Bot X", can_join_groups=True
        )

    def test_bot_info_prefers_display_name(self) -> None:
        assert parse_bot_info({"id": "b", "display_name": "D", "name": "N"}).display_name == "D"

    @pytest.mark.parametrize("result", [None, [], "oops", 3])
    def test_bot_info_of_a_non_object_is_empty(self, result: Any) -> None:
        assert parse_bot_info(result) == BotInfo(id="")

    def test_sent_message(self) -> None:
        assert parse_sent_message({"message_id": 17, "date": "1700000000000"}) == SentMessage(
            "17", 1_700_000_000_000
        )
        assert parse_sent_message({"message_id": "m", "date": "soon"}) == SentMessage("m", None)
        assert parse_sent_message({"date": True}) == SentMessage("", None)
        assert parse_sent_message(None) == SentMessage("")

    def test_webhook_info(self) -> None:
        assert parse_webhook_info({"url": "https://x", "updated_at": 5}) == WebhookInfo(
            "https://x", 5
        )
        assert parse_webhook_info({"url": 3}) == WebhookInfo("3", None)
        assert parse_webhook_info([]) == WebhookInfo("")


class TestParseMessage:
    def test_a_text_message(self) -> None:
        msg = parse_message(message(text="xin chào", date=1700000000123))
        assert msg is not None
        assert (msg.message_id, msg.chat_id, msg.chat_type) == ("m1", "c1", "PRIVATE")
        assert msg.sender == ZaloUser(id="u1", display_name="Lan", is_bot=False)
        assert msg.text == "xin chào" and msg.date == 1700000000123
        assert msg.photo is None and msg.mention_ids == () and msg.reply_to_sender_id is None

    def test_numeric_ids_become_strings(self) -> None:
        msg = parse_message(message(message_id=7, **{"from": {"id": 12.0}, "chat": {"id": 99}}))
        assert msg is not None
        assert (msg.message_id, msg.sender.id, msg.chat_id) == ("7", "12", "99")

    def test_a_fractional_number_keeps_its_fraction(self) -> None:
        msg = parse_message(message(message_id=1.5))
        assert msg is not None and msg.message_id == "1.5"

    def test_booleans_are_not_ids(self) -> None:
        assert parse_message(message(chat={"id": True})) is None

    @pytest.mark.parametrize(
        "data",
        [None, "text", [], message(chat={}), message(**{"from": {}}), message(chat="c1")],
    )
    def test_without_chat_or_sender_there_is_no_message(self, data: Any) -> None:
        assert parse_message(data) is None

    def test_the_chat_type_defaults_to_private_and_is_upper_case(self) -> None:
        assert parse_message(message(chat={"id": "c"})).chat_type == "PRIVATE"  # type: ignore[union-attr]
        assert parse_message(message(chat={"id": "c", "chat_type": "group"})).chat_type == "GROUP"  # type: ignore[union-attr]

    def test_sender_name_bot_flag_and_media(self) -> None:
        msg = parse_message(
            message(
                **{"from": {"id": "u", "name": "Minh", "is_bot": True}},
                photo_url="https://img/1.jpg",
                caption="look",
                sticker="st",
                url="https://link",
                voice_url="https://voice",
            )
        )
        assert msg is not None
        assert msg.sender == ZaloUser("u", "Minh", True)
        assert (msg.photo, msg.caption, msg.sticker, msg.url, msg.voice_url) == (
            "https://img/1.jpg",
            "look",
            "st",
            "https://link",
            "https://voice",
        )

    def test_photo_wins_over_photo_url(self) -> None:
        msg = parse_message(message(photo="p", photo_url="q"))
        assert msg is not None and msg.photo == "p"

    def test_reply_and_quote_name_the_replied_sender(self) -> None:
        replied = parse_message(message(reply_to_message={"from": {"id": "bot-1"}}))
        quoted = parse_message(message(quote={"from": {"id": 5}}))
        assert replied is not None and replied.reply_to_sender_id == "bot-1"
        assert quoted is not None and quoted.reply_to_sender_id == "5"

    def test_mentions_by_id_or_user_id_skipping_junk(self) -> None:
        msg = parse_message(
            message(mentions=[{"id": "a"}, {"user_id": 2}, "junk", {"name": "x"}, {"id": None}])
        )
        assert msg is not None and msg.mention_ids == ("a", "2")

    def test_mentions_that_are_not_a_list_are_none(self) -> None:
        msg = parse_message(message(mentions={"id": "a"}))
        assert msg is not None and msg.mention_ids == ()

    def test_a_non_string_text_is_dropped(self) -> None:
        msg = parse_message(message(text={"rich": True}))
        assert msg is not None and msg.text is None


class TestParseUpdate:
    def test_bare_and_wrapped(self) -> None:
        bare = {"event_name": "message.text.received", "message": message(text="hi")}
        for data in (bare, {"ok": True, "result": bare}):
            update = parse_update(data)
            assert update is not None and update.event_name == ZaloEvent.TEXT
            assert update.message is not None and update.message.text == "hi"
            assert update.raw == bare

    def test_an_unknown_event_keeps_its_name(self) -> None:
        update = parse_update({"event_name": "message.new_kind.received", "message": None})
        assert update is not None and update.event_name == "message.new_kind.received"
        assert update.message is None

    @pytest.mark.parametrize(
        "data", [None, [], {}, {"event_name": 5}, {"ok": True, "result": []}, {"result": {}}]
    )
    def test_no_event(self, data: Any) -> None:
        assert parse_update(data) is None

    def test_updates_from_one_object_a_list_or_nothing(self) -> None:
        one = {"event_name": "message.text.received", "message": message(text="a")}
        two = {"event_name": "message.sticker.received", "message": message(sticker="s")}
        assert [u.event_name for u in parse_updates(one)] == [ZaloEvent.TEXT]
        assert [u.event_name for u in parse_updates([one, "junk", {}, two])] == [
            ZaloEvent.TEXT,
            ZaloEvent.STICKER,
        ]
        assert parse_updates(None) == [] and parse_updates({}) == [] and parse_updates([]) == []
