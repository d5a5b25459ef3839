"""``loopgate inbox``: messages not answered (with age, state and reason), and ``retry ID``."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from typing import Any, TextIO

from bot.cli.database import with_database
from bot.config import Config
from bot.storage import Database
from bot.storage.inbox import InboxEntry, SqlInbox
from bot.storage.models import utcnow

PREVIEW_CHARS = 40


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """``loopgate inbox [--last N]`` and ``loopgate inbox retry ID``."""
    inbox = sub.add_parser(
        "inbox",
        parents=[common],
        help="messages not answered: queued, running, dropped, failed, expired",
    )
    inbox.add_argument("--last", type=int, default=50, metavar="N", help="how many (default 50)")
    inbox_sub = inbox.add_subparsers(dest="inbox_command")
    retry = inbox_sub.add_parser("retry", parents=[common], help="run one of them again")
    retry.add_argument("id", type=int, help="the entry id that `loopgate inbox` shows")


async def run(config: Config, args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    entries: list[InboxEntry] = []

    async def act(db: Database) -> int:
        inbox = SqlInbox(db, owner="cli")
        if args.inbox_command != "retry":
            entries.extend(await inbox.unanswered(limit=max(1, args.last)))
            return 0
        entry = await inbox.retry(args.id)
        if entry is None:
            print(f"loopgate: no inbox entry {args.id}", file=sys.stderr)
            return 1
        print(
            f"entry {entry.id} queued again: a running `loopgate serve` answers it within "
            "seconds, otherwise the next one to start does",
            file=out,
        )
        return 0

    code = await with_database(config, act)
    if code or args.inbox_command == "retry":
        return code
    if not entries:
        print("inbox: every message was answered", file=out)
        return 0
    now = utcnow()
    header = f"{'ID':>6}  {'AGE':>6}  {'STATE':<8}  {'SESSION':<40}  {'TEXT':<{PREVIEW_CHARS}}"
    print(f"{header}  REASON", file=out)
    for entry in entries:
        print(_row(entry, now), file=out)
    return 0


def _row(entry: InboxEntry, now: datetime) -> str:
    text = " ".join(entry.message.text.split())
    if len(text) > PREVIEW_CHARS:
        text = text[: PREVIEW_CHARS - 1] + "…"
    reason = entry.reason or ""
    if entry.answer is not None and entry.state.value in ("queued", "running"):
        reason = f"{reason}; {len(entry.parts)} part(s) delivered".lstrip("; ")
    return (
        f"{entry.id:>6}  {_age(now, entry.received_at):>6}  {entry.state.value:<8}  "
        f"{entry.session_key[:40]:<40}  {text:<{PREVIEW_CHARS}}  {reason}"
    ).rstrip()


def _age(now: datetime, then: datetime) -> str:
    seconds = max(0, int((now - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
