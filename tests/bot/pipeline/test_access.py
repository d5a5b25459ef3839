"""Access policy and DM pairing (channel-agnostic)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.config import parse_config
from bot.pipeline.access import (
    PAIRING_ALPHABET,
    PAIRING_MAX_PENDING,
    AccessPolicy,
    PairingStore,
    new_pairing_code,
)
from bot.storage import Database, open_database
from bot.storage.models import utcnow
from channels import ChatRef, ChatType, InboundMessage, Sender


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await open_database(f"sqlite+aiosqlite:///{tmp_path / 'a.db'}")
    yield database
    await database.aclose()


def msg(
    channel: str = "telegram",
    chat_type: ChatType = ChatType.DIRECT,
    chat_id: str = "42",
    sender: str = "42",
    addressed: bool = True,
) -> InboundMessage:
    return InboundMessage(
        chat=ChatRef(channel, chat_id, chat_type),
        message_id="1",
        sender=Sender(sender, "Ann"),
        text="hi",
        addressed=addressed,
    )


def policy(db: Database | None = None, **telegram: Any) -> AccessPolicy:
    config = parse_config({"channels": {"telegram": telegram}}, {})
    return AccessPolicy(config, PairingStore(db) if db else None)


class TestGroups:
    async def test_mention_is_the_default(self) -> None:
        check = policy().check
        group = ChatType.GROUP
        assert (await check(msg(chat_type=group, chat_id="-1"))).allowed
        refused = await check(msg(chat_type=group, chat_id="-1", addressed=False))
        assert (refused.allowed, refused.reason) == (False, "not_mentioned")

    async def test_open_allowlist_disabled(self) -> None:
        group = ChatType.GROUP
        quiet = msg(chat_type=group, chat_id="-1", addressed=False)
        assert (await policy(group_policy="open").check(quiet)).allowed
        allow = policy(group_policy="allowlist", group_allow_from=["-1", "telegram:-2"])
        assert (await allow.check(msg(chat_type=group, chat_id="-2"))).allowed
        other = await allow.check(msg(chat_type=group, chat_id="-3"))
        assert other.reason == "group_not_allowed"
        assert (await allow.check(quiet)).reason == "not_mentioned"
        off = await policy(group_policy="disabled").check(msg(chat_type=group, chat_id="-1"))
        assert off.reason == "group_disabled"

    async def test_local_channels_only_need_addressing(self) -> None:
        assert (await policy(dm_policy="disabled").check(msg(channel="web"))).allowed
        assert not (await policy().check(msg(channel="web", addressed=False))).allowed


class TestDirect:
    async def test_allowlist_and_disabled(self) -> None:
        allow = policy(dm_policy="allowlist", allow_from=["7"], admins=["9"])
        assert (await allow.check(msg(sender="7"))).allowed
        assert (await allow.check(msg(sender="9"))).allowed  # admins always
        assert (await allow.check(msg(sender="8"))).reason == "dm_not_allowed"
        assert (await policy(dm_policy="disabled").check(msg())).reason == "dm_disabled"

    async def test_pairing_code_then_approval(self, db: Database) -> None:
        check = policy(db, dm_policy="pairing").check
        first = await check(msg(sender="5"))
        assert (first.allowed, first.reason) == (False, "pairing_pending")
        assert first.reply is not None
        again = await check(msg(sender="5"))
        assert again.reply == first.reply  # same code while it is pending
        code = first.reply.split("pairing code is ")[1][:8]
        assert await PairingStore(db).approve("nope") is None
        approved = await PairingStore(db).approve(code.lower())
        assert approved is not None and approved.user_id == "5"
        assert (await check(msg(sender="5"))).allowed
        assert await PairingStore(db).pending() == []


class TestPairingStore:
    def test_codes_use_the_unambiguous_alphabet(self) -> None:
        codes = {new_pairing_code() for _ in range(200)}
        assert all(len(c) == 8 and set(c) <= set(PAIRING_ALPHABET) for c in codes)
        assert not set("01IO") & set(PAIRING_ALPHABET)
        assert len(codes) == 200

    async def test_at_most_three_pending_and_ttl(self, db: Database) -> None:
        now = [utcnow()]

        def clock() -> datetime:
            return now[0]

        store = PairingStore(db, clock=clock)
        requests = [await store.request("telegram", str(i)) for i in range(PAIRING_MAX_PENDING)]
        assert all(requests)
        assert await store.request("telegram", "late") is None
        assert await store.request("slack", "other") is not None  # per channel
        now[0] += timedelta(minutes=61)
        assert await store.pending("telegram") == []
        expired = requests[0]
        assert expired is not None and await store.approve(expired.code) is None
        assert await store.request("telegram", "late") is not None
