"""The ``loopgate`` command (``main``) and its subcommands, one module each."""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """``loopgate``: the subcommands load here, so a Ctrl-C while they do ends as one."""
    try:
        from bot.cli.command import main as run
    except KeyboardInterrupt:  # nothing is open yet: the shell's status, no traceback
        return 130
    return run(argv)


__all__ = ["main"]
