"""``loopgate traces`` (``bot/cli/traces.py``): the newest top-level runs printed as trees with
their child runs nested, filtered by session and limited by ``--last``; an empty result and an
unreachable database are one line each."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest
import yaml

from agent_core.tracing import Trace
from bot import cli
from bot.cli.traces import print_traces
from bot.config import Config, parse_config
from bot.storage import SqlTraceStore, open_database
from tests.bot.storage.test_traces import run_trace, tool_span


def config_at(tmp_path: Path) -> Config:
    return parse_config({"database": {"url": f"sqlite+aiosqlite:///{tmp_path / 't.db'}"}}, {})


async def save(config: Config, *traces: Trace) -> None:
    async with await open_database(config.database.url) as db:
        for trace in traces:
            await SqlTraceStore(db).save_trace(trace)


def headers(out: str) -> list[str]:
    return [line for line in out.splitlines() if " run=run-" in line]


def test_loopgate_traces_prints_the_whole_tree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'traces.db'}"
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump({"database": {"url": url}}))
    lead = run_trace("lead", tool="spawn")
    worker = run_trace("worker", parent=lead, span_id=tool_span(lead), offset=1, tool="spawn")
    helper = run_trace("helper", parent=worker, span_id=tool_span(worker), offset=2)

    async def save() -> None:
        async with await open_database(url) as db:
            for trace in (helper, worker, lead):
                await SqlTraceStore(db).save_trace(trace)

    asyncio.run(save())
    assert cli.main(["traces", "--config", str(config_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    headers = [line for line in lines if " run=run-" in line]
    assert len(headers) == 3  # one tree: the children are not listed as traces of their own
    assert "agent=lead" in headers[0] and not headers[0].startswith(" ")
    assert headers[1].lstrip().startswith("↳ ") and "agent=worker" in headers[1]
    assert headers[2].lstrip().startswith("↳ ") and "agent=helper" in headers[2]
    assert len(headers[2]) - len(headers[2].lstrip()) > len(headers[1]) - len(headers[1].lstrip())


async def test_no_traces_is_one_line_naming_the_session(tmp_path: Path) -> None:
    config = config_at(tmp_path)
    await save(config, run_trace("other", session="s-other"))
    out = io.StringIO()
    assert await print_traces(config, session="s-none", out=out) == 0
    assert out.getvalue() == "no traces for session s-none\n"
    empty = config_at(tmp_path / "fresh")
    (tmp_path / "fresh").mkdir()
    out = io.StringIO()
    assert await print_traces(empty, out=out) == 0
    assert out.getvalue() == "no traces\n"


async def test_session_and_last_choose_the_newest_trees(tmp_path: Path) -> None:
    config = config_at(tmp_path)
    await save(
        config,
        run_trace("a1", session="s-a", offset=0),
        run_trace("b1", session="s-b", offset=1),
        run_trace("a2", session="s-a", offset=2),
        run_trace("a3", session="s-a", offset=3),
    )
    out = io.StringIO()
    assert await print_traces(config, session="s-a", last=2, out=out) == 0
    shown = headers(out.getvalue())
    assert len(shown) == 2
    assert "agent=a3" in shown[0] and "agent=a2" in shown[1]


async def test_each_tree_ends_with_a_blank_line(tmp_path: Path) -> None:
    config = config_at(tmp_path)
    await save(config, run_trace("one", offset=0), run_trace("two", offset=1))
    out = io.StringIO()
    assert await print_traces(config, out=out) == 0
    trees = out.getvalue().split("\n\n")
    assert [len(headers(t)) for t in trees if t] == [1, 1]
    assert out.getvalue().endswith("\n\n")


async def test_an_unreachable_database_is_exit_2_and_prints_no_traces(
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = parse_config(
        {"database": {"url": "postgresql+asyncpg://nobody:secret@127.0.0.1:1/none"}}, {}
    )
    out = io.StringIO()
    assert await print_traces(config, out=out) == 2
    assert out.getvalue() == ""
    assert capsys.readouterr().err.startswith("loopgate: ")
