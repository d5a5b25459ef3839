"""bot/platforms/slack.py: ``channels.slack`` config → a SlackChannel's settings, its posting
pace, and the shared stores it is lent."""

from __future__ import annotations

from typing import Any

from bot.platforms.slack import build_slack
from tests.platform_support import RecordingDeps, platform_config

SECTION: dict[str, Any] = {
    "mode": "socket",
    "bot_token": "xoxb-1",
    "app_token": "xapp-1",
    "signing_secret": "s3cret",
    "api_base_url": "http://127.0.0.1:1/api/",
}


def test_the_section_becomes_the_channels_settings() -> None:
    config = platform_config(
        "slack", {**SECTION, "reply_in_thread": False, "assistant_status": False}
    )
    channel = build_slack(config, RecordingDeps().deps)
    s = channel.settings
    assert (s.bot_token, s.app_token, s.signing_secret) == ("xoxb-1", "xapp-1", "s3cret")
    assert s.api_base_url == "http://127.0.0.1:1/api/" and s.mode == "socket"
    assert s.reply_in_thread is False and s.assistant_status is False


def test_the_rate_limit_paces_posts_and_off_turns_pacing_off() -> None:
    section = {**SECTION, "rate_limit": {"per_second": 2.5, "burst": 6}}
    paced = build_slack(platform_config("slack", section), RecordingDeps().deps)
    assert paced.pacer is not None
    assert (paced.pacer.per_second, paced.pacer.burst) == (2.5, 6)
    off = build_slack(
        platform_config("slack", {**SECTION, "rate_limit": "off"}), RecordingDeps().deps
    )
    assert off.pacer is None
    assert (off.settings.pace_per_second, off.settings.pace_burst) == (None, 1)


def test_a_stale_status_is_cleared_after_three_typing_intervals_but_never_under_2s() -> None:
    slow = build_slack(platform_config("slack", SECTION, typing_interval=4), RecordingDeps().deps)
    assert slow.settings.status_ttl == 12.0
    fast = build_slack(platform_config("slack", SECTION, typing_interval=0.1), RecordingDeps().deps)
    assert fast.settings.status_ttl == 2.0


def test_posting_budgets_are_shared_per_bot_token() -> None:
    recording = RecordingDeps()
    channel = build_slack(platform_config("slack", SECTION), recording.deps)
    assert recording.paces == [("slack", "xoxb-1")]
    assert channel.pacer is not None and channel.pacer.shared is not None
    assert channel.pacer.shared.store is recording.pace
    assert channel.seen is recording.store


def test_a_single_process_paces_in_memory() -> None:
    channel = build_slack(platform_config("slack", SECTION), RecordingDeps(clustered=False).deps)
    assert channel.pacer is not None and channel.pacer.shared is None
