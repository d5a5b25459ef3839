"""Wiring ``channels.slack`` config into a :class:`channels.slack.SlackChannel`."""

from __future__ import annotations

from bot.config import Config
from bot.platforms import PlatformDeps
from channels.slack import SlackChannel, SlackSettings

# Clear a stale "is thinking…" when typing refreshes stop for this many intervals.
STATUS_TTL_INTERVALS = 3


def build_slack(config: Config, deps: PlatformDeps) -> SlackChannel:
    slack = config.channels.slack
    rate = slack.rate_limit
    settings = SlackSettings(
        bot_token=slack.bot_token,
        app_token=slack.app_token,
        signing_secret=slack.signing_secret,
        api_base_url=slack.api_base_url,
        mode=slack.mode,
        reply_in_thread=slack.reply_in_thread,
        pace_per_second=None if rate == "off" else rate.per_second,
        pace_burst=1 if rate == "off" else rate.burst,
        assistant_status=slack.assistant_status,
        status_ttl=max(2.0, STATUS_TTL_INTERVALS * config.bot.typing_interval),
        ping_interval=slack.ping_interval,
    )
    return SlackChannel(
        settings, seen=deps.seen, pace_store=deps.pacing_for("slack", slack.bot_token)
    )
