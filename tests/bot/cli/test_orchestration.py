"""``loopgate links``, ``loopgate teams`` and ``loopgate tasks``, run in-process against a
temporary SQLite database: output, exit codes, refused changes without a traceback, the
unknown-agent warning and the cache_ttl note."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_core.orchestration.records import AgentLink, LinkDirection, TaskStatus, Team
from bot import cli
from bot.storage import SqlOrchestrationStore, open_database


class Cli:
    """``loopgate ... --config <temp config>`` in-process, returning (code, stdout, stderr)."""

    def __init__(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.url = f"sqlite+aiosqlite:///{tmp_path / 'orchestration.db'}"
        self.config = tmp_path / "config.yaml"
        data = {
            "database": {"url": self.url},
            "agents": {"cache_ttl": 42, "list": [{"id": "support"}, {"id": "coder"}]},
        }
        self.config.write_text(yaml.safe_dump(data))
        self.capsys = capsys

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        code = cli.main([*argv, "--config", str(self.config)])
        captured = self.capsys.readouterr()
        assert "Traceback" not in captured.err
        return code, captured.out, captured.err

    def store(self, action: Any) -> Any:
        """Run ``action(store)`` on the same database, as the server would."""

        async def run() -> Any:
            async with await open_database(self.url) as db:
                return await action(SqlOrchestrationStore(db))

        return asyncio.run(run())


@pytest.fixture
def lg(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(tmp_path, capsys)


def table(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines()]


# --- links ----------------------------------------------------------------------------------


def test_links_add_list_remove(lg: Cli) -> None:
    code, out, _ = lg("links", "list")
    assert code == 0 and "no agent links" in out
    code, out, err = lg("links", "add", "main", "support", "--description", "billing questions")
    assert code == 0 and err == ""
    assert "linked main → support (outbound)" in out
    assert "a running server applies it within agents.cache_ttl (42 s)" in out
    code, out, err = lg("links", "add", "coder", "main", "--direction", "bidirectional")
    assert code == 0 and err == ""
    code, out, _ = lg("links", "list")
    assert code == 0
    assert table(out) == [
        ["SOURCE", "TARGET", "DIRECTION", "DESCRIPTION"],
        ["coder", "main", "bidirectional"],
        ["main", "support", "outbound", "billing", "questions"],
    ]
    links = lg.store(lambda s: s.links_of("main"))
    assert AgentLink("main", "support", LinkDirection.OUTBOUND, "billing questions") in links

    code, out, _ = lg("links", "remove", "main", "support")
    assert code == 0 and "removed link main → support" in out and "cache_ttl (42 s)" in out
    code, out, err = lg("links", "remove", "main", "support")
    assert code == 1 and out == "" and "loopgate: no link from main to support" in err
    assert [k.source for k in lg.store(lambda s: s.list_links())] == ["coder"]


def test_links_add_replaces_the_pair(lg: Cli) -> None:
    lg("links", "add", "main", "support", "--description", "old")
    code, _, _ = lg("links", "add", "main", "support", "--direction", "inbound")
    assert code == 0
    assert lg.store(lambda s: s.list_links()) == [
        AgentLink("main", "support", LinkDirection.INBOUND, "")
    ]


def test_links_refusals_are_one_line_and_exit_1(lg: Cli) -> None:
    code, out, err = lg("links", "add", "main", "main")
    assert (code, out) == (1, "")
    assert err == "loopgate: an agent can't link to itself (main)\n"
    code, _, err = lg("links", "add", "main", "no spaces")
    assert code == 1 and err.startswith("loopgate: invalid agent id 'no spaces'")
    assert lg.store(lambda s: s.list_links()) == []
    with pytest.raises(SystemExit) as exit_info:
        lg("links", "add", "a", "b", "--direction", "sideways")
    assert exit_info.value.code == 2


def test_unknown_agents_are_warned_about_but_still_linked(lg: Cli) -> None:
    code, out, err = lg("links", "add", "main", "ghost")
    assert code == 0 and "linked main → ghost" in out
    assert err.startswith("warning: agent 'ghost' is neither in config.yaml nor stored")
    assert "'main'" not in err  # "main" always exists
    assert [k.target for k in lg.store(lambda s: s.list_links())] == ["ghost"]
    # An agent stored in the database (loopgate agents set) is known too.
    assert lg("agents", "set", "ghost", "--model", "m")[0] == 0
    code, _, err = lg("links", "add", "support", "ghost")
    assert code == 0 and err == ""


# --- teams ----------------------------------------------------------------------------------


def test_teams_create_list_members_delete(lg: Cli) -> None:
    code, out, _ = lg("teams", "list")
    assert code == 0 and "no teams" in out
    code, out, err = lg(
        "teams", "create", "dev", "--lead", "main", "--member", "coder", "--member", "support"
    )
    assert code == 0 and err == ""
    assert "created team dev: lead main, members coder, support" in out
    assert "cache_ttl (42 s)" in out
    code, _, _ = lg(
        "teams",
        "create",
        "ops",
        "--lead",
        "oncall",
        "--shared-workspace",
        "--description",
        "on call",
    )
    assert code == 0
    assert lg("teams", "create", "qa", "--lead", "tester", "--scope", "user")[0] == 0
    code, out, _ = lg("teams", "list")
    assert table(out) == [
        ["TEAM", "LEAD", "MEMBERS", "WORKSPACE"],
        ["dev", "main", "coder,support", "per-chat"],
        ["ops", "oncall", "-", "shared"],
        ["qa", "tester", "-", "per-user"],
    ]
    ops = lg.store(lambda s: s.get_team("ops"))
    assert ops.settings.shared_workspace and ops.description == "on call"

    code, out, _ = lg("teams", "remove-member", "dev", "support")
    assert code == 0 and "removed support from team dev (members: coder)" in out
    code, out, _ = lg("teams", "add-member", "qa", "support")
    assert code == 0 and "added support to team qa (members: support)" in out
    assert lg.store(lambda s: s.team_of("support")).id == "qa"

    lg.store(lambda s: s.create_task("dev", "t", "d", created_by="main"))
    code, out, _ = lg("teams", "delete", "dev")
    assert code == 0 and "deleted team dev and its 1 task(s)" in out
    code, _, err = lg("teams", "delete", "dev")
    assert code == 1 and "loopgate: no team 'dev'" in err
    assert [t.id for t in lg.store(lambda s: s.list_teams())] == ["ops", "qa"]


def test_teams_refusals(lg: Cli) -> None:
    assert lg("teams", "create", "dev", "--lead", "main", "--member", "coder")[0] == 0
    cases = [
        (("teams", "create", "dev", "--lead", "support"), "team 'dev' exists"),
        (("teams", "create", "qa", "--lead", "coder"), "coder is already a member of team dev"),
        (("teams", "add-member", "nope", "support"), "no team 'nope'"),
        (("teams", "add-member", "dev", "main"), "main already leads team dev"),
        (("teams", "remove-member", "dev", "main"), "main leads team dev"),
        (("teams", "remove-member", "dev", "support"), "support is not a member of team dev"),
        (("teams", "create", "bad id", "--lead", "x"), "invalid team id 'bad id'"),
    ]
    for argv, message in cases:
        code, out, err = lg(*argv)
        assert (code, out) == (1, ""), argv
        assert err.startswith(f"loopgate: {message}"), (argv, err)
        assert len(err.splitlines()) == 1
    assert [t.id for t in lg.store(lambda s: s.list_teams())] == ["dev"]
    with pytest.raises(SystemExit) as exit_info:
        lg("teams", "create", "qa")  # --lead is required
    assert exit_info.value.code == 2


def test_teams_warn_about_unknown_agents(lg: Cli) -> None:
    code, out, err = lg("teams", "create", "dev", "--lead", "main", "--member", "newbie")
    assert code == 0 and "created team dev" in out
    assert "warning: agent 'newbie'" in err and "'main'" not in err
    code, _, err = lg("teams", "add-member", "dev", "ghost")
    assert code == 0 and "warning: agent 'ghost'" in err
    code, _, err = lg("teams", "add-member", "dev", "support")
    assert code == 0 and err == ""
    team = lg.store(lambda s: s.get_team("dev"))
    assert team.members == ("newbie", "ghost", "support")


# --- tasks ----------------------------------------------------------------------------------


def test_tasks_list(lg: Cli) -> None:
    code, _, err = lg("tasks", "list", "--team", "dev")
    assert code == 1 and "loopgate: no team 'dev'" in err
    lg.store(lambda s: s.create_team(Team("dev", "main", ("coder",))))
    code, out, _ = lg("tasks", "list", "--team", "dev")
    assert code == 0 and "team dev has no tasks" in out

    async def board(s: SqlOrchestrationStore) -> list[str]:
        first = await s.create_task("dev", "Write the docs", "", created_by="main")
        second = await s.create_task("dev", "Fix bug", "", created_by="main", assignee="coder")
        await s.claim_task(second.id, "coder")
        await s.finish_task(
            second.id, "coder", TaskStatus.COMPLETED, "\nfixed in parser.py\nsecond line"
        )
        return [first.id, second.id]

    first, second = lg.store(board)
    code, out, _ = lg("tasks", "list", "--team", "dev")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["ID", "STATUS", "ASSIGNEE", "TITLE"]
    assert lines[1].split() == [first, "open", "-", "Write", "the", "docs"]
    assert lines[2].split() == [second, "completed", "coder", "Fix", "bug"]
    assert lines[3] == "    result: fixed in parser.py"  # the first line only
    assert len(lines) == 4
    assert lines[1].index("open") == lines[2].index("completed")  # aligned columns

    code, out, _ = lg("tasks", "list", "--team", "dev", "--status", "open")
    assert code == 0 and [line.split()[0] for line in out.splitlines()[1:]] == [first]
    code, out, _ = lg("tasks", "list", "--team", "dev", "--status", "failed")
    assert code == 0 and "team dev has no failed tasks" in out
