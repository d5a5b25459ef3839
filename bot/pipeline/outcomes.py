"""How a turn ended, in the words of ``loopgate_turns_total`` (:mod:`bot.telemetry.metrics`)."""

from __future__ import annotations

from bot.pipeline.job import QUEUE_FULL, Job
from bot.storage.inbox import InboxState
from bot.telemetry.metrics import TurnOutcome


def turn_outcome(job: Job, end: tuple[InboxState, str | None] | None) -> TurnOutcome:
    """A turn that ran: ``end`` is how its inbox entry ends (None: it goes back to the inbox
    for another process)."""
    if end is None:
        return TurnOutcome.HANDED_OVER
    state, reason = end
    if state is InboxState.ANSWERED:
        # The reason is NO_REPLY, or that an empty answer had nothing to send.
        return TurnOutcome.REPLY if reason is None else TurnOutcome.NO_REPLY
    if state is InboxState.DROPPED:
        return TurnOutcome.INTERRUPTED if job.interrupted else TurnOutcome.STOPPED
    return TurnOutcome.ERROR


def dropped_outcome(job: Job) -> TurnOutcome:
    """A job dropped before it ran: a full queue, or a ``/stop``/``/stopall`` that found it
    still waiting."""
    return TurnOutcome.DROPPED if job.drop_reason == QUEUE_FULL else TurnOutcome.STOPPED
