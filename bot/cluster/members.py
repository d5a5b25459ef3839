"""The live processes of a cluster, and which of them a new session goes to.

Webhooks reach every process (the load balancer spreads them), so a session is taken by the
process that received its first message. Telegram and Zalo in polling mode have one receiver,
the elected poller: without more, every chat would be answered there while the other
processes idle, and ``bot.max_concurrent_runs`` of one process would bound the whole
cluster's. So a poller assigns each session nobody holds to a member chosen by the session
key's hash (``target``), and nudges it (``session_leases.py``): the same chat goes to the same
process while the members stay the same.

Each process is a member of the sorted set ``<prefix>:members``, scored with the time its
membership runs out (its own clock, a lease ahead), renewed with its leases every third of a
lease, and left when it starts draining. A process that dies stays a member until its
membership runs out: a session assigned to it meanwhile is taken over like any dead
process's, after a lease.
"""

from __future__ import annotations

import hashlib
import time

import structlog

from bot.cluster.connection import RedisLink

log = structlog.get_logger(__name__)


class Members:
    def __init__(self, link: RedisLink) -> None:
        self.link = link
        self.key = link.key("members")
        self.live: list[str] = []  # sorted: every process hashes a session to the same one
        self.left = False  # draining: still reads the others, no longer listed itself

    async def refresh(self) -> None:
        """Renew this process's membership and read the others'. Keeps the last list while
        Redis can't be asked."""
        now = int(time.time() * 1000)
        until = now + int(self.link.lease_seconds * 1000)
        pipe = self.link.client.pipeline(transaction=False)
        if not self.left:
            pipe.zadd(self.key, {self.link.process_id: until})
        pipe.zremrangebyscore(self.key, "-inf", now)
        pipe.zrangebyscore(self.key, now, "+inf")
        try:
            *_, members = await pipe.execute()
        except Exception as exc:
            self.link.mark(False, exc)
            return
        live = sorted(m.decode() if isinstance(m, bytes) else str(m) for m in members)
        if live != self.live:
            log.info("cluster.members", members=live, count=len(live))
        self.live = live

    def target(self, session_key: str) -> str | None:
        """The member a session nobody holds goes to; None when that is this process (or no
        other member is known)."""
        if len(self.live) < 2:
            return None
        digest = int.from_bytes(hashlib.sha256(session_key.encode()).digest()[:8], "big")
        chosen = self.live[digest % len(self.live)]
        return None if chosen == self.link.process_id else chosen

    async def leave(self) -> None:
        self.left = True
        self.live = [m for m in self.live if m != self.link.process_id]
        try:
            await self.link.client.zrem(self.key, self.link.process_id)
        except Exception as exc:  # it runs out by itself
            self.link.mark(False, exc)
