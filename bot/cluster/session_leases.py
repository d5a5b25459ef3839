"""Which process works on a session: a Redis lease per session key.

A session's messages are answered by the one process holding its lease, so they run in order
whatever process received them, and different sessions spread over all processes. Taking the
lease also extends it when it is already ours (one script, one round-trip); a busy session's
lease is renewed every third of ``cluster.lease_seconds``. Once it has nothing left to do, a
process hands a session back (``release_soon``: the releases of one pass of the event loop
in one script) when other processes could take it: the one that receives the chat's next
message takes it and answers there, instead of storing it for this one and nudging it. Alone,
a process keeps it until the lease runs out. A process that dies loses its sessions after
``cluster.lease_seconds``.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Iterable

import structlog

from bot.cluster.connection import RedisLink

log = structlog.get_logger(__name__)

# 1 when the lease is (now) the caller's, else the current holder's id. With a message
# (ARGV[4]), it is published to the holder's channel (ARGV[3] .. holder) in the same call: the
# nudge costs no round trip of its own. With a process id in ARGV[5], a free lease is set to
# that process instead (an assignment, members.py) and it is nudged as a holder would be.
_TAKE = """
local holder = redis.call('get', KEYS[1])
if holder == false and ARGV[5] ~= '' then
  holder = ARGV[5]
  redis.call('set', KEYS[1], holder, 'PX', ARGV[2])
elseif holder == false or holder == ARGV[1] then
  redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
if ARGV[4] ~= '' then
  redis.call('publish', ARGV[3] .. holder, ARGV[4])
end
return holder
"""
# For each key: extend it while it is still ours. Returns 1 or 0 per key.
_RENEW = """
local kept = {}
for i, key in ipairs(KEYS) do
  if redis.call('get', key) == ARGV[1] then
    redis.call('pexpire', key, ARGV[2])
    kept[i] = 1
  else
    kept[i] = 0
  end
end
return kept
"""
_RELEASE = """
local n = 0
for i, key in ipairs(KEYS) do
  if redis.call('get', key) == ARGV[1] then
    n = n + redis.call('del', key)
  end
end
return n
"""


class SessionLeases:
    def __init__(self, link: RedisLink) -> None:
        self.link = link
        self._lease_ms = int(link.lease_seconds * 1000)
        self._held: dict[str, float] = {}  # session key -> monotonic time its lease runs out
        self._to_release: set[str] = set()  # handed back, not sent yet
        self._releasing: dict[str, asyncio.Future[None]] = {}  # sent, not answered yet
        self._flush: asyncio.Task[None] | None = None

    def _key(self, session_key: str) -> str:
        # Session keys name chats and users: hashed, like every key this service writes.
        return self.link.key("session", hashlib.sha256(session_key.encode()).hexdigest()[:32])

    async def take(
        self,
        session_key: str,
        *,
        nudge: tuple[str, str] | None = None,
        assign_to: str | None = None,
    ) -> str | None:
        """Hold ``session_key``; returns None when it is ours now, else the holder's process
        id (``""`` when Redis could not be asked: claim nothing new while it is down).
        ``nudge`` (channel prefix, message): publish the message on the prefix + the holder's
        id when another process holds it, in the same script. ``assign_to``: when nobody holds
        it, that process does from now on (and is nudged) instead of this one."""
        # Taken again before its release went out: it simply stays ours. A release under way
        # must land first, or it would delete the lease this take sets.
        self._to_release.discard(session_key)
        if (releasing := self._releasing.get(session_key)) is not None:
            await asyncio.shield(releasing)
        sent = time.monotonic()
        prefix, message = nudge or ("", "")
        try:
            answer = await self.link.run_script(
                _TAKE,
                [self._key(session_key)],
                self.link.process_id,
                self._lease_ms,
                prefix,
                message,
                assign_to or "",
            )
        except Exception as exc:
            self.link.mark(False, exc)
            return ""
        if answer == 1:
            self._held[session_key] = sent + self.link.lease_seconds
            return None
        self._held.pop(session_key, None)
        return answer.decode() if isinstance(answer, bytes) else str(answer)

    async def holder(self, session_key: str) -> str | None:
        """The process holding ``session_key``; None when nobody does or Redis can't say."""
        try:
            value = await self.link.client.get(self._key(session_key))
        except Exception as exc:
            self.link.mark(False, exc)
            return None
        if value is None:
            return None
        return value.decode() if isinstance(value, bytes) else str(value)

    def holds(self, session_key: str) -> bool:
        return time.monotonic() < self._held.get(session_key, 0.0)

    def left(self, session_key: str) -> float:
        """Seconds this process's lease of ``session_key`` still lasts at least (0: none)."""
        return max(0.0, self._held.get(session_key, 0.0) - time.monotonic())

    @property
    def held(self) -> list[str]:
        now = time.monotonic()
        return [key for key, until in self._held.items() if until > now]

    async def renew(self, busy: Iterable[str]) -> None:
        """Extend the leases of the sessions at work here. An idle session is not renewed (its
        lease runs out by itself) but is kept while its lease lasts: a claim may be about to
        queue its first message, and the session must be renewed once it does."""
        sent = time.monotonic()
        busy = set(busy)
        for key in [k for k, until in self._held.items() if until <= sent and k not in busy]:
            del self._held[key]
        keys = [key for key in self._held if key in busy]
        if not keys:
            return
        try:
            renewed = await self.link.run_script(
                _RENEW, [self._key(k) for k in keys], self.link.process_id, self._lease_ms
            )
        except Exception as exc:  # they stay ours until they would run out in Redis
            self.link.mark(False, exc)
            return
        lost = [key for key, kept in zip(keys, renewed, strict=True) if not kept]
        if lost:
            # Redis lost them (restart, outage longer than a lease): the runs go on here, and
            # the inbox keeps another process from claiming this session's next messages
            # while this one still holds entries of it (SqlInbox.claim_session).
            log.warning("cluster.session_leases_lost", lost=len(lost))
        for key in keys:
            if key in lost:
                del self._held[key]
            else:
                self._held[key] = sent + self.link.lease_seconds

    def release_soon(self, session_key: str) -> None:
        """Hand ``session_key`` back: it is no longer ours from now on (``holds``), and Redis
        hears of it with the others handed back in this pass of the event loop."""
        self._held.pop(session_key, None)
        self._to_release.add(session_key)
        if self._flush is None:
            self._flush = asyncio.create_task(self._release_pending(), name="cluster:release")

    async def _release_pending(self) -> None:
        await asyncio.sleep(0)  # the sessions that went idle with this one
        keys, self._flush = list(self._to_release), None
        self._to_release.clear()
        if not keys:
            return
        sent = asyncio.get_running_loop().create_future()
        for key in keys:
            self._releasing[key] = sent
        try:
            await self.link.run_script(_RELEASE, [self._key(k) for k in keys], self.link.process_id)
        except Exception as exc:  # they run out by themselves
            self.link.mark(False, exc)
        finally:
            for key in keys:
                if self._releasing.get(key) is sent:
                    del self._releasing[key]
            sent.set_result(None)

    async def release_all(self) -> None:
        """Hand every session back (a clean stop): another process takes them at once."""
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        keys = [*self._held, *self._to_release]
        self._held.clear()
        self._to_release.clear()
        if not keys:
            return
        try:
            await self.link.run_script(_RELEASE, [self._key(k) for k in keys], self.link.process_id)
        except Exception as exc:  # they expire by themselves
            log.warning("cluster.session_release_failed", error=repr(exc))
