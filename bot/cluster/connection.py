"""The Redis connection of a clustered process: one client, its health, and this process's id.

redis-py reconnects by itself on the next command; what it does not do is tell anybody that
Redis is gone. ``RedisLink`` pings it every second so ``/healthz`` can say ``down`` and the
parts that hold leases know their renewals are failing.
"""

from __future__ import annotations

import asyncio
import enum
import os
import secrets
import socket
from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, Any, cast

import structlog

from agent_core import cancel_and_wait, stop_if_cancelled
from bot.cluster._redis import PubSub, Redis

if TYPE_CHECKING:
    from redis.commands.core import AsyncScript

log = structlog.get_logger(__name__)

PING_EVERY = 1.0
LISTEN_WAIT = 5.0
"""How long a listener's read waits for a message before it looks again. Its read times out by
this, not by the client's ``socket_timeout``, and each look costs a wake-up of its own: three
listeners looking every second cost an idle process 0.46 ms of CPU a second, every five 0.13
(issue 33's idle budget). Cancellation does not wait for it."""

# A lease's value is its holder: only the holder may extend or delete it (a process that
# stalled past its lease must not touch the next holder's).
RENEW_IF_HELD = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
RELEASE_IF_HELD = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


def process_id() -> str:
    """``host:pid:random``: unique even when a PaaS reuses a pid in a fresh container."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class RedisState(enum.StrEnum):
    OK = "ok"
    DOWN = "down"


class RedisLink:
    def __init__(self, url: str, *, key_prefix: str, lease_seconds: float) -> None:
        self.client: Redis = Redis.from_url(
            url, socket_connect_timeout=2.0, socket_timeout=5.0, health_check_interval=10
        )
        self.url = url
        self.prefix = key_prefix
        self.lease_seconds = lease_seconds
        self.process_id = process_id()
        self.state = RedisState.DOWN
        self._watch: asyncio.Task[None] | None = None
        self._scripts: dict[str, AsyncScript] = {}

    def key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    async def run_script(self, body: str, keys: Sequence[str], *args: str | int | float) -> Any:
        """The Lua script ``body`` on ``keys`` and ``args``, as ``EVALSHA``: its text goes to
        Redis once, not with every call (redis-py loads it again after a ``NOSCRIPT``, e.g.
        from a restarted Redis). Every script of the cluster's runs through here."""
        script = self._scripts.get(body)
        if script is None:
            script = self._scripts[body] = self.client.register_script(body)
        return await script(keys=list(keys), args=list(args), client=self.client)

    async def ping(self) -> None:
        await cast(Awaitable[bool], self.client.ping())

    async def start(self) -> None:
        """Connect once (a Redis unreachable at start-up is an error the operator must see),
        then keep watching its health."""
        await self.ping()
        self.state = RedisState.OK
        log.info("cluster.redis_connected", process=self.process_id)
        self._watch = asyncio.create_task(self._watch_health(), name="cluster:redis-health")

    def mark(self, ok: bool, error: BaseException | None = None) -> None:
        state = RedisState.OK if ok else RedisState.DOWN
        if state is not self.state:
            if ok:
                log.info("cluster.redis_up")
            else:
                log.warning("cluster.redis_down", error=repr(error))
        self.state = state

    async def _watch_health(self) -> None:
        while True:
            stop_if_cancelled()
            await asyncio.sleep(PING_EVERY)
            try:
                await asyncio.wait_for(self.ping(), timeout=PING_EVERY * 2)
            except Exception as exc:
                stop_if_cancelled(exc)
                self.mark(False, exc)
            else:
                self.mark(True)

    async def listen(
        self,
        channel: str,
        on_message: Callable[[bytes | str], None],
        on_subscribed: Callable[[], Awaitable[None]],
    ) -> None:
        """Deliver every message of ``channel`` until cancelled, subscribing again after a
        Redis failure; ``on_subscribed`` runs after each (re)subscription."""
        while True:
            stop_if_cancelled()
            pubsub: PubSub = self.client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(channel)
                await on_subscribed()
                while True:
                    stop_if_cancelled()
                    message = await pubsub.get_message(timeout=LISTEN_WAIT)
                    if message is not None and message.get("type") == "message":
                        on_message(message["data"])
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                stop_if_cancelled(exc)
                self.mark(False, exc)
                await asyncio.sleep(0.5)
            finally:
                # Bounded: a PubSub closed while its read was cancelled can wait forever on
                # its connection (seen as a hung shutdown); the client is closed anyway later.
                with suppress(Exception):
                    await asyncio.wait_for(pubsub.aclose(), 2.0)  # type: ignore[no-untyped-call, unused-ignore]

    async def aclose(self) -> None:
        if self._watch is not None:
            await cancel_and_wait(self._watch)
            self._watch = None
        await self.client.aclose()
