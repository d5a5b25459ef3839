"""The ``loopgate`` command (``main``) and its subcommands, one module each."""

from bot.cli.command import main

__all__ = ["main"]
