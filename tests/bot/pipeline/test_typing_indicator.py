"""The typing keep-alive (``typing_indicator.py``), against the local channel."""

from __future__ import annotations

import asyncio

import pytest

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

    async def test_a_stop_of_the_run_while_typing_stops_is_not_lost(self) -> None:
        """The run is stopped (``/stop``) while it waits for the keep-alive to end, which
        takes a moment (a typing call in flight unwinding): the run must stop, not go on."""
        unwinding = asyncio.Event()

        class Slow(LocalChannel):
            async def set_typing(self, chat: ChatRef) -> None:
                try:
                    await asyncio.sleep(10)  # kept: a typing call in flight
                except asyncio.CancelledError:
                    unwinding.set()
                    await asyncio.sleep(0.1)  # kept: the HTTP client closing its connection
                    raise

        typing = TypingIndicator(Slow(), CHAT, interval=0.01, ttl=5)
        went_on = False

        async def run() -> None:
            nonlocal went_on
            typing.start()
            await asyncio.sleep(0.01)  # kept: the keep-alive's first call is in flight
            await typing.stop()  # the answer's first message is about to be sent
            went_on = True

        task = asyncio.create_task(run())
        await asyncio.wait_for(unwinding.wait(), 5)
        task.cancel()  # the /stop
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not went_on and not typing.active
