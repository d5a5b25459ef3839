"""``session_key``: one conversation per DM user, per group room, per topic or thread; and
``chat_of``, the chat read back from a key."""

from __future__ import annotations

from bot.pipeline.session_keys import chat_of, session_key
from channels import ChatRef, ChatType


def test_a_direct_chat_key_names_agent_channel_kind_and_chat() -> None:
    chat = ChatRef("telegram", "42", ChatType.DIRECT)
    assert session_key("main", chat) == "agent:main:telegram:direct:42"


def test_a_group_key_is_shared_by_the_room() -> None:
    chat = ChatRef("slack", "C123", ChatType.GROUP)
    assert session_key("main", chat) == "agent:main:slack:group:C123"


def test_a_thread_or_topic_is_its_own_session() -> None:
    room = ChatRef("telegram", "-100", ChatType.GROUP)
    topic = ChatRef("telegram", "-100", ChatType.GROUP, thread_id="7")
    other_topic = ChatRef("telegram", "-100", ChatType.GROUP, thread_id="8")
    assert session_key("main", topic) == "agent:main:telegram:group:-100:topic:7"
    assert len({session_key("main", c) for c in (room, topic, other_topic)}) == 3


def test_an_empty_thread_id_is_the_room_itself() -> None:
    room = ChatRef("slack", "C1", ChatType.GROUP)
    assert session_key("main", ChatRef("slack", "C1", ChatType.GROUP, thread_id="")) == (
        session_key("main", room)
    )


def test_the_same_chat_id_as_dm_and_as_group_are_different_sessions() -> None:
    dm = ChatRef("zalo", "u1", ChatType.DIRECT)
    group = ChatRef("zalo", "u1", ChatType.GROUP)
    assert session_key("main", dm) != session_key("main", group)


def test_distinct_agents_get_distinct_keys_for_one_chat() -> None:
    chat = ChatRef("telegram", "42")
    assert session_key("main", chat) != session_key("helper", chat)


def test_distinct_channels_get_distinct_keys_for_one_chat_id() -> None:
    assert session_key("main", ChatRef("telegram", "42")) != session_key(
        "main", ChatRef("slack", "42")
    )


def test_distinct_dm_users_get_distinct_keys() -> None:
    assert session_key("main", ChatRef("web", "alice")) != session_key(
        "main", ChatRef("web", "bob")
    )


def test_the_key_is_stable() -> None:
    chat = ChatRef("web", "c1", ChatType.GROUP, thread_id="t")
    assert session_key("a", chat) == session_key("a", ChatRef("web", "c1", ChatType.GROUP, "t"))


def test_the_chat_is_read_back_from_a_key() -> None:
    topic = ChatRef("slack", "C1:x", ChatType.GROUP, thread_id="1700.1")
    assert chat_of(session_key("main", topic)) == topic
    dm = ChatRef("telegram", "5", ChatType.DIRECT)
    assert chat_of(session_key("a-b_1", dm)) == dm
    assert chat_of("subagent:abc") is None and chat_of("agent:main") is None
