"""The ``cron_jobs`` table on SQLite and (with LOOPGATE_TEST_POSTGRES_URL) Postgres: jobs scoped
to a user and chat, what is due, moving a job on once, heartbeats kept across restarts."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from agent_core import parse_schedule
from bot.storage import Database
from bot.storage.cron import SOURCE_HEARTBEAT, SqlCronJobs
from channels import ChatRef, ChatType, InboundMessage, Sender
from tests.storage_support import backend, db  # noqa: F401

NOW = datetime(2026, 12, 4, 23, 0, tzinfo=UTC)


def origin(user: str = "1", chat: str = "100", channel: str = "telegram") -> InboundMessage:
    return InboundMessage(
        chat=ChatRef(channel, chat, ChatType.DIRECT),
        message_id="55",
        sender=Sender(id=user, name="Ann"),
        text="remind me",
        received_at=NOW,
        metadata={"bot_username": "bot"},
    )


async def add(
    jobs: SqlCronJobs, text: str = "in 10m", *, at: datetime | None = None, **who: str
) -> str:
    schedule = parse_schedule(text, "Europe/Berlin", NOW, min_interval=60)
    job = await jobs.add(
        agent_id="main",
        session_key="agent:main:telegram:direct:100",
        origin=origin(**who),
        schedule=schedule,
        message=f"do {text}",
        next_run_at=at or schedule.first_run(NOW),
    )
    return job.id


async def test_a_job_round_trips(db: Database) -> None:  # noqa: F811
    jobs = SqlCronJobs(db)
    job_id = await add(jobs, "0 9 * * 1-5")
    job = await jobs.get(job_id)
    assert job is not None
    assert (job.user_id, job.chat, job.agent_id) == ("telegram:1", "telegram:100", "main")
    assert job.origin == origin()
    assert job.schedule == parse_schedule("0 9 * * 1-5", "Europe/Berlin", NOW, min_interval=60)
    assert job.next_run_at == datetime(2026, 12, 7, 8, 0, tzinfo=UTC)
    assert job.message == "do 0 9 * * 1-5" and not job.paused and job.active
    every = await jobs.get(await add(jobs, "every 2h"))
    assert every is not None and every.schedule.anchor == NOW  # the grid survives storage


async def test_list_and_count_are_scoped(db: Database) -> None:  # noqa: F811
    jobs = SqlCronJobs(db)
    first = await add(jobs, "in 10m")
    second = await add(jobs, "in 5m")
    other_chat = await add(jobs, "in 1h", chat="200")
    await add(jobs, "in 1h", user="2")
    mine_here = await jobs.list(user_id="telegram:1", chat="telegram:100")
    assert [job.id for job in mine_here] == [second, first]  # by next run
    assert await jobs.count_active("telegram:1") == 3
    assert {job.id for job in await jobs.list(chat="telegram:200")} == {other_chat}
    assert len(await jobs.list()) == 4


async def test_remove_only_the_users_job_in_that_chat(db: Database) -> None:  # noqa: F811
    jobs = SqlCronJobs(db)
    job_id = await add(jobs)
    assert not await jobs.remove(job_id, user_id="telegram:2", chat="telegram:100")
    assert not await jobs.remove(job_id, user_id="telegram:1", chat="telegram:200")
    assert await jobs.remove(job_id, user_id="telegram:1", chat="telegram:100")
    assert await jobs.get(job_id) is None
    assert not await jobs.remove(job_id)


async def test_due_skips_paused_and_future_jobs(db: Database) -> None:  # noqa: F811
    jobs = SqlCronJobs(db)
    late = await add(jobs, "in 1h", at=NOW - timedelta(minutes=2))
    early = await add(jobs, "in 1h", at=NOW - timedelta(minutes=5))
    paused = await add(jobs, "in 1h", at=NOW - timedelta(minutes=1))
    await add(jobs, "in 1h", at=NOW + timedelta(seconds=1))
    assert await jobs.set_paused(paused, True)
    assert [job.id for job in await jobs.due(NOW)] == [early, late]
    assert await jobs.next_due_at() == NOW - timedelta(minutes=5)
    assert await jobs.set_paused(paused, False)
    assert len(await jobs.due(NOW)) == 3


async def test_advance_moves_a_job_on_from_the_occurrence_it_read(db: Database) -> None:  # noqa: F811
    jobs = SqlCronJobs(db)
    job_id = await add(jobs, "every 1h", at=NOW)
    later = NOW + timedelta(hours=1)
    assert await jobs.advance(
        job_id, expected=NOW, next_run_at=later, outcome="fired", ran_at=NOW, entry=7
    )
    # A second process read the same occurrence: it must not move the job again.
    assert not await jobs.advance(job_id, expected=NOW, next_run_at=later, outcome="fired")
    job = await jobs.get(job_id)
    assert job is not None
    assert (job.next_run_at, job.last_run_at, job.last_outcome, job.last_entry) == (
        later,
        NOW,
        "fired",
        7,
    )
    assert await jobs.advance(job_id, expected=later, next_run_at=None, outcome="missed")
    done = await jobs.get(job_id)
    assert done is not None and not done.active
    assert await jobs.count_active("telegram:1") == 0
    assert await jobs.set_next(job_id, NOW)
    assert [job.id for job in await jobs.due(NOW)] == [job_id]


async def test_put_keeps_a_heartbeats_next_run_while_its_schedule_holds(
    db: Database,  # noqa: F811
) -> None:
    jobs = SqlCronJobs(db)
    first = await jobs.get(await add(jobs, "every 30m"))
    assert first is not None
    beat = replace(first, id="heartbeat-main", source=SOURCE_HEARTBEAT)
    await jobs.put(beat)
    await jobs.advance(
        "heartbeat-main", expected=beat.next_run_at or NOW, next_run_at=NOW, outcome="fired"
    )
    await jobs.put(replace(beat, message="new checklist"))  # a restart with an edited message
    kept = await jobs.get("heartbeat-main")
    assert kept is not None and kept.next_run_at == NOW and kept.message == "new checklist"
    hourly = parse_schedule("every 1h", "UTC", NOW, min_interval=60)
    await jobs.put(replace(beat, schedule=hourly, next_run_at=NOW + timedelta(hours=1)))
    changed = await jobs.get("heartbeat-main")
    assert changed is not None and changed.next_run_at == NOW + timedelta(hours=1)
    assert await jobs.remove_source_except(SOURCE_HEARTBEAT, set()) == 1
    assert await jobs.get("heartbeat-main") is None
    assert await jobs.get(first.id) is not None  # the tool's job is not a heartbeat
