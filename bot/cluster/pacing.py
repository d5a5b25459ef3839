"""Send budgets shared by every process of one bot: token buckets in Redis.

Why not the ``limits`` library: its released versions (5.8 on PyPI) offer fixed, moving and
sliding windows, not token buckets ("1/s, bursts of 3" is what Telegram and Slack ask for); a
send takes from up to three buckets at once (chat, group, bot) and must take from all or none,
which separate ``hit`` calls cannot do atomically; its async Redis storage wants coredis (its
redis-py extra pins ``redis<8``; we use redis-py 8) and a client of its own; and it timestamps
with each process's clock. So this is one Lua script, run atomically by Redis:

- each bucket is GCRA state, the "theoretical arrival time" of its next token, in microseconds
  of Redis' own clock (one clock for all processes, whatever their hosts' clocks say). A bucket
  with ``rate`` r and ``burst`` b grants a send at ``now`` when ``tat - now <= (b - 1) / r``,
  which is exactly a token bucket of capacity b refilling at r; granting moves ``tat`` on by
  ``1 / r``. A missing key is a full bucket, and a key expires when its bucket would be full
  again, so idle chats cost nothing;
- the script grants only when every bucket (and the hold, a key a 429 sets for
  ``retry_after``) allows it, and otherwise returns how long until all would, taking nothing:
  a caller sleeps that long and asks again, like the in-memory pacer.

Keys: ``<prefix>:pace:<channel>:<sha256(token)[:24]>:<bucket>``, never the token itself.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.cluster.connection import RedisLink, RedisState
from bot.cluster.poller_lease import token_digest
from bot.errors import BotError
from channels.protocol import PaceBucket

_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local wait = 0
local held = redis.call('PTTL', KEYS[1])
if held > 0 then wait = held * 1000 end
local tats = {}
for i = 2, #KEYS do
  local interval = tonumber(ARGV[2 * i - 3])
  local burst = tonumber(ARGV[2 * i - 2])
  local tat = tonumber(redis.call('GET', KEYS[i]) or now)
  if tat < now then tat = now end
  tats[i] = tat
  local w = tat - (burst - 1) * interval - now
  if w > wait then wait = w end
end
if wait > 0 then return string.format('%.0f', wait) end
for i = 2, #KEYS do
  local next_tat = tats[i] + tonumber(ARGV[2 * i - 3])
  local ttl = math.ceil((next_tat - now) / 1000) + 1000
  redis.call('SET', KEYS[i], string.format('%.0f', next_tat), 'PX', ttl)
end
return '0'
"""
# A hold only ever grows: a shorter retry_after must not cut a longer one short.
_HOLD = """
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], '1', 'PX', ARGV[1])
end
return 1
"""


class RedisUnavailable(BotError, ConnectionError):
    """Redis is known to be down: fail at once rather than after the client's timeout."""


class RedisPaceStore:
    """One bot's send budgets; satisfies :class:`channels.protocol.PaceStore`."""

    def __init__(self, link: RedisLink, channel: str, token: str) -> None:
        self.link = link
        self.base = link.key("pace", channel, token_digest(token))

    def _hold_key(self, name: str) -> str:
        return f"{self.base}:hold:{name}"

    def _check(self) -> None:
        if self.link.state is not RedisState.OK:
            raise RedisUnavailable("redis is down")

    async def take(self, buckets: Sequence[PaceBucket], *, hold: str = "") -> float:
        self._check()
        keys = [self._hold_key(hold), *(f"{self.base}:{b.name}" for b in buckets)]
        args: list[float] = []
        for bucket in buckets:
            args += [1_000_000 / bucket.rate, max(1, bucket.burst)]
        wait_us = await self.link.run_script(_TAKE, keys, *args)
        return float(wait_us) / 1_000_000

    async def hold(self, name: str, seconds: float) -> None:
        self._check()
        await self.link.run_script(_HOLD, [self._hold_key(name)], max(1, int(seconds * 1000)))
