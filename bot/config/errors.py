"""The root of bot's exceptions, and the configuration's own.

It sits in the bottom package so that configuration, which imports nothing else from ``bot``,
can raise a ``BotError`` too; :mod:`bot.errors` is the front door everyone else uses.
"""

from __future__ import annotations


class BotError(Exception):
    """Root of every exception ``bot`` defines: catch this to catch them all."""


class ConfigFileError(BotError):
    """The configuration can't be used; the message names every bad key path."""

    def __init__(self, problems: list[str], source: str = "") -> None:
        self.problems = problems
        where = f"{source}: " if source else ""
        super().__init__(where + "invalid configuration\n  " + "\n  ".join(problems))
