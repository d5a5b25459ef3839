"""``Job``: who asked, settled once; ``ended_ok``: which results end with the success reaction."""

from __future__ import annotations

import asyncio

import pytest

from agent_core import RunResult, RunStatus
from bot.pipeline.job import Job, ended_ok
from bot.pipeline.reactions import StatusReactions
from bot.pipeline.session_keys import session_key
from channels import MessageRef
from tests.pipeline_support import GROUP, RecordingChannel, message


def make_job(sender: str = "alice") -> Job:
    msg = message("hello", chat=GROUP, sender=sender, message_id="m1")
    return Job(
        message=msg,
        agent_id="main",
        session_key=session_key("main", GROUP),
        concurrency=1,
        run_id="run-1",
        reactions=StatusReactions(RecordingChannel(), MessageRef(GROUP, "m1"), enabled=False),
    )


def result(status: RunStatus) -> RunResult:
    return RunResult(run_id="run-1", status=status, content="answer")


@pytest.mark.parametrize(
    ("status", "ok"),
    [
        (RunStatus.COMPLETED, True),
        (RunStatus.MAX_ITERATIONS, True),
        (RunStatus.CANCELLED, True),
        (RunStatus.BUDGET_EXCEEDED, False),
        (RunStatus.USAGE_LIMIT, False),
        (RunStatus.FAILED, False),
    ],
)
def test_ended_ok_by_status(status: RunStatus, ok: bool) -> None:
    assert ended_ok(result(status)) is ok


def test_every_status_has_an_expected_ending() -> None:
    # A new RunStatus must be placed on one side or the other (and in the table above).
    assert set(RunStatus) == {
        RunStatus.COMPLETED,
        RunStatus.MAX_ITERATIONS,
        RunStatus.CANCELLED,
        RunStatus.BUDGET_EXCEEDED,
        RunStatus.USAGE_LIMIT,
        RunStatus.FAILED,
    }


def test_no_result_is_not_ok() -> None:
    assert ended_ok(None) is False


async def test_requester_is_the_sender_of_the_message() -> None:
    assert make_job(sender="bob").requester_id == "bob"
    assert make_job(sender="carol").requester_id == "carol"


async def test_a_new_job_is_not_done() -> None:
    assert not make_job().done.done()


async def test_settle_resolves_done_with_the_result() -> None:
    job = make_job()
    ended = result(RunStatus.COMPLETED)
    job.settle(ended)
    assert await asyncio.wait_for(job.done, 1) is ended


async def test_settle_with_none_resolves_done_with_none() -> None:
    job = make_job()
    job.settle(None)
    assert job.done.done()
    assert job.done.result() is None


async def test_only_the_first_settle_counts() -> None:
    job = make_job()
    first = result(RunStatus.FAILED)
    job.settle(first)
    job.settle(result(RunStatus.COMPLETED))  # no InvalidStateError
    job.settle(None)
    assert job.done.result() is first


async def test_settling_a_cancelled_job_is_harmless() -> None:
    job = make_job()
    job.done.cancel()
    job.settle(result(RunStatus.COMPLETED))
    assert job.done.cancelled()


async def test_jobs_compare_by_identity() -> None:
    a, b = make_job(), make_job()
    assert a != b
    assert a == a
    assert len({a, b}) == 2
