"""A clustered process's coordination parts, built from ``redis.*`` and ``cluster.*``.

``bot.app`` creates one only when ``redis.url`` is set; without it nothing here is imported.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

import structlog

from bot.cluster.approvals import ClusterApprovals
from bot.cluster.connection import RedisLink, RedisState
from bot.cluster.dedupe import FastDedupe
from bot.cluster.locks import RedisLocks
from bot.cluster.pacing import RedisPaceStore
from bot.cluster.poller_lease import PollerLease
from bot.cluster.runs import ClusterRunRegistry
from bot.cluster.usage_counters import RedisUsageCounters
from bot.cluster.work import ClusterWork
from bot.config import Config
from bot.pipeline.dedupe import DedupeStore
from bot.storage.inbox import SqlInbox
from bot.usage.counters import Seed

log = structlog.get_logger(__name__)


class Cluster:
    def __init__(self, config: Config) -> None:
        self.link = RedisLink(
            config.redis.url,
            key_prefix=config.cluster.key_prefix,
            lease_seconds=config.cluster.lease_seconds,
        )
        self.registry = ClusterRunRegistry(self.link)
        self.spread_polled = config.cluster.spread_polled
        self.pollers: dict[str, PollerLease] = {}
        self.locks = RedisLocks(self.link)
        """The compaction and seeding locks lent to every agent (``agent_core.locks``)."""
        self.work: ClusterWork | None = None
        self.approvals = ClusterApprovals(self.link)
        """``/approve`` and ``/deny`` reach the process where the command waits (attached to
        the gateway's approvals by ``bot.app``)."""

    @property
    def process_id(self) -> str:
        return self.link.process_id

    def poll_gate(self, channel: str, token: str) -> PollerLease:
        """The poller election for ``channel`` (``PlatformDeps.poll_gate``)."""
        lease = self.pollers[channel] = PollerLease(self.link, channel, token)
        return lease

    def pace_store(self, channel: str, token: str) -> RedisPaceStore:
        """The bot's send budgets shared by every process (``PlatformDeps.pace_store``)."""
        return RedisPaceStore(self.link, channel, token)

    def dedupe(self, durable: DedupeStore) -> FastDedupe:
        """``durable`` behind the Redis fast path every process shares."""
        return FastDedupe(self.link, durable)

    def usage_counters(self, seed: Seed) -> RedisUsageCounters:
        """The usage limits' counters every process shares (``bot/cluster/usage_counters.py``)."""
        return RedisUsageCounters(self.link, seed)

    def distribute(self, inbox: SqlInbox, *, max_age: float) -> ClusterWork:
        """Work distribution over the shared ``inbox`` (``bot/cluster/work.py``)."""

        # The elected poller receives every update of its bot: it spreads the new sessions
        # over the members (members.py) instead of answering every chat itself.
        def polls() -> bool:
            return self.spread_polled and any(lease.holds() for lease in self.pollers.values())

        self.work = ClusterWork(
            self.link,
            inbox,
            max_age=max_age,
            spreads=polls,
            polled=lambda channel: channel in self.pollers,
        )
        return self.work

    async def start(self) -> None:
        await self.link.start()
        await self.registry.start()
        log.info("cluster.joined", process=self.process_id, prefix=self.link.prefix)

    async def release_pollers(self) -> None:
        """Hand the poller leases back (drain: this process polls no more), and stop being a
        member: a poller assigns new chats to the others meanwhile."""
        for lease in self.pollers.values():
            await lease.aclose()
        if self.work is not None:
            await self.work.leave()

    def abandon(self) -> None:
        """Stop renewing anything without handing it back, as a killed process would."""
        for lease in self.pollers.values():
            lease.abandon()

    def health(self) -> dict[str, Any]:
        return {
            "redis": self.link.state.value,
            "process": self.process_id,
            "poller": {name: lease.holds() for name, lease in self.pollers.items()},
            "leases": self.work.health() if self.work is not None else {},
        }

    @property
    def degraded(self) -> bool:
        return self.link.state is not RedisState.OK

    async def aclose(self) -> None:
        await self.release_pollers()
        with suppress(Exception):
            await self.approvals.aclose()
        with suppress(Exception):
            await self.registry.aclose()
        await self.link.aclose()
