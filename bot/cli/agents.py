"""``loopgate agents list|set|delete``: agents stored in the database.

A stored agent is merged over the ``config.yaml`` entry of the same id (every field it sets wins)
and falls back to ``agents.defaults`` for the rest. A running server sees a change when its cached
loop of that agent expires, i.e. within ``agents.cache_ttl`` seconds (300 by default).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TextIO

from pydantic import ValidationError

from bot.cli.database import with_database
from bot.config import AgentConfig, Config
from bot.config.agents import SETTABLE

if TYPE_CHECKING:  # the storage stack is imported on use: `loopgate --help` stays quick
    from bot.agents.router import AgentRouter
    from bot.storage import SqlAgentStore, StoredAgent


async def _with_store(
    config: Config, action: Callable[[SqlAgentStore], Awaitable[int]], err: TextIO
) -> int:
    from bot.storage import SqlAgentStore

    return await with_database(config, lambda db: action(SqlAgentStore(db)), err)


def _streams(out: TextIO | None, err: TextIO | None) -> tuple[TextIO, TextIO]:
    # Looked up per call, not bound as defaults: tests and embedders swap sys.stdout.
    return out or sys.stdout, err or sys.stderr


def _references(config: Config, agent_id: str) -> list[str]:
    """Config keys that route messages to ``agent_id``."""
    keys = ["agents.default"] if config.agents.default == agent_id else []
    for name in ("telegram", "slack", "zalo"):
        if getattr(config.channels, name).agent == agent_id:
            keys.append(f"channels.{name}.agent")
    return keys


def _ttl_note(config: Config) -> str:
    return f"a running server uses it within agents.cache_ttl ({config.agents.cache_ttl:g} s)"


async def list_agents(
    config: Config, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Every agent a message can reach, with where it is defined and what it resolves to."""
    out, err = _streams(out, err)

    async def action(store: SqlAgentStore) -> int:
        stored = {s.agent.id: s for s in await store.list()}
        router = _router(config)
        configured = [a.id for a in config.agents.list]
        ids = list(dict.fromkeys([*router.agent_ids, *stored]))
        rows = [("ID", "SOURCE", "PROVIDER", "MODEL", "MAX_ITER", "UPDATED")]
        for agent_id in ids:
            row = stored.get(agent_id)
            settings = router.settings(agent_id, row.agent if row else None)
            source = "+".join(
                name
                for name, present in (("config", agent_id in configured), ("db", row is not None))
                if present
            )
            rows.append(
                (
                    agent_id + (" (default)" if agent_id == config.agents.default else ""),
                    source or "defaults",
                    settings.provider,
                    settings.model,
                    str(settings.max_iterations),
                    row.updated_at.strftime("%Y-%m-%d %H:%M UTC") if row else "-",
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for r in rows:
            print(
                "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip(),
                file=out,
            )
        return 0

    return await _with_store(config, action, err)


async def set_agent(
    config: Config,
    agent_id: str,
    changes: dict[str, Any],
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Create the stored agent or change the given fields of it (``""`` clears a text field)."""
    out, err = _streams(out, err)
    updates = {k: (None if v == "" else v) for k, v in changes.items() if v is not None}
    providers = config.providers.all()
    provider = updates.get("provider")
    if provider is not None and provider not in providers:
        print(
            f"loopgate: unknown provider {provider!r} (defined: {', '.join(sorted(providers))})",
            file=err,
        )
        return 2

    async def action(store: SqlAgentStore) -> int:
        existing: StoredAgent | None = await store.get(agent_id)
        data = existing.agent.model_dump(exclude_unset=True) if existing else {}
        try:
            agent = AgentConfig.model_validate({**data, **updates, "id": agent_id})
        except ValidationError as exc:
            for e in exc.errors():
                field = ".".join(str(p) for p in e["loc"]) or "agent"
                print(f"loopgate: {field}: {e['msg']}", file=err)
            return 2
        await store.upsert(agent)
        verb = "updated" if existing else "stored"
        print(f"{verb} agent {agent_id}; {_ttl_note(config)}", file=out)
        return 0

    return await _with_store(config, action, err)


async def delete_agent(
    config: Config, agent_id: str, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    out, err = _streams(out, err)

    async def action(store: SqlAgentStore) -> int:
        configured = any(a.id == agent_id for a in config.agents.list)
        if not await store.delete(agent_id):
            where = " (it is defined in config.yaml: edit that file)" if configured else ""
            print(f"loopgate: no stored agent {agent_id!r}{where}", file=err)
            return 1
        print(f"deleted stored agent {agent_id}; {_ttl_note(config)}", file=out)
        if configured:
            print(f"config.yaml still defines {agent_id}: that definition applies again", file=out)
        elif agent_id != "main":
            for key in _references(config, agent_id):
                print(
                    f"warning: {key} names {agent_id}: its messages now get "
                    "bot.unknown_agent_reply",
                    file=err,
                )
        return 0

    return await _with_store(config, action, err)


def _router(config: Config) -> AgentRouter:
    # Only for AgentRouter.settings (merging and defaults exactly as the server does); it never
    # builds a provider or runs anything, so in-memory stores are enough.
    from agent_core import EventBus, MemoryStore
    from bot.agents.router import AgentRouter

    memory = MemoryStore()
    return AgentRouter(config, store=memory, traces=memory, events=EventBus())


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """``loopgate agents ...`` on the ``loopgate`` subcommand parser ``sub``."""
    agents = sub.add_parser("agents", parents=[common], help="agents stored in the database")
    agents_sub = agents.add_subparsers(dest="agents_command", required=True)
    agents_sub.add_parser("list", parents=[common], help="configured and stored agents")
    set_ = agents_sub.add_parser(
        "set",
        parents=[common],
        help="store an agent or change fields of a stored one",
        description="Fields not given keep their stored value; '' clears a text field.",
    )
    set_.add_argument("id", help="agent id (letters, digits, _ and -)")
    set_.add_argument("--provider", metavar="P", help="a provider defined under providers")
    set_.add_argument("--model", metavar="M")
    set_.add_argument("--system-prompt", metavar="TEXT")
    set_.add_argument("--max-iterations", type=int, metavar="N")
    delete = agents_sub.add_parser("delete", parents=[common], help="delete a stored agent")
    delete.add_argument("id")


def run(config: Config, args: argparse.Namespace) -> int:
    if args.agents_command == "list":
        return asyncio.run(list_agents(config))
    if args.agents_command == "set":
        changes = {name: getattr(args, name) for name in SETTABLE}
        return asyncio.run(set_agent(config, args.id, changes))
    return asyncio.run(delete_agent(config, args.id))
