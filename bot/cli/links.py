"""``loopgate links list|add|remove``: which agent may delegate to which.

A link from SOURCE to TARGET lets SOURCE delegate to TARGET (``outbound``), TARGET to SOURCE
(``inbound``) or both (``bidirectional``); its description tells the delegating agent when to.
Links live in the database, so they change without a restart: a running server sees a change
when its cached loop of an agent expires, i.e. within ``agents.cache_ttl`` seconds.

The helpers below (opening the store, the table, the unknown-agent warning) are shared with
``loopgate teams`` / ``loopgate tasks`` (``bot/cli/teams.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from agent_core.orchestration import AgentLink, LinkDirection
from bot.cli.database import with_database
from bot.config import Config

if TYPE_CHECKING:  # the storage stack is imported on use: `loopgate --help` stays quick
    from bot.storage import Database
    from bot.storage.orchestration import SqlOrchestrationStore

Action = Callable[["SqlOrchestrationStore", "Database"], Awaitable[int]]


async def with_store(config: Config, action: Action, err: TextIO) -> int:
    """Run ``action`` on the orchestration store; a ValueError (a refused change) becomes
    ``loopgate: <message>`` and exit code 1 instead of a traceback."""
    from bot.storage.orchestration import SqlOrchestrationStore

    async def guarded(db: Database) -> int:
        try:
            return await action(SqlOrchestrationStore(db), db)
        except ValueError as exc:
            print(f"loopgate: {exc}", file=err)
            return 1

    return await with_database(config, guarded, err)


def streams(out: TextIO | None, err: TextIO | None) -> tuple[TextIO, TextIO]:
    # Looked up per call, not bound as defaults: tests and embedders swap sys.stdout.
    return out or sys.stdout, err or sys.stderr


def ttl_note(config: Config) -> str:
    return f"a running server applies it within agents.cache_ttl ({config.agents.cache_ttl:g} s)"


def table_lines(rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows as left-aligned columns; the first row is the header."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def print_table(rows: Sequence[Sequence[str]], out: TextIO) -> None:
    for line in table_lines(rows):
        print(line, file=out)


async def warn_unknown(config: Config, db: Database, agent_ids: Iterable[str], err: TextIO) -> None:
    """Warn about agent ids neither config.yaml nor the ``agents`` table defines: likely a
    typo, but the change is still made (the agent may be stored later)."""
    from bot.storage import SqlAgentStore

    known = {"main", config.agents.default, *(a.id for a in config.agents.list)}
    unknown = [a for a in dict.fromkeys(agent_ids) if a not in known]
    if unknown:
        known |= {s.agent.id for s in await SqlAgentStore(db).list()}
    for agent_id in unknown:
        if agent_id not in known:
            print(
                f"warning: agent {agent_id!r} is neither in config.yaml nor stored "
                "(loopgate agents set): a typo? (the change is made anyway)",
                file=err,
            )


async def list_links(
    config: Config, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    out, err = streams(out, err)

    async def action(store: SqlOrchestrationStore, db: Database) -> int:
        links = await store.list_links()
        if not links:
            print("no agent links (loopgate links add SOURCE TARGET)", file=out)
            return 0
        rows = [("SOURCE", "TARGET", "DIRECTION", "DESCRIPTION")]
        rows += [(k.source, k.target, str(k.direction), k.description) for k in links]
        print_table(rows, out)
        return 0

    return await with_store(config, action, err)


async def add_link(
    config: Config,
    link: AgentLink,
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Store the link (replacing the direction and description of the same pair)."""
    out, err = streams(out, err)

    async def action(store: SqlOrchestrationStore, db: Database) -> int:
        stored = await store.add_link(link)
        await warn_unknown(config, db, (link.source, link.target), err)
        print(
            f"linked {stored.source} → {stored.target} ({stored.direction}); {ttl_note(config)}",
            file=out,
        )
        return 0

    return await with_store(config, action, err)


async def remove_link(
    config: Config,
    source: str,
    target: str,
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    out, err = streams(out, err)

    async def action(store: SqlOrchestrationStore, db: Database) -> int:
        if not await store.remove_link(source, target):
            print(f"loopgate: no link from {source} to {target}", file=err)
            return 1
        print(f"removed link {source} → {target}; {ttl_note(config)}", file=out)
        return 0

    return await with_store(config, action, err)


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """``loopgate links ...`` on the ``loopgate`` subcommand parser ``sub``."""
    links = sub.add_parser("links", parents=[common], help="which agent may delegate to which")
    links_sub = links.add_subparsers(dest="links_command", required=True)
    links_sub.add_parser("list", parents=[common], help="every agent link")
    add = links_sub.add_parser(
        "add",
        parents=[common],
        help="let SOURCE delegate to TARGET (or replace that link)",
        description="outbound: SOURCE delegates to TARGET; inbound: TARGET delegates to "
        "SOURCE; bidirectional: both.",
    )
    add.add_argument("source")
    add.add_argument("target")
    add.add_argument("--direction", choices=[d.value for d in LinkDirection], default="outbound")
    add.add_argument("--description", default="", metavar="TEXT", help="when to delegate")
    remove = links_sub.add_parser("remove", parents=[common], help="remove a link")
    remove.add_argument("source")
    remove.add_argument("target")


def run(config: Config, args: argparse.Namespace) -> int:
    if args.links_command == "list":
        return asyncio.run(list_links(config))
    if args.links_command == "add":
        link = AgentLink(args.source, args.target, LinkDirection(args.direction), args.description)
        return asyncio.run(add_link(config, link))
    return asyncio.run(remove_link(config, args.source, args.target))
