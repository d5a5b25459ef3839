"""``loopgate inbox [--last N]`` and ``loopgate inbox retry ID`` (``bot/cli/inbox.py``): the
table of unanswered messages (age, state, session, a preview, the reason) and a retry that the
running service picks up."""

from __future__ import annotations

import argparse
import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.app import Loopgate
from bot.cli import inbox as inbox_cli
from bot.pipeline.replay import sweep
from bot.storage import open_database
from bot.storage.inbox import InboxEntry, InboxState, SqlInbox
from bot.storage.models import utcnow
from tests.bot.storage.test_inbox import KEY, left_by_a_dead_process, message
from tests.conftest import ChatDriver, make_config
from tests.fakes.llm_server import FakeLLM, text

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def listing(last: int = 50) -> argparse.Namespace:
    return argparse.Namespace(inbox_command=None, last=last)


def entry(
    body: str,
    *,
    state: InboxState = InboxState.FAILED,
    reason: str | None = None,
    answer: str | None = None,
    parts: list[str] | None = None,
) -> InboxEntry:
    return InboxEntry(
        id=7,
        session_key=KEY,
        agent_id="main",
        state=state,
        reason=reason,
        attempts=1,
        message=message(body),
        answer=answer,
        parts=parts or [],
        received_at=NOW - timedelta(seconds=90),
        updated_at=NOW,
        owner=None,
    )


async def test_a_retried_entry_is_picked_up_by_the_running_service(
    app: Loopgate, dm: ChatDriver, llm: FakeLLM, tmp_path: Path
) -> None:
    assert app.inbox is not None
    entry_id = await app.inbox.add(message("again please"), session_key=KEY, agent_id="main")
    await app.inbox.finish(entry_id, InboxState.FAILED, "delivery: 500")
    llm.script(text("here it is"))
    out = io.StringIO()
    args = argparse.Namespace(inbox_command="retry", id=entry_id, last=50)
    assert await inbox_cli.run(app.config, args, out) == 0
    assert "queued again" in out.getvalue()
    await sweep(app.gateway, app.inbox, max_age=3600)
    await dm.wait_for(lambda: dm.texts() == ["here it is"])


async def test_inbox_command_lists_unanswered_with_age_state_reason(
    tmp_path: Path, llm: FakeLLM
) -> None:
    config = make_config(tmp_path, llm)
    await left_by_a_dead_process(
        config, "where is my answer", received_at=utcnow() - timedelta(minutes=5)
    )
    out = io.StringIO()
    assert await inbox_cli.run(config, listing(), out) == 0
    lines = out.getvalue().splitlines()
    assert lines[0].split()[:4] == ["ID", "AGE", "STATE", "SESSION"]
    assert "5m" in lines[1] and "running" in lines[1] and "where is my answer" in lines[1]


async def test_an_empty_inbox_says_every_message_was_answered(tmp_path: Path, llm: FakeLLM) -> None:
    out = io.StringIO()
    assert await inbox_cli.run(make_config(tmp_path, llm), listing(), out) == 0
    assert out.getvalue() == "inbox: every message was answered\n"


async def test_last_limits_the_rows_newest_first_and_zero_still_shows_one(
    tmp_path: Path, llm: FakeLLM
) -> None:
    config = make_config(tmp_path, llm)
    await left_by_a_dead_process(config, "first", "second", "third")
    for last, expected in ((2, ["third", "second"]), (0, ["third"])):
        out = io.StringIO()
        assert await inbox_cli.run(config, listing(last), out) == 0
        rows = out.getvalue().splitlines()[1:]
        assert [row.split()[4] for row in rows] == expected


async def test_retrying_an_unknown_entry_is_exit_1_and_changes_nothing(
    tmp_path: Path, llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    config = make_config(tmp_path, llm)
    [entry_id] = await left_by_a_dead_process(config, "kept")
    out = io.StringIO()
    args = argparse.Namespace(inbox_command="retry", id=entry_id + 100, last=50)
    assert await inbox_cli.run(config, args, out) == 1
    assert out.getvalue() == ""
    assert capsys.readouterr().err == f"loopgate: no inbox entry {entry_id + 100}\n"
    async with await open_database(config.database.url) as db:
        kept = await SqlInbox(db, owner="test").get(entry_id)
    assert kept is not None and kept.state is InboxState.RUNNING


def test_a_row_previews_the_text_on_one_line_cut_at_the_width() -> None:
    row = inbox_cli._row(entry("line one\n\n  line   two " + "x" * 60, reason="boom"), NOW)
    preview = "line one line two " + "x" * 21 + "…"
    assert len(preview) == inbox_cli.PREVIEW_CHARS
    assert row.split()[:3] == ["7", "1m", "failed"]
    assert row.endswith(f"{preview}  boom")


def test_a_row_counts_the_parts_of_an_answer_being_delivered() -> None:
    resuming = entry(
        "hi", state=InboxState.QUEUED, reason="replayed", answer="a b c", parts=["1", "2"]
    )
    assert inbox_cli._row(resuming, NOW).endswith(
        "hi" + " " * 38 + "  replayed; 2 part(s) delivered"
    )
    fresh = entry("hi", state=InboxState.RUNNING, answer="a", parts=[])
    assert inbox_cli._row(fresh, NOW).endswith("  0 part(s) delivered")
    # An ended entry's saved answer is no news: only its reason is shown.
    failed = entry("hi", reason="delivery: 500", answer="a", parts=["1"])
    assert inbox_cli._row(failed, NOW).endswith("hi" + " " * 38 + "  delivery: 500")


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(-5, "0s"), (0, "0s"), (59, "59s"), (60, "1m"), (3599, "59m"), (3600, "1h"), (86400, "1d")],
)
def test_age_uses_the_largest_whole_unit(seconds: int, shown: str) -> None:
    assert inbox_cli._age(NOW, NOW - timedelta(seconds=seconds)) == shown
