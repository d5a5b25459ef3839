"""bot/platforms/zalo.py: ``channels.zalo`` config → a ZaloChannel: its settings, a client that
calls the configured server with the configured retries (against the fake Zalo), and the
poller election it is lent."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot.platforms.zalo import build_zalo
from channels import ChatRef
from channels.zalo import ZaloChannel, ZaloServerError
from tests.fakes.zalo_server import FakeZalo
from tests.platform_support import RecordingDeps, platform_config


def section(zalo: FakeZalo, **extra: Any) -> dict[str, Any]:
    return {
        "token": zalo.token,
        "api_base_url": zalo.base_url,
        "backoff_initial": 0.01,
        "backoff_max": 0.02,
        **extra,
    }


@pytest.fixture
async def built() -> AsyncIterator[list[ZaloChannel]]:
    """Channels built by a test, their HTTP clients closed afterwards."""
    channels: list[ZaloChannel] = []
    yield channels
    for channel in channels:
        await channel.client.aclose()


def build(built: list[ZaloChannel], recording: RecordingDeps, **zalo: Any) -> ZaloChannel:
    channel = build_zalo(platform_config("zalo", zalo), recording.deps)
    assert isinstance(channel, ZaloChannel)
    built.append(channel)
    return channel


async def test_the_section_becomes_the_channels_settings(
    zalo: FakeZalo, built: list[ZaloChannel]
) -> None:
    channel = build(
        built,
        RecordingDeps(),
        **section(
            zalo,
            mode="webhook",
            webhook_url="https://bot.example/zalo/webhook",
            webhook_secret="secret-123",
            polling_timeout=12,
            group_delivery="addressed_only",
            mention_names=["Loopgate", "LG"],
        ),
    )
    s = channel.settings
    assert s.mode == "webhook" and s.webhook_url == "https://bot.example/zalo/webhook"
    assert s.webhook_secret == "secret-123" and s.poll_timeout == 12
    assert s.group_delivery == "addressed_only" and s.mention_names == ("Loopgate", "LG")
    assert (s.backoff_initial, s.backoff_max) == (0.01, 0.02)


async def test_the_client_sends_to_the_configured_server_retrying_as_configured(
    zalo: FakeZalo, built: list[ZaloChannel]
) -> None:
    zalo.fail("sendMessage", 502, times=2)
    channel = build(built, RecordingDeps(), **section(zalo, send_attempts=3))
    await channel.send_text(ChatRef("zalo", "u1"), "hello")
    assert zalo.texts("u1") == ["hello"]
    assert len(zalo.calls("sendMessage")) == 3


async def test_one_send_attempt_means_no_retry(zalo: FakeZalo, built: list[ZaloChannel]) -> None:
    zalo.fail("sendMessage", 502, times=1)
    channel = build(built, RecordingDeps(), **section(zalo, send_attempts=1))
    with pytest.raises(ZaloServerError):
        await channel.send_text(ChatRef("zalo", "u1"), "hello")
    assert len(zalo.calls("sendMessage")) == 1 and zalo.texts() == []


async def test_polling_is_lent_the_poller_election_a_webhook_is_not(
    zalo: FakeZalo, built: list[ZaloChannel]
) -> None:
    recording = RecordingDeps()
    polling = build(built, recording, **section(zalo))
    assert recording.gates == [("zalo", zalo.token)] and polling.poll_gate is recording.gate
    assert polling.seen is recording.store
    webhook = build(
        built,
        recording,
        **section(zalo, mode="webhook", webhook_url="https://x/zalo", webhook_secret="s" * 8),
    )
    assert webhook.poll_gate is None and len(recording.gates) == 1
