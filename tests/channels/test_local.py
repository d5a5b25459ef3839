"""channels/local.py: the web chat's and terminal's channel: messages fed in while started, and
what the bot sends coming out to the listeners of that chat only."""

from __future__ import annotations

import pytest

from channels import ChatRef, ChatType, InboundMessage, MessageRef, Sender
from channels.local import LocalChannel, Outbound

ALICE = ChatRef("web", "alice")
BOB = ChatRef("web", "bob")


def message(text: str = "hi") -> InboundMessage:
    return InboundMessage(ALICE, "m1", Sender("alice"), text)


class Recorder:
    def __init__(self) -> None:
        self.seen: list[Outbound] = []

    async def __call__(self, record: Outbound) -> None:
        self.seen.append(record)


async def test_messages_reach_the_handler_only_while_started() -> None:
    channel = LocalChannel()
    received: list[InboundMessage] = []

    async def handler(msg: InboundMessage) -> None:
        received.append(msg)

    with pytest.raises(RuntimeError, match="'web' is not started"):
        await channel.receive(message("too early"))
    await channel.start(handler)
    await channel.receive(message("hello"))
    await channel.stop()
    with pytest.raises(RuntimeError, match="not started"):
        await channel.receive(message("too late"))
    assert [m.text for m in received] == ["hello"]


async def test_sent_messages_get_fresh_ids_and_reach_only_their_chat() -> None:
    channel = LocalChannel()
    alice, bob = Recorder(), Recorder()
    channel.listen("alice", alice)
    channel.listen("bob", bob)
    first = await channel.send_text(ALICE, "one")
    second = await channel.send_text(ALICE, "two", reply_to="m1")
    await channel.send_text(ChatRef("web", "nobody"), "into the void")
    assert first == MessageRef(ALICE, "out-1") and second.message_id == "out-2"
    assert alice.seen == [
        Outbound("message", ALICE, text="one", message_id="out-1"),
        Outbound("message", ALICE, text="two", message_id="out-2", reply_to="m1"),
    ]
    assert bob.seen == []


async def test_typing_and_reactions_come_out_as_records() -> None:
    channel = LocalChannel()
    alice = Recorder()
    channel.listen("alice", alice)
    target = MessageRef(ALICE, "m1")
    await channel.set_typing(ALICE)
    await channel.add_reaction(target, "👀")
    await channel.remove_reaction(target, "👀")
    assert [(r.kind, r.text, r.message_id) for r in alice.seen] == [
        ("typing", "", ""),
        ("reaction", "👀", "m1"),
        ("reaction_removed", "👀", "m1"),
    ]


async def test_an_unsubscribed_listener_hears_nothing_more() -> None:
    channel = LocalChannel()
    first, second = Recorder(), Recorder()
    unsubscribe = channel.listen("alice", first)
    channel.listen("alice", second)
    await channel.send_text(ALICE, "both")
    unsubscribe()
    unsubscribe()  # twice is harmless
    await channel.send_text(ALICE, "second only")
    assert [r.text for r in first.seen] == ["both"]
    assert [r.text for r in second.seen] == ["both", "second only"]


async def test_a_listener_may_unsubscribe_while_being_called() -> None:
    # A web chat socket that closes mid-send unsubscribes from inside the emit loop.
    channel = LocalChannel()
    leaver, later = Recorder(), Recorder()

    async def leave(record: Outbound) -> None:
        await leaver(record)
        unsubscribe()

    unsubscribe = channel.listen("alice", leave)
    channel.listen("alice", later)
    await channel.send_text(ALICE, "one")
    await channel.send_text(ALICE, "two")
    assert [r.text for r in leaver.seen] == ["one"]
    assert [r.text for r in later.seen] == ["one", "two"]


async def test_admins_are_the_configured_ones() -> None:
    channel = LocalChannel(admins=frozenset({"root"}))
    group = ChatRef("web", "room", ChatType.GROUP)
    assert await channel.is_admin(group, "root")
    assert not await channel.is_admin(group, "alice")
