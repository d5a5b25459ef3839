"""``BotError``, the root of every exception ``bot`` defines (``except BotError`` catches them).

It is defined in the bottom package, :mod:`bot.config.errors`, so configuration can use it too.
"""

from bot.config.errors import BotError, ConfigFileError

__all__ = ["BotError", "ConfigFileError"]
