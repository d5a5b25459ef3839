"""``loopgate teams`` and ``loopgate tasks`` (``bot/cli/teams.py``), in-process against a
temporary SQLite database: output, exit codes, refused changes without a traceback and the
unknown-agent warning."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_core.orchestration.records import TaskStatus, Team
from bot.cli import teams as teams_cli
from bot.storage import SqlOrchestrationStore
from tests.cli_support import Cli, table


@pytest.fixture
def lg(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(tmp_path, capsys)


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


def test_long_titles_and_results_are_cut_to_one_line(lg: Cli) -> None:
    lg.store(lambda s: s.create_team(Team("dev", "main", ("coder",))))
    title = "A title\nover   two lines " + "x" * 100

    async def board(s: SqlOrchestrationStore) -> None:
        task = await s.create_task("dev", title, "", created_by="main", assignee="coder")
        await s.claim_task(task.id, "coder")
        await s.finish_task(task.id, "coder", TaskStatus.FAILED, "  \n" + "y" * 300 + "\nz")

    lg.store(board)
    lg.capsys.readouterr()  # the store's own log lines
    code, out, _ = lg("tasks", "list", "--team", "dev")
    assert code == 0
    header, row, result = out.splitlines()
    shown = row[header.index("TITLE") :]
    assert shown.startswith("A title over two lines xx") and shown.endswith("…")
    assert len(shown) == teams_cli.TITLE_CHARS
    assert result == "    result: " + "y" * (teams_cli.RESULT_CHARS - 1) + "…"


def test_cut() -> None:
    assert teams_cli._cut("  a \t b  ", 10) == "a b"
    assert teams_cli._cut("abcdef", 6) == "abcdef"
    assert teams_cli._cut("abcdefg", 6) == "abcde…"
    assert teams_cli._first_line("") == ""
