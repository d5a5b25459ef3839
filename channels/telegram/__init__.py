"""Telegram: the Bot API through python-telegram-bot, over long polling or a webhook."""

# First: how python-telegram-bot is imported (settings, and what it must not load).
from channels.telegram import _ptb  # noqa: F401

# isort: split
from channels.telegram._channel import TelegramChannel
from channels.telegram._errors import translate_telegram_errors
from channels.telegram._normalize import (
    BotIdentity,
    entities_to_markdown,
    normalize_update,
)
from channels.telegram._options import TelegramOptions
from channels.telegram._ratelimit import RateLimits, SendPacer

__all__ = [
    "BotIdentity",
    "RateLimits",
    "SendPacer",
    "TelegramChannel",
    "TelegramOptions",
    "entities_to_markdown",
    "normalize_update",
    "translate_telegram_errors",
]
