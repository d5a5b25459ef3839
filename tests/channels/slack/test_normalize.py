"""channels/slack/_normalize.py: mentions, chat types, file notes, bots and emoji names."""

from __future__ import annotations

from channels import ChatType
from channels.slack._normalize import (
    chat_type_of,
    file_notes,
    is_from_bot,
    message_text,
    slack_emoji_name,
    strip_mention,
)


class TestNormalize:
    def test_mentions_are_stripped(self) -> None:
        assert strip_mention("<@UBOT> /stop", "UBOT") == "/stop"
        assert strip_mention("hey <@UBOT|loopgate>: look", "UBOT") == "hey look"
        assert strip_mention("ask <@UOTHER>", "UBOT") == "ask <@UOTHER>"

    def test_chat_types(self) -> None:
        assert chat_type_of({"channel_type": "im"}, "D1") is ChatType.DIRECT
        assert chat_type_of({}, "D1") is ChatType.DIRECT  # app_mention has no channel_type
        assert chat_type_of({"channel_type": "mpim"}, "G1") is ChatType.GROUP
        assert chat_type_of({"channel_type": "channel"}, "C1") is ChatType.GROUP

    def test_files_become_notes(self) -> None:
        event = {"text": "", "files": [{"name": "a.png", "mimetype": "image/png"}]}
        assert file_notes(event) == [
            "[The user attached a file that can't be read here: a.png (image/png)]"
        ]
        assert message_text(event, "UBOT").startswith("[The user attached")

    def test_bots_are_recognised(self) -> None:
        assert is_from_bot({"bot_id": "B1"}, "UBOT", "BBOT")
        assert is_from_bot({"user": "UBOT"}, "UBOT", "BBOT")
        assert is_from_bot({"subtype": "bot_message"}, "UBOT", "BBOT")
        assert not is_from_bot({"user": "UALICE"}, "UBOT", "BBOT")

    def test_emoji_names(self) -> None:
        assert slack_emoji_name("👀") == "eyes"
        assert slack_emoji_name("👨‍💻") == "male-technologist"
        assert slack_emoji_name(":tada:") == "tada"
