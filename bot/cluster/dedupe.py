"""The dedupe fast path, shared by every process: a Redis key in front of the database record.

The records in Postgres (``processed_messages``, written by :class:`SqlDedupeStore` and the
inbox) stay the authority: every first sight is still written there. Redis only answers the
repeats (a platform's retry, Slack's ``message`` + ``app_mention`` pair) that reach any
process, without a database write. Its key goes through two states:

- ``p`` (pending) from the first sight until the database has answered: a repeat arriving
  meanwhile asks the database too (which waits on the first writer's row), because the first
  writer may still fail and undo its record;
- ``d`` (done) once the database has the record: a repeat is a duplicate at once.

An adapter peeks (``has_seen``) before it hands an update over and records it (``seen``) once
the bot stored it. When the peek found no key, the record skips the ``p`` step: the database
answers it alone (as it would for a ``p``) and the key is set to ``d`` after. That is two round
trips per update instead of three; what it gives up is a repeat arriving between the peek and
the record being caught by Redis instead of by the database.

Redis unreachable: the fast path is skipped (logged once per outage), the database answers.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

import structlog

from bot.cluster.connection import RedisLink, RedisState
from bot.pipeline.dedupe import DedupeStore

log = structlog.get_logger(__name__)

FAST_TTL_SECONDS = 3600.0
"""Platforms retry within minutes; older repeats are left to the database."""
PENDING = b"p"
DONE = b"d"
PEEKED_KEPT = 1024
"""Keys whose peek found nothing, waiting for their record: hand-overs under way, at most."""


class FastDedupe:
    """``durable`` with a Redis fast path; satisfies :class:`channels.protocol.SeenStore` and
    :class:`bot.pipeline.dedupe.DedupeStore`."""

    def __init__(
        self, link: RedisLink, durable: DedupeStore, *, ttl_seconds: float = FAST_TTL_SECONDS
    ) -> None:
        self.link = link
        self.durable = durable
        self._ttl_ms = int(ttl_seconds * 1000)
        self._down = False
        self._peeked: OrderedDict[str, bool] = OrderedDict()

    def _key(self, key: str) -> str:
        return self.link.key("seen", hashlib.sha256(key.encode()).hexdigest()[:32])

    async def seen(self, key: str) -> bool:
        fast_key = self._key(key)
        if self._peeked.pop(key, False):
            return await self._record_peeked(key, fast_key)
        claimed = await self._claim(fast_key)
        if claimed is False:
            return True
        try:
            duplicate = await self.durable.seen(key)
        except BaseException:
            if claimed:
                await self._redis("delete", fast_key)
            raise
        if claimed:
            await self._redis("set", fast_key, DONE, px=self._ttl_ms, xx=True)
        return duplicate

    async def _record_peeked(self, key: str, fast_key: str) -> bool:
        duplicate = await self.durable.seen(key)
        if not duplicate:
            # Only a first sight's own writer sets "done": a repeat's database answer may
            # stem from a first writer that still forgets the key.
            await self._redis("set", fast_key, DONE, px=self._ttl_ms)
        return duplicate

    async def has_seen(self, key: str) -> bool:
        """Redis answers a repeat the database already has ("done"); anything else (no key, a
        first sight still pending, Redis down) is the database's to answer."""
        peeked = False
        if self.link.state is RedisState.OK:
            try:
                found = await self.link.client.get(self._key(key))
            except Exception as exc:
                self._failed(exc)
            else:
                self._restored()
                if found == DONE:
                    return True
                peeked = found is None
        seen = await self.durable.has_seen(key)
        if peeked and not seen:
            self._peeked[key] = True
            while len(self._peeked) > PEEKED_KEPT:
                self._peeked.popitem(last=False)
        return seen

    async def forget(self, key: str) -> None:
        # Tried even while Redis looks down: a "done" key left behind would make the
        # redelivery of a message nobody took look like a duplicate in every process.
        failure: Exception | None = None
        self._peeked.pop(key, None)
        try:
            await self.link.client.delete(self._key(key))
        except Exception as exc:
            self._failed(exc)
            failure = exc
        await self.durable.forget(key)
        if failure is not None:
            raise failure

    async def _claim(self, fast_key: str) -> bool | None:
        """True: this caller is the first to see the key; False: a repeat the database already
        has; None: ask the database (a first sight still pending, or Redis down)."""
        if self.link.state is not RedisState.OK:
            return None
        try:
            before = await self.link.client.set(
                fast_key, PENDING, nx=True, px=self._ttl_ms, get=True
            )
        except Exception as exc:
            self._failed(exc)
            return None
        self._restored()
        if before is None:
            return True
        return False if before == DONE else None

    async def _redis(self, command: str, *args: object, **kwargs: object) -> None:
        if self.link.state is not RedisState.OK:
            return
        try:
            await getattr(self.link.client, command)(*args, **kwargs)
        except Exception as exc:
            self._failed(exc)

    def _failed(self, exc: BaseException) -> None:
        if not self._down:
            self._down = True
            log.warning("dedupe.fast_path_unavailable", error=repr(exc))

    def _restored(self) -> None:
        if self._down:
            self._down = False
            log.info("dedupe.fast_path_restored")
