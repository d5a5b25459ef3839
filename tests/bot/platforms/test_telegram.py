"""bot/platforms/telegram.py: ``channels.telegram`` config → TelegramOptions (its send budgets
included), and the poller election and shared budgets a TelegramChannel is lent."""

from __future__ import annotations

from typing import Any

from bot.platforms.telegram import build_telegram, telegram_options
from channels.telegram import RateLimits
from tests.platform_support import RecordingDeps, platform_config

SECTION: dict[str, Any] = {"token": "123:abc", "api_base_url": "http://127.0.0.1:1"}


def test_the_section_becomes_the_options() -> None:
    section = {
        **SECTION,
        "mode": "webhook",
        "webhook_url": "https://bot.example/telegram/webhook",
        "webhook_secret": "hush",
        "allowed_updates": ["message", "callback_query"],
        "polling_timeout": 7,
        "reactions": False,
        "reply_context_chars": 40,
        "drafts": False,
    }
    options = telegram_options(platform_config("telegram", section))
    assert (options.token, options.api_base_url) == ("123:abc", "http://127.0.0.1:1")
    assert options.mode == "webhook" and options.webhook_secret == "hush"
    assert options.webhook_url == "https://bot.example/telegram/webhook"
    assert options.allowed_updates == ("message", "callback_query")
    assert options.polling_timeout == 7 and options.reply_context_chars == 40
    assert options.reactions is False and options.drafts is False


def test_each_rate_limit_lands_on_its_own_bucket() -> None:
    limits = {
        "per_chat": 1.5,
        "per_chat_burst": 2,
        "per_group_per_minute": 12.0,
        "per_group_burst": 4,
        "overall": 25.0,
        "overall_burst": 9,
    }
    options = telegram_options(platform_config("telegram", {**SECTION, "rate_limit": limits}))
    assert options.rate_limits == RateLimits(
        chat_per_second=1.5,
        chat_burst=2,
        group_per_minute=12.0,
        group_burst=4,
        global_per_second=25.0,
        global_burst=9,
    )


def test_defaults_pace_like_telegram_and_off_turns_pacing_off() -> None:
    assert telegram_options(platform_config("telegram", SECTION)).rate_limits == RateLimits()
    off = telegram_options(platform_config("telegram", {**SECTION, "rate_limit": "off"}))
    assert off.rate_limits is None


def test_a_polling_bot_is_lent_the_poller_election_and_shared_budgets() -> None:
    recording = RecordingDeps()
    channel = build_telegram(platform_config("telegram", SECTION), recording.deps)
    assert recording.gates == [("telegram", "123:abc")]
    assert recording.paces == [("telegram", "123:abc")]
    assert channel.poll_gate is recording.gate
    assert channel.pacer.shared is not None and channel.pacer.shared.store is recording.pace


def test_a_webhook_bot_needs_no_poller_election() -> None:
    recording = RecordingDeps()
    section = {**SECTION, "mode": "webhook", "webhook_url": "https://x/tg", "webhook_secret": "s"}
    channel = build_telegram(platform_config("telegram", section), recording.deps)
    assert recording.gates == [] and channel.poll_gate is None
    assert recording.paces == [("telegram", "123:abc")]


def test_a_single_process_polls_and_paces_on_its_own() -> None:
    channel = build_telegram(
        platform_config("telegram", SECTION), RecordingDeps(clustered=False).deps
    )
    assert channel.poll_gate is None and channel.pacer.shared is None
