"""``loopgate teams list|create|add-member|remove-member|delete`` and ``loopgate tasks list``.

A team is a lead plus members working from one task board; an agent is in at most one team.
``--shared-workspace`` gives the whole team one workspace, otherwise each chat (``--scope
chat``) or each user (``--scope user``) gets its own team workspace. Teams live in the database:
a running server applies a change within ``agents.cache_ttl`` seconds. ``loopgate tasks list``
shows a team's board, for an operator following (or debugging) what the agents do.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING, Any, TextIO

from agent_core.orchestration import TaskStatus, Team, TeamSettings, WorkspaceScope
from bot.cli.links import print_table, streams, table_lines, ttl_note, warn_unknown, with_store
from bot.config import Config

if TYPE_CHECKING:
    from bot.storage import Database
    from bot.storage.orchestration import SqlOrchestrationStore

TITLE_CHARS = 60
RESULT_CHARS = 100


def _workspace(team: Team) -> str:
    if team.settings.shared_workspace:
        return "shared"
    return f"per-{team.settings.workspace_scope}"


async def list_teams(
    config: Config, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    out, err = streams(out, err)

    async def action(store: SqlOrchestrationStore, db: Database) -> int:
        teams = await store.list_teams()
        if not teams:
            print("no teams (loopgate teams create TEAM --lead AGENT)", file=out)
            return 0
        rows = [("TEAM", "LEAD", "MEMBERS", "WORKSPACE")]
        rows += [(t.id, t.lead, ",".join(t.members) or "-", _workspace(t)) for t in teams]
        print_table(rows, out)
        return 0

    return await with_store(config, action, err)


async def create_team(
    config: Config, team: Team, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    out, err = streams(out, err)

    async def action(store: SqlOrchestrationStore, db: Database) -> int:
        stored = await store.create_team(team)
        await warn_unknown(config, db, stored.agents, err)
        members = ", ".join(stored.members) or "none yet"
        print(
            f"created team {stored.id}: lead {stored.lead}, members {members}, "
            f"workspace {_workspace(stored)}; {ttl_note(config)}",
            file=out,
        )
        return 0

    return await with_store(config, action, err)


async def change_member(
    config: Config,
    team_id: str,
    agent_id: str,
    *,
    add: bool,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Add ``agent_id`` to the team (``add``) or remove it."""
    out, err = streams(out, err)

    async def action(store: SqlOrchestrationStore, db: Database) -> int:
        if add:
            team = await store.add_member(team_id, agent_id)
            await warn_unknown(config, db, [agent_id], err)
        else:
            team = await store.remove_member(team_id, agent_id)
        verb = "added" if add else "removed"
        members = ", ".join(team.members) or "none"
        print(
            f"{verb} {agent_id} {'to' if add else 'from'} team {team.id} (members: {members}); "
            f"{ttl_note(config)}",
            file=out,
        )
        return 0

    return await with_store(config, action, err)


async def delete_team(
    config: Config, team_id: str, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    out, err = streams(out, err)

    async def action(store: SqlOrchestrationStore, db: Database) -> int:
        tasks = len(await store.list_tasks(team_id))
        if not await store.delete_team(team_id):
            print(f"loopgate: no team {team_id!r}", file=err)
            return 1
        print(f"deleted team {team_id} and its {tasks} task(s); {ttl_note(config)}", file=out)
        return 0

    return await with_store(config, action, err)


async def list_tasks(
    config: Config,
    team_id: str,
    status: TaskStatus | None = None,
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """The team's tasks, oldest first, each with the first line of its result."""
    out, err = streams(out, err)

    async def action(store: SqlOrchestrationStore, db: Database) -> int:
        if await store.get_team(team_id) is None:
            print(f"loopgate: no team {team_id!r}", file=err)
            return 1
        tasks = await store.list_tasks(team_id, status)
        if not tasks:
            which = f" {status}" if status else ""
            print(f"team {team_id} has no{which} tasks", file=out)
            return 0
        rows = [("ID", "STATUS", "ASSIGNEE", "TITLE")]
        rows += [
            (t.id, str(t.status), t.assignee or "-", _cut(t.title, TITLE_CHARS)) for t in tasks
        ]
        header, *lines = table_lines(rows)
        print(header, file=out)
        for line, task in zip(lines, tasks, strict=True):
            print(line, file=out)
            if task.result:
                print(f"    result: {_first_line(task.result)}", file=out)
        return 0

    return await with_store(config, action, err)


def _first_line(text: str) -> str:
    lines = text.strip().splitlines() or [""]
    return _cut(lines[0], RESULT_CHARS)


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """``loopgate teams ...`` and ``loopgate tasks ...`` on the subcommand parser ``sub``."""
    teams = sub.add_parser("teams", parents=[common], help="agent teams and their members")
    teams_sub = teams.add_subparsers(dest="teams_command", required=True)
    teams_sub.add_parser("list", parents=[common], help="every team")
    create = teams_sub.add_parser(
        "create",
        parents=[common],
        help="create a team",
        description="An agent is in at most one team. Without --shared-workspace each chat "
        "(--scope chat) or user (--scope user) gets its own team workspace.",
    )
    create.add_argument("team", help="team id (letters, digits, _ and -)")
    create.add_argument("--lead", required=True, metavar="AGENT")
    create.add_argument(
        "--member", action="append", default=[], metavar="AGENT", help="repeat for each member"
    )
    create.add_argument("--shared-workspace", action="store_true", help="one workspace per team")
    create.add_argument("--scope", choices=[s.value for s in WorkspaceScope], default="chat")
    create.add_argument("--description", default="", metavar="TEXT")
    for name, help_ in (("add-member", "add an agent"), ("remove-member", "remove a member")):
        change = teams_sub.add_parser(name, parents=[common], help=help_)
        change.add_argument("team")
        change.add_argument("agent")
    delete = teams_sub.add_parser("delete", parents=[common], help="delete a team and its tasks")
    delete.add_argument("team")

    tasks = sub.add_parser("tasks", parents=[common], help="the task board of a team")
    tasks_sub = tasks.add_subparsers(dest="tasks_command", required=True)
    list_ = tasks_sub.add_parser("list", parents=[common], help="a team's tasks, oldest first")
    list_.add_argument("--team", required=True)
    list_.add_argument("--status", choices=[s.value for s in TaskStatus])


def run(config: Config, args: argparse.Namespace) -> int:
    """Dispatch ``loopgate teams ...`` and ``loopgate tasks ...``."""
    if args.command == "tasks":
        status = TaskStatus(args.status) if args.status else None
        return asyncio.run(list_tasks(config, args.team, status))
    command = args.teams_command
    if command == "list":
        return asyncio.run(list_teams(config))
    if command == "create":
        team = Team(
            args.team,
            args.lead,
            tuple(args.member),
            TeamSettings(args.shared_workspace, WorkspaceScope(args.scope)),
            args.description,
        )
        return asyncio.run(create_team(config, team))
    if command in ("add-member", "remove-member"):
        add = command == "add-member"
        return asyncio.run(change_member(config, args.team, args.agent, add=add))
    return asyncio.run(delete_team(config, args.team))
