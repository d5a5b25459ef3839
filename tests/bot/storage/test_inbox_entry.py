"""An inbox entry: its states, the stored JSON form of its message (round trip, NUL bytes,
defaults of older rows), and an entry read from its row."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

from bot.storage._inbox_entry import (
    ENDED,
    PENDING,
    InboxState,
    entry_of,
    message_from_json,
    message_to_json,
)
from bot.storage._sql import NUL_REPLACEMENT
from channels import Attachment, ChatRef, ChatType, InboundMessage, Sender

AT = datetime(2026, 12, 4, 12, 30, tzinfo=UTC)


def message(**fields: object) -> InboundMessage:
    base: dict[str, object] = {
        "chat": ChatRef("telegram", "-100", ChatType.GROUP, thread_id="7"),
        "message_id": "m1",
        "sender": Sender(id="u1", name="Ann", is_bot=False),
        "text": "hello",
        "received_at": AT,
    }
    return InboundMessage(**{**base, **fields})  # type: ignore[arg-type]


def test_every_state_is_pending_or_ended() -> None:
    assert set(PENDING) | set(ENDED) == set(InboxState)
    assert not set(PENDING) & set(ENDED)
    assert InboxState("queued") is InboxState.QUEUED


def test_round_trip_keeps_every_field() -> None:
    msg = message(
        addressed=False,
        sender_is_admin=True,
        reply_to_text="earlier",
        metadata={"k": "v"},
        sender=Sender(id="b9", name="", is_bot=True),
        attachments=(Attachment("image", "AgAD-file", "photo_1.jpg", "image/jpeg", 9000),),
    )
    assert message_from_json(message_to_json(msg)) == msg


def test_an_attachment_is_stored_as_its_file_id_only() -> None:
    photo = Attachment("image", "AgAD-file", "photo_1.jpg", "image/jpeg", 9000)
    assert message_to_json(message(attachments=(photo,)))["attachments"] == [
        {
            "kind": "image",
            "file_id": "AgAD-file",
            "name": "photo_1.jpg",
            "mime": "image/jpeg",
            "size": 9000,
        }
    ]


def test_a_voice_message_keeps_its_duration_and_kind() -> None:
    voice = Attachment("audio", "v1", "voice_1.ogg", "audio/ogg", 300, duration=14, voice=True)
    data = message_to_json(message(attachments=(voice,)))
    assert data["attachments"][0]["duration"] == 14 and data["attachments"][0]["voice"] is True
    assert message_from_json(data).attachments == (voice,)


def test_a_message_stored_before_attachments_existed_reads_without_any() -> None:
    data = message_to_json(message())
    del data["attachments"]
    assert message_from_json(data).attachments == ()


def test_json_form() -> None:
    data = message_to_json(message())
    assert data["chat"] == {
        "channel": "telegram",
        "chat_id": "-100",
        "chat_type": "group",
        "thread_id": "7",
    }
    assert data["received_at"] == "2026-12-04T12:30:00+00:00"
    assert data["reply_to_text"] is None and data["metadata"] == {}


def test_metadata_is_copied_not_shared() -> None:
    msg = message(metadata={"k": "v"})
    data = message_to_json(msg)
    data["metadata"]["k"] = "changed"
    assert msg.metadata == {"k": "v"}
    back = message_from_json(data)
    data["metadata"]["k"] = "again"
    assert back.metadata == {"k": "changed"}


def test_nul_bytes_are_replaced_as_postgres_needs() -> None:
    data = message_to_json(message(text="a\x00b", reply_to_text="\x00"))
    assert data["text"] == f"a{NUL_REPLACEMENT}b"
    assert data["reply_to_text"] == NUL_REPLACEMENT


def test_older_rows_without_the_optional_keys() -> None:
    data = {
        "chat": {"channel": "web", "chat_id": "c", "chat_type": "direct"},
        "message_id": "1",
        "sender": {"id": "u"},
        "text": "hi",
        "received_at": AT.isoformat(),
    }
    msg = message_from_json(data)
    assert msg.chat.thread_id is None and msg.chat.chat_type is ChatType.DIRECT
    assert (msg.sender.name, msg.sender.is_bot) == ("", False)
    assert msg.addressed is True and msg.sender_is_admin is False
    assert msg.reply_to_text is None and msg.metadata == {}
    assert message_from_json({**data, "metadata": None}).metadata == {}


def test_entry_of_a_row() -> None:
    msg = message()
    # A stand-in for the Row a query returns: entry_of reads the columns as attributes.
    row = SimpleNamespace(
        id=5,
        session_key="agent:main:telegram:group:-100",
        agent_id="main",
        state="running",
        reason=None,
        attempts=2,
        message=message_to_json(msg),
        answer=None,
        parts=None,
        received_at=AT,
        updated_at=AT,
        owner="host:1:abc",
        previews=None,
    )
    entry = entry_of(row)
    assert entry.state is InboxState.RUNNING and entry.state in PENDING
    assert entry.message == msg and entry.channel == "telegram"
    assert entry.parts == [] and entry.attempts == 2 and entry.owner == "host:1:abc"
    row.parts = ["one", "two"]
    assert entry_of(row).parts == ["one", "two"]
