"""``loopgate links`` (``bot/cli/links.py``), in-process against a temporary SQLite database:
output, exit codes, refused changes without a traceback, the unknown-agent warning and the
cache_ttl note; and the helpers ``teams`` shares."""

from __future__ import annotations

import asyncio
import io
import sys
from pathlib import Path

import pytest

from agent_core.orchestration.records import AgentLink, LinkDirection
from bot.cli import links as links_cli
from bot.config import AgentConfig, parse_config
from bot.storage import SqlAgentStore, open_database
from tests.cli_support import Cli, table


@pytest.fixture
def lg(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(tmp_path, capsys)


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


def test_table_lines_align_columns_and_drop_trailing_blanks() -> None:
    lines = links_cli.table_lines([("A", "LONG HEADER", "C"), ("value", "x", "")])
    assert lines == ["A      LONG HEADER  C", "value  x"]
    assert lines[0].index("LONG") == lines[1].index("x")


def test_output_goes_to_the_streams_of_the_moment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = parse_config({"database": {"url": f"sqlite+aiosqlite:///{tmp_path / 'l.db'}"}}, {})
    swapped = io.StringIO()
    monkeypatch.setattr(sys, "stdout", swapped)  # after the module was imported
    assert asyncio.run(links_cli.list_links(config)) == 0
    assert "no agent links" in swapped.getvalue()


def test_a_stored_agent_is_no_typo(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'w.db'}"
    config = parse_config({"database": {"url": url}, "agents": {"default": "front"}}, {})
    err = io.StringIO()

    async def warn() -> None:
        async with await open_database(url) as db:
            await SqlAgentStore(db).upsert(AgentConfig(id="stored"))
            ids = ["main", "front", "stored", "typo", "typo"]
            await links_cli.warn_unknown(config, db, ids, err)

    asyncio.run(warn())
    assert err.getvalue().splitlines() == [
        "warning: agent 'typo' is neither in config.yaml nor stored (loopgate agents set): "
        "a typo? (the change is made anyway)"
    ]


def test_an_unreachable_database_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    config = parse_config({"database": {"url": "postgresql+asyncpg://x:y@127.0.0.1:1/none"}}, {})
    link = AgentLink("a", "b", LinkDirection.OUTBOUND, "")
    assert asyncio.run(links_cli.add_link(config, link)) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("loopgate: ") and captured.out == ""
