"""Usage-limit counters shared by every process: one Redis hash per scope and period.

The same rule as :class:`bot.usage.LocalCounters` (``bot/usage/counters.py``), made atomic
across processes by Lua scripts: a call's admission checks and reserves in all of its scopes in
one step, so two processes can't both take the last of a budget.

Keys: ``<prefix>:usage:<scope key>`` with fields ``ut`` and ``uu`` (tokens and USD used),
``rt`` and ``ru`` (reserved by calls in flight), ``n`` (how many), ``c`` (how many of those
reserved a ceiling) and ``x`` (1: the scope counts exactly, its ceilings are answered
``recount``); they expire a day after their period ends. A missing key is seeded from the
shared database's hourly rollup first (only if still missing, so a peer's counts are never
overwritten). When Redis can't be reached the call
is let through and ``usage.counters_unavailable`` is logged: a budget check must not take the
service down with Redis. A process killed during a call leaves its reservation held until the
period ends (limits are then reached a little early, never late).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from functools import partial

import structlog

from bot.cluster.connection import RedisLink
from bot.usage import Refusal, Scope
from bot.usage.counters import Recount, Seed

log = structlog.get_logger(__name__)

KEEP_AFTER_PERIOD_MS = 86_400_000

_SEED = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'ut', ARGV[1], 'uu', ARGV[2], 'rt', 0, 'ru', 0, 'n', 0)
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return 1
"""

_ADMIT = """
local est_t = tonumber(ARGV[1])
local est_u = tonumber(ARGV[2])
local ceiling = ARGV[3] == '1'
for i = 1, #KEYS do
  local tl = tonumber(ARGV[2 * i + 2])
  local ul = tonumber(ARGV[2 * i + 3])
  local v = redis.call('HMGET', KEYS[i], 'ut', 'uu', 'rt', 'ru', 'n', 'x')
  if not v[1] then return 'missing:' .. i end
  if ceiling and v[6] == '1' then return 'recount:' .. i end
  local ut, uu = tonumber(v[1]), tonumber(v[2])
  local rt, ru, n = tonumber(v[3] or 0), tonumber(v[4] or 0), tonumber(v[5] or 0)
  local unit = nil
  if tl > 0 and (ut >= tl or (n > 0 and ut + rt + est_t > tl)) then
    unit = 'tokens'
  elseif ul > 0 and (uu >= ul or (n > 0 and uu + ru + est_u > ul)) then
    unit = 'usd'
  end
  if unit then
    local reached = (tl > 0 and ut >= tl) or (ul > 0 and uu >= ul)
    if ceiling and not reached then
      redis.call('HSET', KEYS[i], 'x', 1)
      return 'recount:' .. i
    end
    return unit .. ':' .. i
  end
end
for i = 1, #KEYS do
  redis.call('HINCRBY', KEYS[i], 'rt', est_t)
  redis.call('HINCRBYFLOAT', KEYS[i], 'ru', est_u)
  redis.call('HINCRBY', KEYS[i], 'n', 1)
  if ceiling then redis.call('HINCRBY', KEYS[i], 'c', 1) end
end
return 'ok'
"""

_RELEASE = """
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    redis.call('HINCRBY', KEYS[i], 'rt', ARGV[1])
    redis.call('HINCRBYFLOAT', KEYS[i], 'ru', ARGV[2])
    redis.call('HINCRBY', KEYS[i], 'n', ARGV[3])
    redis.call('HINCRBY', KEYS[i], 'c', ARGV[4])
    redis.call('HINCRBY', KEYS[i], 'ut', ARGV[5])
    redis.call('HINCRBYFLOAT', KEYS[i], 'uu', ARGV[6])
  end
end
return 1
"""
"""A call's reservation back, as increments (the caller negates; Lua's -0 is no integer to
HINCRBY): settle gives back its estimate, one call, maybe one ceiling, and adds what it used;
adjust gives back a ceiling's excess over its exact estimate and one ceiling."""


class RedisUsageCounters:
    """Satisfies :class:`bot.usage.BudgetCounters`."""

    def __init__(self, link: RedisLink, seed: Seed) -> None:
        self.link = link
        self._seed = seed
        self._seeding: dict[str, asyncio.Task[None]] = {}
        """Seeds under way here, by key: calls admitted at once share one database read."""

    def _key(self, scope: Scope) -> str:
        return self.link.key("usage", scope.key)

    async def admit(
        self, scopes: Sequence[Scope], tokens: int, usd: float, *, ceiling: bool = False
    ) -> Refusal | Recount | None:
        keys = [self._key(scope) for scope in scopes]
        limits: list[str] = []
        for scope in scopes:
            limits += [str(scope.token_limit), repr(float(scope.usd_limit))]
        try:
            for _ in range(3):  # a key that expired between seeding and admission is re-seeded
                await self._seed_missing(scopes, keys)
                answer = await self.link.run_script(
                    _ADMIT, keys, str(tokens), repr(float(usd)),
                    "1" if ceiling else "0", *limits,
                )  # fmt: skip
                verdict, _, index = _text(answer).partition(":")
                if verdict == "ok":
                    return None
                if verdict == "recount":
                    return Recount(scopes[int(index) - 1])
                if verdict in ("tokens", "usd"):
                    return Refusal(
                        scopes[int(index) - 1], "tokens" if verdict == "tokens" else "usd"
                    )
        except Exception as exc:
            self.link.mark(False, exc)
            log.warning("usage.counters_unavailable", error=repr(exc))
        return None

    async def settle(
        self,
        scopes: Sequence[Scope],
        reserved: tuple[int, float],
        used: tuple[int, float],
        *,
        ceiling: bool = False,
    ) -> None:
        await self._release(scopes, reserved, used, calls=1, ceilings=int(ceiling))

    async def adjust(self, scopes: Sequence[Scope], released: tuple[int, float]) -> None:
        await self._release(scopes, released, (0, 0.0), calls=0, ceilings=1)

    async def _release(
        self,
        scopes: Sequence[Scope],
        reserved: tuple[int, float],
        used: tuple[int, float],
        *,
        calls: int,
        ceilings: int,
    ) -> None:
        keys = [self._key(scope) for scope in scopes]
        try:
            await self.link.run_script(
                _RELEASE, keys, str(-reserved[0]), repr(-float(reserved[1]) or 0.0),
                str(-calls), str(-ceilings), str(used[0]), repr(float(used[1])),
            )  # fmt: skip
        except Exception as exc:
            self.link.mark(False, exc)
            log.warning("usage.counters_unavailable", error=repr(exc))

    async def _seed_missing(self, scopes: Sequence[Scope], keys: list[str]) -> None:
        client = self.link.client
        for scope, key in zip(scopes, keys, strict=True):
            if await client.exists(key):
                continue
            seeding = self._seeding.get(key)
            if seeding is None:
                seeding = asyncio.create_task(self._seed_key(scope, key))
                self._seeding[key] = seeding
                seeding.add_done_callback(partial(self._seeded, key))
            # Shielded: a caller cancelled while it waits must not cancel the others' seed.
            await asyncio.shield(seeding)

    def _seeded(self, key: str, task: asyncio.Task[None]) -> None:
        self._seeding.pop(key, None)
        if not task.cancelled():
            task.exception()  # its waiters got it; retrieved here in case none is left

    async def _seed_key(self, scope: Scope, key: str) -> None:
        used_tokens, used_usd = await self._seed(scope)
        lifetime = scope.resets_at - scope.since
        ttl = int(lifetime.total_seconds() * 1000) + KEEP_AFTER_PERIOD_MS
        await self.link.run_script(_SEED, [key], str(used_tokens), repr(float(used_usd)), str(ttl))


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
