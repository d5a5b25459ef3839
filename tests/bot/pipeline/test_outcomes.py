"""bot/pipeline/outcomes.py: how each way a turn ends is counted."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bot.pipeline.job import Job
from bot.pipeline.outcomes import dropped_outcome, turn_outcome
from bot.pipeline.stop import STOP_REASON, STOPALL_REASON
from bot.storage.inbox import InboxState
from bot.telemetry.metrics import TurnOutcome
from tests.bot.pipeline.test_job import make_job


@pytest.mark.parametrize(
    ("end", "interrupted", "outcome"),
    [
        ((InboxState.ANSWERED, None), False, TurnOutcome.REPLY),
        ((InboxState.ANSWERED, "NO_REPLY"), False, TurnOutcome.NO_REPLY),
        ((InboxState.ANSWERED, "nothing to send"), False, TurnOutcome.NO_REPLY),
        ((InboxState.FAILED, "run: ProviderError"), False, TurnOutcome.ERROR),
        ((InboxState.FAILED, "delivery: Forbidden"), False, TurnOutcome.ERROR),
        ((InboxState.DROPPED, "stopped"), False, TurnOutcome.STOPPED),
        ((InboxState.DROPPED, "stopped"), True, TurnOutcome.INTERRUPTED),
        (None, False, TurnOutcome.HANDED_OVER),
    ],
)
async def test_a_turn_that_ran(
    end: tuple[InboxState, str | None] | None, interrupted: bool, outcome: TurnOutcome
) -> None:
    job = replace(make_job(), interrupted=interrupted)
    assert turn_outcome(job, end) is outcome


async def test_a_job_dropped_before_it_ran() -> None:
    job: Job = make_job()
    assert dropped_outcome(job) is TurnOutcome.DROPPED  # the default reason: the queue was full
    for reason in (STOP_REASON, STOPALL_REASON):
        assert dropped_outcome(replace(job, drop_reason=reason)) is TurnOutcome.STOPPED
