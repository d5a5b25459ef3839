"""channels/types.py: the platform-neutral message types every adapter shares."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from channels.types import Capabilities, ChatRef, ChatType, InboundMessage, MessageRef, Sender


def test_chat_types_are_their_names() -> None:
    assert ChatType("direct") is ChatType.DIRECT and ChatType.GROUP.value == "group"
    assert {t.value for t in ChatType} == {"direct", "group"}


class TestChatRef:
    def test_defaults_to_a_direct_chat_without_thread(self) -> None:
        chat = ChatRef("slack", "D1")
        assert chat.chat_type is ChatType.DIRECT and chat.thread_id is None

    def test_is_a_value(self) -> None:
        a = ChatRef("slack", "C1", ChatType.GROUP, "1.5")
        assert a == ChatRef("slack", "C1", ChatType.GROUP, "1.5")
        assert a != ChatRef("slack", "C1", ChatType.GROUP, "2.5")  # another thread, another chat
        assert len({a, ChatRef("slack", "C1", ChatType.GROUP, "1.5")}) == 1
        with pytest.raises(dataclasses.FrozenInstanceError):
            a.chat_id = "C2"  # type: ignore[misc]

    def test_message_ref_is_a_value_too(self) -> None:
        chat = ChatRef("telegram", "42")
        assert MessageRef(chat, "7") == MessageRef(ChatRef("telegram", "42"), "7")
        assert {MessageRef(chat, "7"): 1}[MessageRef(chat, "7")] == 1
        with pytest.raises(dataclasses.FrozenInstanceError):
            MessageRef(chat, "7").message_id = "8"  # type: ignore[misc]


def test_sender_defaults() -> None:
    assert Sender("u1") == Sender(id="u1", name="", is_bot=False)


def test_capabilities_defaults() -> None:
    caps = Capabilities()
    assert (caps.max_chars, caps.formatting) == (4096, "markdown")
    assert caps.typing and caps.reactions and not caps.threads and not caps.edits
    assert Capabilities(max_chars=2000, formatting="plain").max_chars == 2000


class TestInboundMessage:
    def message(self, **kw: Any) -> InboundMessage:
        return InboundMessage(
            chat=ChatRef("zalo", "c1"), message_id="m1", sender=Sender("u1"), text="hi", **kw
        )

    def test_defaults(self) -> None:
        msg = self.message()
        assert msg.addressed is True and msg.sender_is_admin is False
        assert msg.reply_to_text is None and msg.metadata == {}

    def test_received_now_in_utc(self) -> None:
        before = datetime.now(UTC)
        msg = self.message()
        assert msg.received_at.tzinfo is not None
        assert before <= msg.received_at <= datetime.now(UTC) + timedelta(seconds=1)

    def test_each_message_has_its_own_metadata(self) -> None:
        a, b = self.message(), self.message()
        a.metadata["k"] = "v"
        assert b.metadata == {}

    def test_dedupe_key_names_channel_chat_and_message(self) -> None:
        assert self.message().dedupe_key == "zalo:c1:m1"
        threaded = InboundMessage(
            chat=ChatRef("slack", "C1", ChatType.GROUP, "9.9"),
            message_id="1.2",
            sender=Sender("U1"),
            text="x",
        )
        assert threaded.dedupe_key == "slack:C1:1.2"  # the thread does not change the message

    def test_is_mutable(self) -> None:
        msg = self.message()
        msg.text = "edited"
        assert msg.text == "edited"
