"""Scheduled jobs end to end: the fake model calls the ``cron`` tool in a Telegram chat, the
ticker fires the job into the inbox, and the answer reaches the fake Telegram through the
normal pipeline (typing, NO_REPLY, delivery), once.

Restarts (SIGTERM, SIGKILL, catch-up, missed) are in ``test_cron_restart.py``; several
processes in ``tests/bot/scheduling/test_cluster.py``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Row, select

from bot.app import Loopgate
from bot.config import Config
from bot.scheduling.ticker import Ticker
from bot.storage import SqlTraceStore
from bot.storage.cron import SqlCronJobs, StoredCronJob
from bot.storage.inbox import InboxState
from bot.storage.models import InboxRow
from tests.conftest import make_config
from tests.fakes.llm_server import FakeLLM, call, text, tool_calls
from tests.fakes.slack_events import message_event
from tests.fakes.slack_server import FakeSlack
from tests.fakes.telegram_server import FakeTelegram
from tests.slack_support import slack_section
from tests.telegram_support import telegram_section
from tests.waiting import wait_until

CRON_RUN = "[Cron Job]"  # in the system prompt of a scheduled job's run only


def cron_config(tmp_path: Path, llm: FakeLLM, channels: dict[str, Any], **cron: Any) -> Config:
    return make_config(tmp_path, llm, channels=channels, cron=cron)


def add(schedule: str, message: str) -> Any:
    return tool_calls(call("cron", {"action": "add", "schedule": schedule, "message": message}))


def ticker(app: Loopgate) -> Ticker:
    assert app.scheduling is not None
    return app.scheduling.ticker


async def only_job(app: Loopgate) -> StoredCronJob:
    [job] = await SqlCronJobs(app.db).list()
    return job


async def cron_entries(app: Loopgate) -> list[Row[Any]]:
    query = select(InboxRow).order_by(InboxRow.id)
    rows = await app.db.run_read(lambda conn: conn.execute(query).all())
    return [row for row in rows if "cron_job" in row.message.get("metadata", {})]


async def next_passes(app: Loopgate, count: int = 2) -> None:
    """Wait for ``count`` more ticker passes: a window in which a double would have fired."""
    target = ticker(app).passes + count
    await wait_until(lambda: ticker(app).passes >= target, timeout=10)


def cron_requests(llm: FakeLLM) -> list[dict[str, Any]]:
    return [r.json for r in llm.chat_requests if CRON_RUN in str(r.json["messages"][0]["content"])]


async def test_a_reminder_in_3s_is_delivered_once(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    llm.script(add("in 3s", "Remind the user to call Anna."), text("OK, in 3 seconds."))
    llm.route(CRON_RUN, text("Time to call **Anna**!"))
    config = cron_config(tmp_path, llm, {"telegram": telegram_section(tg)})
    async with Loopgate(config) as app:
        tg.push(tg.private_message("remind me in 3s to call Anna"))
        await tg.wait_for(lambda: tg.texts() == ["OK, in 3 seconds."])
        job = await only_job(app)
        confirmed = tg.calls_of("sendMessage")[0].at
        await tg.wait_for(lambda: len(tg.texts()) == 2, timeout=15)
        await next_passes(app)
        job_after = await only_job(app)
        entries = await cron_entries(app)
        traces = await SqlTraceStore(app.db).recent_traces(limit=5)

    assert tg.texts() == ["OK, in 3 seconds.", "Time to call <b>Anna</b>!"]  # formatted
    reminder = tg.calls_of("sendMessage")[1]
    assert reminder.params["chat_id"] == 42
    assert reminder.at - confirmed >= 2.5  # not before its time (the model took a moment)
    # Typing while the job's run was going, before the reminder went out.
    assert any(confirmed < c.at < reminder.at for c in tg.calls_of("sendChatAction"))
    # The run: the Minimal prompt with the [Cron Job] note, no history, the job's message.
    [request] = cron_requests(llm)
    system = request["messages"][0]["content"]
    assert f"scheduled job {job.id} (in 3s)" in system
    assert "## User" not in system  # a Full-prompt-only section
    assert [m["role"] for m in request["messages"]] == ["system", "user"]
    assert request["messages"][1]["content"] == "Remind the user to call Anna."
    # Once: one inbox entry, answered; the one-off job has no next run.
    [entry] = entries
    assert entry.state == InboxState.ANSWERED.value
    assert job_after.next_run_at is None and job_after.last_outcome == "fired"
    assert job_after.last_entry == entry.id
    # The trace says it is a cron run, and which job.
    [cron_trace] = [t for t in traces if t.root.attributes.get("run") == "cron"]
    assert cron_trace.root.attributes["cron_job"] == job.id


async def test_a_repeating_job_runs_each_time_and_can_be_removed(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    llm.script(add("every 2s", "Say the time."), text("Scheduled."))
    llm.route(CRON_RUN, text("beat 1"), text("beat 2"))
    config = cron_config(tmp_path, llm, {"telegram": telegram_section(tg)}, min_interval="1s")
    async with Loopgate(config) as app:
        tg.push(tg.private_message("tell me the time every 2 seconds"))
        await tg.wait_for(lambda: tg.texts() == ["Scheduled.", "beat 1", "beat 2"], timeout=15)
        job = await only_job(app)
        llm.script(
            tool_calls(call("cron", {"action": "list"})),
            tool_calls(call("cron", {"action": "remove", "id": job.id})),
            text("Removed."),
        )
        # Beats that come due meanwhile still get an answer (the route is empty: echo).
        tg.push(tg.private_message("stop the time job"))
        await tg.wait_for(lambda: "Removed." in tg.texts(), timeout=15)
        removed_at = len(tg.texts())
        await next_passes(app, 3)
        remaining = await SqlCronJobs(app.db).list()
        entries = await cron_entries(app)

    assert remaining == []
    assert len(tg.texts()) == removed_at  # nothing after the removal
    keys = [row.message["metadata"]["cron_at"] for row in entries]
    assert len(keys) == len(set(keys)) >= 2  # each occurrence once
    # The model saw the job listed before removing it.
    listing = [
        m["content"]
        for r in llm.chat_requests
        for m in r.json["messages"]
        if m["role"] == "tool" and "scheduled job(s)" in str(m["content"])
    ]
    assert listing and f"- {job.id}: every 2s" in listing[0]
    # Each beat started fresh (cron.history_turns 0): no earlier beat in its messages.
    for request in cron_requests(llm):
        assert [m["role"] for m in request["messages"]] == ["system", "user"]


async def test_no_reply_sends_nothing(tmp_path: Path, llm: FakeLLM, tg: FakeTelegram) -> None:
    llm.script(add("in 1s", "Check the build; tell the user only if it broke."), text("Will do."))
    llm.route(CRON_RUN, text("NO_REPLY"))
    config = cron_config(tmp_path, llm, {"telegram": telegram_section(tg)})
    async with Loopgate(config) as app:
        tg.push(tg.private_message("watch the build"))
        await tg.wait_for(lambda: tg.texts() == ["Will do."])

        async def ended() -> bool:
            rows = await cron_entries(app)
            return bool(rows) and rows[0].state == InboxState.ANSWERED.value

        await wait_until(ended, timeout=15)
        [entry] = await cron_entries(app)
        await next_passes(app)

    assert cron_requests(llm)  # the job ran
    assert entry.reason == "NO_REPLY"
    assert tg.texts() == ["Will do."]  # and nobody was disturbed


async def test_history_turns_gives_the_run_its_chats_recent_turns(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    llm.script(add("in 1s", "Follow up on the question."), text("I'll follow up."))
    llm.route(CRON_RUN, text("Following up."))
    config = cron_config(tmp_path, llm, {"telegram": telegram_section(tg)}, history_turns=1)
    async with Loopgate(config):
        tg.push(tg.private_message("what is 6 x 7?"))
        await tg.wait_for(lambda: tg.texts() == ["I'll follow up.", "Following up."], timeout=15)
    [request] = cron_requests(llm)
    contents = [m.get("content") for m in request["messages"]]
    assert "what is 6 x 7?" in contents  # the one earlier turn
    assert contents[-1] == "Follow up on the question."


async def test_a_slack_reminder(tmp_path: Path, llm: FakeLLM, slack: FakeSlack) -> None:
    llm.script(add("in 1s", "Remind the user about the standup."), text("Noted."))
    llm.route(CRON_RUN, text("Standup in *5 minutes*!"))
    config = cron_config(tmp_path, llm, {"slack": slack_section(slack, "socket")})
    async with Loopgate(config) as app:
        await slack.wait_for(lambda: slack.socket_connections >= 1)
        await slack.push_event(message_event("remind me about the standup", channel="D1"))
        await slack.wait_for(lambda: len(slack.posts) == 2, timeout=15)
        await next_passes(app)
    assert [p.text for p in slack.posts] == ["Noted.", "Standup in _5 minutes_!"]
    assert {p.channel for p in slack.posts} == {"D1"}


async def test_a_heartbeat_speaks_only_when_there_is_something_to_say(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    llm.route(CRON_RUN, text("NO_REPLY"), text("The build is **broken**."))
    heartbeat = {"every": "1s", "chat": "telegram:42"}
    config = make_config(
        tmp_path,
        llm,
        channels={"telegram": telegram_section(tg)},
        agents={"main": {"heartbeat": heartbeat}},
    )
    async with Loopgate(config) as app:
        await tg.wait_for(lambda: tg.texts(), timeout=15)
        beats = await SqlCronJobs(app.db).list()
        await app.drain(grace=5)
    assert tg.texts() == ["The build is <b>broken</b>."]  # the first beat said NO_REPLY
    [job] = beats
    assert job.id == "heartbeat-main" and job.chat == "telegram:42"
    first, second = cron_requests(llm)[:2]
    assert "HEARTBEAT.md" in first["messages"][-1]["content"]
    assert "scheduled job heartbeat-main" in first["messages"][0]["content"]
    assert [m["role"] for m in second["messages"]] == ["system", "user"]  # starts fresh


async def test_a_heartbeat_outside_its_active_hours_is_skipped(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    now = datetime.now(UTC)
    # A one-hour window that ended an hour ago (UTC): every beat now falls outside it.
    hours = f"{(now - timedelta(hours=2)):%H:00}-{(now - timedelta(hours=1)):%H:00}"
    heartbeat = {"every": "1s", "chat": "telegram:42", "active_hours": hours}
    config = make_config(
        tmp_path,
        llm,
        channels={"telegram": telegram_section(tg)},
        agents={"main": {"heartbeat": heartbeat}},
    )
    async with Loopgate(config) as app:

        async def skipped() -> bool:
            job = await SqlCronJobs(app.db).get("heartbeat-main")
            return job is not None and bool(job.last_outcome) and job.last_run_at is not None

        await wait_until(skipped, timeout=15)
        job = await SqlCronJobs(app.db).get("heartbeat-main")
        await next_passes(app)
    assert job is not None and job.last_outcome is not None
    assert job.last_outcome.startswith(f"skipped: outside active hours {hours} (UTC)")
    assert cron_requests(llm) == [] and tg.texts() == []
