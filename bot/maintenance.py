"""Periodic housekeeping while the service runs (currently: forgetting old dedupe keys)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

log = structlog.get_logger(__name__)

PRUNE_EVERY_SECONDS = 3600.0


async def run_periodically(
    name: str, job: Callable[[], Awaitable[object]], every: float = PRUNE_EVERY_SECONDS
) -> None:
    """Run ``job`` now and then every ``every`` seconds until cancelled; failures are logged."""
    while True:
        try:
            result = await job()
            log.debug("maintenance.done", job=name, result=result)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("maintenance.failed", job=name, error=str(exc))
        await asyncio.sleep(every)
