"""A clustered process's coordination parts, built from ``redis.*`` and ``cluster.*``.

``bot.app`` creates one only when ``redis.url`` is set; without it nothing here is imported.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

import structlog

from bot.cluster.connection import RedisLink, RedisState
from bot.cluster.poller_lease import PollerLease
from bot.cluster.runs import ClusterRunRegistry
from bot.config import Config

log = structlog.get_logger(__name__)


class Cluster:
    def __init__(self, config: Config) -> None:
        self.link = RedisLink(
            config.redis.url,
            key_prefix=config.cluster.key_prefix,
            lease_seconds=config.cluster.lease_seconds,
        )
        self.registry = ClusterRunRegistry(self.link)
        self.pollers: dict[str, PollerLease] = {}

    @property
    def process_id(self) -> str:
        return self.link.process_id

    def poll_gate(self, channel: str, token: str) -> PollerLease:
        """The poller election for ``channel`` (``PlatformDeps.poll_gate``)."""
        lease = self.pollers[channel] = PollerLease(self.link, channel, token)
        return lease

    async def start(self) -> None:
        await self.link.start()
        await self.registry.start()
        log.info("cluster.joined", process=self.process_id, prefix=self.link.prefix)

    async def release_pollers(self) -> None:
        """Hand the poller leases back (drain: this process polls no more)."""
        for lease in self.pollers.values():
            await lease.aclose()

    def abandon(self) -> None:
        """Stop renewing anything without handing it back, as a killed process would."""
        for lease in self.pollers.values():
            lease.abandon()

    def health(self) -> dict[str, Any]:
        return {
            "redis": self.link.state.value,
            "process": self.process_id,
            "poller": {name: lease.holds() for name, lease in self.pollers.items()},
        }

    @property
    def degraded(self) -> bool:
        return self.link.state is not RedisState.OK

    async def aclose(self) -> None:
        await self.release_pollers()
        with suppress(Exception):
            await self.registry.aclose()
        await self.link.aclose()
