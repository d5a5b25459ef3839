"""The typing keep-alive (``typing_indicator.py``), against the local channel."""

from __future__ import annotations

import asyncio

from bot.pipeline.typing_indicator import TypingIndicator
from channels import ChatRef
from channels.local import LocalChannel
from tests.pipeline_support import LOCAL_CHAT as CHAT
from tests.pipeline_support import local_recorder as recording_channel
from tests.waiting import wait_until


class TestTyping:
    async def test_sent_at_once_refreshed_and_stopped(self) -> None:
        channel, records = recording_channel()
        typing = TypingIndicator(channel, CHAT, interval=0.02, ttl=10)
        typing.start()
        await wait_until(lambda: len(records) >= 3)
        await typing.stop()
        count = len(records)
        assert all(r.kind == "typing" for r in records)
        await asyncio.sleep(0.05)  # kept (negative check)
        assert len(records) == count  # nothing after stop
        typing.start()  # never restarted after stop
        await asyncio.sleep(0.03)  # kept (negative check)
        assert len(records) == count and not typing.active

    async def test_ttl_ends_the_refresh(self) -> None:
        channel, records = recording_channel()
        typing = TypingIndicator(channel, CHAT, interval=0.01, ttl=0.035)
        typing.start()
        await wait_until(lambda: not typing.active)
        count = len(records)
        assert 1 <= count <= 5  # once at start, then a few refreshes within the TTL
        await asyncio.sleep(0.05)  # kept (negative check): no refresh after the TTL
        assert len(records) == count
        await typing.stop()

    async def test_channel_without_typing_sends_nothing(self) -> None:
        channel, records = recording_channel(typing=False)
        typing = TypingIndicator(channel, CHAT, interval=0.01)
        typing.start()
        await asyncio.sleep(0.03)  # kept (negative check): a few intervals, no typing sent
        await typing.stop()
        assert records == []

    async def test_failure_of_typing_does_not_stop_refresh(self) -> None:
        calls = 0

        class Flaky(LocalChannel):
            async def set_typing(self, chat: ChatRef) -> None:
                nonlocal calls
                calls += 1
                raise RuntimeError("platform down")

        typing = TypingIndicator(Flaky(), CHAT, interval=0.01, ttl=5)
        typing.start()
        await wait_until(lambda: calls >= 2)
        assert typing.active
        await typing.stop()
