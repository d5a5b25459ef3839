"""channels/telegram/_normalize.py: updates to InboundMessage, entities to Markdown, skips."""

from __future__ import annotations

from typing import Any

import pytest
from telegram import Update

from channels import MEDIA_GROUP, Attachment, ChatType, InboundMessage
from channels.telegram import BotIdentity, normalize_update
from channels.telegram._normalize import Skipped

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


SIZES: list[dict[str, Any]] = [
    {"file_id": "small", "file_unique_id": "s", "width": 90, "height": 67, "file_size": 900},
    {"file_id": "big", "file_unique_id": "b", "width": 1280, "height": 960, "file_size": 9000},
]


class TestPhotos:
    def test_the_largest_size_becomes_an_attachment_and_the_caption_the_text(self) -> None:
        msg = normalized(None, photo=SIZES, caption="what is this?")
        assert msg.text == "what is this?"
        assert msg.attachments == (Attachment("image", "big", "photo_1.jpg", "image/jpeg", 9000),)

    def test_a_photo_without_caption_is_not_skipped(self) -> None:
        msg = normalized(None, photo=SIZES)
        assert msg.text == "" and len(msg.attachments) == 1

    def test_a_reply_to_a_photo_quotes_it(self) -> None:
        photo = {
            "message_id": 5,
            "date": 0,
            "chat": {"id": 42, "type": "private"},
            "from": {"id": 7, "is_bot": False, "first_name": "Bo"},
            "photo": SIZES,
        }
        msg = normalized("nice", reply_to_message=photo)
        assert msg.text == '[Replying to Bo: "[photo]"]\nnice'
        assert msg.attachments == ()  # the replied-to photo is not fetched again


class TestFilesAndVoice:
    def test_a_voice_message_is_audio_with_its_duration(self) -> None:
        voice = {"file_id": "v1", "file_unique_id": "v", "duration": 14, "file_size": 3000}
        msg = normalized(None, voice=voice)
        assert msg.text == ""
        assert msg.attachments == (
            Attachment("audio", "v1", "voice_1.ogg", "audio/ogg", 3000, duration=14, voice=True),
        )

    def test_an_audio_file_keeps_its_name(self) -> None:
        audio = {
            "file_id": "a1",
            "file_unique_id": "a",
            "duration": 185,
            "file_name": "demo.mp3",
            "mime_type": "audio/mpeg",
        }
        (attachment,) = normalized(None, audio=audio, caption="which song?").attachments
        assert attachment == Attachment("audio", "a1", "demo.mp3", "audio/mpeg", 0, duration=185)

    @pytest.mark.parametrize(
        ("mime", "kind"),
        [("application/pdf", "document"), ("image/png", "image"), ("audio/mpeg", "audio")],
    )
    def test_a_document_is_treated_by_its_mime_type(self, mime: str, kind: str) -> None:
        document = {
            "file_id": "d1",
            "file_unique_id": "d",
            "file_name": "x",
            "mime_type": mime,
            "file_size": 10,
        }
        msg = normalized(None, document=document, caption="see")
        assert msg.text == "see"
        assert msg.attachments == (Attachment(kind, "d1", "x", mime, 10),)

    def test_a_gif_stays_a_note(self) -> None:
        gif = {"file_id": "g", "file_unique_id": "g", "width": 1, "height": 1, "duration": 1}
        msg = normalized(None, animation=gif, document={"file_id": "g", "file_unique_id": "g"})
        assert msg.attachments == ()
        assert msg.text.startswith("[The user sent a GIF;")

    def test_a_reply_to_a_voice_message_names_it(self) -> None:
        voice = {
            "message_id": 5,
            "date": 0,
            "chat": {"id": 42, "type": "private"},
            "from": {"id": 7, "is_bot": False, "first_name": "Bo"},
            "voice": {"file_id": "v", "file_unique_id": "v", "duration": 3},
        }
        msg = normalized("ok", reply_to_message=voice)
        assert msg.text == '[Replying to Bo: "[voice message]"]\nok'

    def test_an_album_part_carries_its_media_group(self) -> None:
        msg = normalized(None, photo=SIZES, media_group_id="13579")
        assert msg.metadata[MEDIA_GROUP] == "13579"
        assert MEDIA_GROUP not in normalized(None, photo=SIZES).metadata
