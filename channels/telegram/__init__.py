"""Telegram: the Bot API through python-telegram-bot, over long polling or a webhook."""

import os

# Opt in to PTB's future duration type (datetime.timedelta) now. Without it PTB 22 emits a
# deprecation warning from inside its own RetryAfter error on every 429; our code reads both.
os.environ.setdefault("PTB_TIMEDELTA", "true")

from channels.telegram.channel import TelegramChannel
from channels.telegram.errors import translate_telegram_errors
from channels.telegram.normalize import (
    BotIdentity,
    entities_to_markdown,
    normalize_update,
)
from channels.telegram.options import TelegramOptions
from channels.telegram.ratelimit import RateLimits, SendPacer

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
