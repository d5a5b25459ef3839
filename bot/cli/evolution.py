"""``loopgate evolution list|approve|reject|run``: review self-evolution suggestions.

Approving applies the change to the stored agent at once (``agents`` table, as ``loopgate
agents set`` does) and records the baseline metrics; a running server uses it within
``agents.cache_ttl`` seconds. ``run`` runs one cycle now (metrics, rollback checks, rules),
whatever ``evolution.enabled`` says.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TextIO

from bot.cli.database import with_database
from bot.cli.links import print_table, streams, ttl_note
from bot.config import Config

if TYPE_CHECKING:  # the storage stack is imported on use: `loopgate --help` stays quick
    from bot.evolution.service import EvolutionService
    from bot.storage import Database

STATUSES = ("pending", "approved", "applied", "rejected", "rolled_back", "failed")


async def _with_service(
    config: Config, action: Callable[[EvolutionService], Awaitable[int]], err: TextIO
) -> int:
    """Run ``action`` on the service; a ValueError (a refused decision) becomes
    ``loopgate: <message>`` and exit code 1."""
    from bot.evolution.service import EvolutionService

    async def guarded(db: Database) -> int:
        try:
            return await action(EvolutionService(db, config))
        except ValueError as exc:
            print(f"loopgate: {exc}", file=err)
            return 1

    return await with_database(config, guarded, err)


async def list_suggestions(
    config: Config,
    *,
    status: str | None = None,
    agent: str | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    from bot.evolution.records import SuggestionStatus

    out, err = streams(out, err)

    async def action(service: EvolutionService) -> int:
        found = await service.list(SuggestionStatus(status) if status else None, agent)
        if not found:
            print("no evolution suggestions (loopgate evolution run makes a cycle now)", file=out)
            return 0
        rows = [("ID", "AGENT", "RULE", "STATUS", "CREATED", "SUMMARY")]
        for s in found:
            rows.append(
                (
                    s.id,
                    s.agent_id,
                    s.rule,
                    str(s.status),
                    s.created_at.strftime("%Y-%m-%d %H:%M"),
                    s.summary,
                )
            )
        print_table(rows, out)
        for s in found:
            if s.outcome and s.status is not SuggestionStatus.PENDING:
                by = f" by {s.decided_by}" if s.decided_by else ""
                print(f"{s.id}: {s.outcome}{by}", file=out)
        return 0

    return await _with_service(config, action, err)


async def approve(
    config: Config,
    suggestion_id: str,
    *,
    by: str,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    from bot.evolution.records import SuggestionStatus

    out, err = streams(out, err)

    async def action(service: EvolutionService) -> int:
        done = await service.approve(suggestion_id, by)
        if done.status is not SuggestionStatus.APPLIED:
            print(f"loopgate: suggestion {done.id} {done.status}: {done.outcome}", file=err)
            return 1
        baseline = (done.baseline or {}).get("quality", 0.0)
        print(
            f"applied {done.id} to agent {done.agent_id}: {done.describe_change()} "
            f"(baseline quality {baseline:.2f}); {ttl_note(config)}",
            file=out,
        )
        return 0

    return await _with_service(config, action, err)


async def reject(
    config: Config,
    suggestion_id: str,
    *,
    by: str,
    reason: str = "",
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    out, err = streams(out, err)

    async def action(service: EvolutionService) -> int:
        done = await service.reject(suggestion_id, by, reason)
        print(f"rejected {done.id} ({done.rule} for {done.agent_id})", file=out)
        return 0

    return await _with_service(config, action, err)


async def run_cycle(config: Config, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out, err = streams(out, err)

    async def action(service: EvolutionService) -> int:
        report = await service.run_cycle()
        print(
            f"cycle over {len(report.agents)} agent(s): {len(report.created)} new suggestion(s), "
            f"{len(report.kept)} kept, {len(report.rolled_back)} rolled back",
            file=out,
        )
        for s in report.created:
            print(f"  new {s.id} {s.agent_id} {s.rule}: {s.summary}", file=out)
        for line in report.skipped:
            print(f"  skipped {line}", file=out)
        for line in report.errors:
            print(f"  error {line}", file=err)
        return 1 if report.errors else 0

    return await _with_service(config, action, err)


def _default_reviewer() -> str:
    try:
        return f"cli:{getpass.getuser()}"
    except (OSError, KeyError):  # no user name in a bare container
        return "cli"


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """``loopgate evolution ...`` on the ``loopgate`` subcommand parser ``sub``."""
    evolution = sub.add_parser(
        "evolution", parents=[common], help="review self-evolution suggestions"
    )
    evo_sub = evolution.add_subparsers(dest="evolution_command", required=True)
    list_ = evo_sub.add_parser("list", parents=[common], help="suggestions, newest first")
    list_.add_argument("--status", choices=STATUSES)
    list_.add_argument("--agent", metavar="A")
    approve_ = evo_sub.add_parser(
        "approve", parents=[common], help="apply a pending suggestion now"
    )
    approve_.add_argument("id")
    approve_.add_argument("--by", metavar="NAME", help="who approves (default: cli:<user>)")
    reject_ = evo_sub.add_parser("reject", parents=[common], help="reject a pending suggestion")
    reject_.add_argument("id")
    reject_.add_argument("--by", metavar="NAME", help="who rejects (default: cli:<user>)")
    reject_.add_argument("--reason", default="", metavar="TEXT")
    evo_sub.add_parser("run", parents=[common], help="run one evolution cycle now")


def run(config: Config, args: argparse.Namespace) -> int:
    command = args.evolution_command
    if command == "list":
        return asyncio.run(list_suggestions(config, status=args.status, agent=args.agent))
    by = getattr(args, "by", None) or _default_reviewer()
    if command == "approve":
        return asyncio.run(approve(config, args.id, by=by))
    if command == "reject":
        return asyncio.run(reject(config, args.id, by=by, reason=args.reason))
    return asyncio.run(run_cycle(config))
