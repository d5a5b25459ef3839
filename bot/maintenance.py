"""Periodic housekeeping while the service runs (old dedupe keys and inbox entries, leases)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from agent_core import stop_if_cancelled

log = structlog.get_logger(__name__)

PRUNE_EVERY_SECONDS = 3600.0


async def run_periodically(
    name: str,
    job: Callable[[], Awaitable[object]],
    every: float = PRUNE_EVERY_SECONDS,
    *,
    first_after: float = 0.0,
) -> None:
    """Run ``job`` after ``first_after`` seconds, then every ``every`` seconds until
    cancelled; failures are logged."""
    if first_after:
        await asyncio.sleep(first_after)
    while True:
        try:
            result = await job()
            log.debug("maintenance.done", job=name, result=result)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            stop_if_cancelled(exc)  # a cancellation the job's driver turned into its error
            log.warning("maintenance.failed", job=name, error=str(exc))
        await asyncio.sleep(every)
