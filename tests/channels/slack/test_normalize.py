"""channels/slack/_normalize.py: mentions, chat types, file notes, bots and emoji names."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from channels import Attachment, ChatType
from channels.slack._normalize import (
    chat_type_of,
    file_attachments,
    file_notes,
    is_from_bot,
    message_text,
    slack_emoji_name,
    slack_file_host,
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


class TestFiles:
    HOSTED: ClassVar[dict[str, Any]] = {
        "id": "F1",
        "name": "q3.pdf",
        "mimetype": "application/pdf",
        "size": 1234,
        "mode": "hosted",
        "url_private": "https://files.slack.com/files-pri/T1-F1/q3.pdf",
        "url_private_download": "https://files.slack.com/files-pri/T1-F1/download/q3.pdf",
    }

    def test_a_hosted_file_is_an_attachment_fetched_by_its_download_url(self) -> None:
        (attachment,) = file_attachments({"files": [self.HOSTED]})
        assert attachment == Attachment(
            "document",
            "https://files.slack.com/files-pri/T1-F1/download/q3.pdf",
            "q3.pdf",
            "application/pdf",
            1234,
        )
        assert file_notes({"files": [self.HOSTED]}) == []

    def test_a_clip_is_a_voice_message_with_its_duration(self) -> None:
        clip = {**self.HOSTED, "mimetype": "audio/webm", "subtype": "slack_audio"}
        (attachment,) = file_attachments({"files": [{**clip, "duration_ms": 14_400}]})
        assert (attachment.kind, attachment.duration, attachment.voice) == ("audio", 14, True)

    def test_external_and_deleted_files_stay_notes(self) -> None:
        external = {**self.HOSTED, "mode": "external"}
        gone = {"id": "F2", "mode": "tombstone", "name": "x"}
        event = {"files": [external, gone, "junk"]}
        assert file_attachments(event) == ()
        assert len(file_notes(event)) == 2

    @pytest.mark.parametrize(
        ("url", "ok"),
        [
            ("https://files.slack.com/files-pri/x", True),
            ("https://slack.com/x", True),
            ("http://files.slack.com/x", False),  # never the token in clear
            ("https://evil-slack.com/x", False),
            ("https://files.slack.com.evil.io/x", False),
            ("http://127.0.0.1:8000/files-pri/x", True),  # the configured API base's host
            ("http://127.0.0.1:8001/files-pri/x", False),
        ],
    )
    def test_the_token_goes_only_to_slack_or_the_api_base(self, url: str, ok: bool) -> None:
        assert slack_file_host(url, "http://127.0.0.1:8000/api/") is ok
