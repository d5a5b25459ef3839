"""``loopgate cron list [--json]``, ``remove ID`` and ``run ID`` in-process against a temporary
SQLite database that holds jobs as the server writes them."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_core import parse_schedule
from bot import cli
from bot.storage import open_database
from bot.storage.cron import SqlCronJobs
from bot.storage.inbox import InboxState, SqlInbox
from bot.storage.models import utcnow
from channels import ChatRef, ChatType, InboundMessage, Sender

NOW = datetime(2026, 12, 4, 23, 0, tzinfo=UTC)
ORIGIN = InboundMessage(
    chat=ChatRef("telegram", "100", ChatType.DIRECT),
    message_id="9",
    sender=Sender("1", "Ann"),
    text="remind me",
    received_at=NOW,
)


class Cli:
    def __init__(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.url = f"sqlite+aiosqlite:///{tmp_path / 'cron.db'}"
        self.config = tmp_path / "config.yaml"
        self.config.write_text(yaml.safe_dump({"database": {"url": self.url}}))
        self.capsys = capsys

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        code = cli.main([*argv, "--config", str(self.config)])
        captured = self.capsys.readouterr()
        assert "Traceback" not in captured.err
        return code, captured.out, captured.err

    def db(self, action: Any) -> Any:
        async def run() -> Any:
            async with await open_database(self.url) as db:
                return await action(SqlCronJobs(db), SqlInbox(db, owner="server"))

        result = asyncio.run(run())
        self.capsys.readouterr()  # the server side's log is not the command's output
        return result


@pytest.fixture
def lg(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(tmp_path, capsys)


def add_two(lg: Cli) -> tuple[str, str]:
    async def action(jobs: SqlCronJobs, inbox: SqlInbox) -> tuple[str, str]:
        daily = parse_schedule("0 9 * * 1-5", "Europe/Berlin", NOW, min_interval=60)
        first = await jobs.add(
            agent_id="main",
            session_key="agent:main:telegram:direct:100",
            origin=ORIGIN,
            schedule=daily,
            message="send the invoices",
            next_run_at=daily.first_run(NOW),
        )
        once = parse_schedule("in 10m", "UTC", NOW, min_interval=60)
        second = await jobs.add(
            agent_id="main",
            session_key="agent:main:telegram:direct:100",
            origin=ORIGIN,
            schedule=once,
            message="call Anna",
            next_run_at=once.first_run(NOW),
        )
        entry = await inbox.add(ORIGIN, session_key="k", agent_id="main")
        await inbox.finish(entry, InboxState.ANSWERED, "NO_REPLY")
        at = once.first_run(NOW)
        assert at is not None
        await jobs.advance(
            second.id, expected=at, next_run_at=None, outcome="fired", ran_at=at, entry=entry
        )
        return first.id, second.id

    ids: tuple[str, str] = lg.db(action)
    return ids


def test_list_shows_next_and_last_runs_with_the_runs_outcome(lg: Cli) -> None:
    assert lg("cron") == (0, "cron: no scheduled jobs\n", "")
    daily, once = add_two(lg)
    code, out, _ = lg("cron", "list")
    assert code == 0
    header, first, second = out.splitlines()
    assert header.split() == [
        "ID",
        "AGENT",
        "CHAT",
        "SCHEDULE",
        "NEXT",
        "RUN",
        "LAST",
        "RUN",
        "OUTCOME",
    ]
    assert first.startswith(daily) and "telegram:100" in first and "0 9 * * 1-5" in first
    assert "2026-12-07 08:00:00Z" in first  # Monday 09:00 Berlin
    assert second.startswith(once) and "in 10m" in second
    assert second.split()[-6:] == [
        "-",
        "2026-12-04",
        "23:10:00Z",
        "fired:",
        "answered",
        "(NO_REPLY)",
    ]


def test_list_json(lg: Cli) -> None:
    daily, once = add_two(lg)
    code, out, _ = lg("cron", "list", "--json")
    assert code == 0
    rows = {row["id"]: row for row in json.loads(out)}
    assert rows[daily]["next_run"] == "2026-12-07T08:00:00+00:00"
    assert rows[daily]["schedule"] == "0 9 * * 1-5" and rows[daily]["timezone"] == "Europe/Berlin"
    assert rows[daily]["last_run"] is None and rows[daily]["last_outcome"] is None
    assert rows[once]["next_run"] is None
    assert rows[once]["last_outcome"] == "fired: answered (NO_REPLY)"
    assert (rows[once]["agent"], rows[once]["chat"]) == ("main", "telegram:100")


def test_remove_and_run(lg: Cli) -> None:
    daily, once = add_two(lg)
    assert lg("cron", "remove", daily) == (0, f"job {daily} removed\n", "")
    code, _, err = lg("cron", "remove", daily)
    assert code == 1 and f"no scheduled job {daily}" in err
    before = utcnow()
    code, out, _ = lg("cron", "run", once)
    assert code == 0 and "due now" in out
    job = lg.db(lambda jobs, inbox: jobs.get(once))
    assert job.next_run_at is not None and before <= job.next_run_at <= utcnow()
    assert lg.db(lambda jobs, inbox: jobs.get(daily)) is None
    code, _, err = lg("cron", "run", "nope")
    assert code == 1 and "no scheduled job nope" in err
    assert timedelta(0) <= utcnow() - before


def test_run_refuses_a_paused_job_instead_of_promising_a_run(lg: Cli) -> None:
    _, once = add_two(lg)
    assert lg.db(lambda jobs, inbox: jobs.set_paused(once, True))
    code, out, err = lg("cron", "run", once)
    assert code == 1 and out == "" and f"job {once} is paused" in err
    assert lg.db(lambda jobs, inbox: jobs.set_paused(once, False))
    assert lg("cron", "run", once)[0] == 0
