"""Stopping runs: the one home of ``/stop``, ``/stopall`` and the dashboard's stop button.

- ``/stop`` cancels the newest run of the session that the sender may stop; with none, the
  sender's burst still waiting for ``bot.debounce_ms`` is dropped.
- ``/stopall`` cancels every run the sender may stop and drops what waits: in bursts, in the
  scheduler's queue, and (several processes) in the process that holds the session.
- In groups only the run's requester or an admin may stop it (:func:`.access.is_admin`).

The gateway calls :meth:`StopService.command`, the dashboard :meth:`StopService.abort`, and the
cluster :meth:`StopService.drop_waiting` for a ``/stopall`` received by another process.
Cancelling goes through the run registry, whose cluster flavour reaches every process.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.config import Config
from bot.pipeline.access import is_admin
from bot.pipeline.bursts import Bursts
from bot.pipeline.job import Job
from bot.pipeline.ports import WorkClaims
from bot.pipeline.run_registry import RunRegistry
from channels import Channel, InboundMessage

STOPALL_REASON = "stopped by /stopall"
STOP_REASON = "stopped by /stop"


@dataclass
class StopService:
    config: Config
    registry: RunRegistry
    bursts: Bursts
    work: WorkClaims | None = None
    """Set when several processes share the inbox: what waits in the session's holder."""

    async def command(
        self, msg: InboundMessage, channel: Channel, key: str, *, everything: bool
    ) -> str:
        """``/stop`` (``everything`` False) or ``/stopall`` from ``msg``; returns the reply."""
        bot = self.config.bot
        admin = await is_admin(self.config, msg, channel)
        sender = msg.sender.id
        await self.registry.refresh()
        runs = self.registry.runs_of(key)
        allowed = [run for run in runs if admin or run.requester_id == sender]
        if everything:
            dropped = self.drop_waiting(key, sender, admin=admin)
            if self.work is not None:
                await self.work.drop_waiting(key, sender, admin=admin)
            cancelled = sum(1 for run in allowed if self.registry.abort(run.run_id, key))
            if cancelled or dropped:
                return bot.stop_reply
        elif allowed and self.registry.abort(allowed[-1].run_id, key):
            return bot.stop_reply
        elif self.bursts.drop_held(key, lambda j: j.requester_id == sender, STOP_REASON):
            return bot.stop_reply  # the sender's burst still waiting to start (bot.debounce_ms)
        if runs and not allowed:
            return bot.not_allowed_reply
        return bot.nothing_to_stop_reply

    def drop_waiting(self, key: str, sender: str, *, admin: bool) -> list[Job]:
        """Drop the session's messages not yet running that ``sender`` may stop (all of them
        for an admin); returns them."""

        def stoppable(job: Job) -> bool:
            return admin or job.requester_id == sender

        dropped = self.bursts.drop_held(key, stoppable, STOPALL_REASON)
        dropped += self.bursts.scheduler.drop_queued(key, stoppable)
        for job in dropped:  # their drop callbacks run later and read the reason
            job.drop_reason = STOPALL_REASON
        return dropped

    def abort(self, run_id: str, session_key: str) -> bool:
        """Cancel one run and its children (the dashboard); False when it is not running."""
        return self.registry.abort(run_id, session_key)
