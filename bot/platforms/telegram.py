"""``channels.telegram.*`` → a ready :class:`~channels.telegram.TelegramChannel`."""

from __future__ import annotations

from bot.config import Config
from bot.platforms import PlatformDeps
from channels.telegram import RateLimits, TelegramChannel, TelegramOptions


def telegram_options(config: Config) -> TelegramOptions:
    tg = config.channels.telegram
    limits = (
        None
        if tg.rate_limit == "off"
        else RateLimits(
            chat_per_second=tg.rate_limit.per_chat,
            chat_burst=tg.rate_limit.per_chat_burst,
            group_per_minute=tg.rate_limit.per_group_per_minute,
            group_burst=tg.rate_limit.per_group_burst,
            global_per_second=tg.rate_limit.overall,
            global_burst=tg.rate_limit.overall_burst,
        )
    )
    return TelegramOptions(
        token=tg.token,
        api_base_url=tg.api_base_url,
        mode=tg.mode,
        webhook_url=tg.webhook_url,
        webhook_secret=tg.webhook_secret,
        allowed_updates=tuple(tg.allowed_updates),
        polling_timeout=tg.polling_timeout,
        rate_limits=limits,
        reactions=tg.reactions,
        reply_context_chars=tg.reply_context_chars,
        drafts=tg.drafts,
    )


def build_telegram(config: Config, deps: PlatformDeps) -> TelegramChannel:
    tg = config.channels.telegram
    return TelegramChannel(
        telegram_options(config),
        state=deps.state,
        seen=deps.seen,
        poll_gate=deps.gate_for("telegram", tg.token, tg.mode),
        pace_store=deps.pacing_for("telegram", tg.token),
    )
