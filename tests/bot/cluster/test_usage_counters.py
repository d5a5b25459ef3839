"""Usage-limit counters shared through Redis (``bot/cluster/usage_counters.py``): two
processes' links on one key prefix admit and settle against the same counters."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from agent_core import RunStatus
from bot.app import Loopgate
from bot.cluster.connection import RedisLink
from bot.cluster.usage_counters import RedisUsageCounters
from bot.usage import Recount, Refusal
from bot.usage.limits import Scope
from channels import ChatRef, ChatType
from tests.cluster_support import (  # noqa: F401
    ClusterConfig,
    cluster_config,
    links,
    needs_postgres,
    needs_redis,
    redis_prefix,
    shared_schema,
)
from tests.conftest import ChatDriver
from tests.fakes.llm_server import FakeLLM, text

pytestmark = [needs_redis]

SINCE = datetime(2026, 12, 5, tzinfo=UTC)


def scope(tokens: int = 0, usd: float = 0.0, key: str = "user:web:alice:2026-12-05") -> Scope:
    return Scope(
        key, "user_daily", SINCE, SINCE + timedelta(days=1), token_limit=tokens, usd_limit=usd
    )


class Seeds:
    """What the shared database's rollup says, and how often it was asked."""

    def __init__(self, tokens: int = 0, usd: float = 0.0) -> None:
        self.value = (tokens, usd)
        self.asked = 0

    async def __call__(self, _: Scope) -> tuple[int, float]:
        self.asked += 1
        return self.value


async def test_calls_admitted_at_once_in_one_process_share_one_seed(
    links: tuple[RedisLink, RedisLink],  # noqa: F811
) -> None:
    class SlowSeeds(Seeds):
        async def __call__(self, scope: Scope) -> tuple[int, float]:
            await asyncio.sleep(0.05)  # the database's rollup, read while the others arrive
            return await super().__call__(scope)

    seeds = SlowSeeds(tokens=100)
    counters = RedisUsageCounters(links[0], seeds)
    limit = scope(tokens=1000)
    verdicts = await asyncio.gather(*(counters.admit([limit], 100, 0.0) for _ in range(5)))
    assert verdicts == [None] * 5  # 100 recorded + 5 x 100 reserved fits
    assert seeds.asked == 1
    assert counters._seeding == {}


async def test_two_processes_reserve_against_one_counter(
    links: tuple[RedisLink, RedisLink],  # noqa: F811
) -> None:
    seeds = Seeds(tokens=100)
    one, two = (RedisUsageCounters(link, seeds) for link in links)
    limit = scope(tokens=1000)
    verdicts = await asyncio.gather(
        *(counters.admit([limit], 400, 0.0) for counters in (one, two, one, two))
    )
    # 100 recorded: 100 + 400 + 400 fits, a third estimate would overshoot, wherever it runs
    assert sum(v is None for v in verdicts) == 2
    assert all(v.unit == "tokens" for v in verdicts if v is not None)
    assert seeds.asked <= 2  # seeded once (two processes may both read, one write wins)
    await one.settle([limit], (400, 0.0), (150, 0.0))
    await two.settle([limit], (400, 0.0), (900, 0.0))
    # 1150 recorded: reached, for both processes
    assert await one.admit([limit], 1, 0.0) is not None
    assert await two.admit([limit], 1, 0.0) is not None


async def test_usd_budgets_and_a_seed_never_overwrites_a_peers_counts(
    links: tuple[RedisLink, RedisLink],  # noqa: F811
) -> None:
    one = RedisUsageCounters(links[0], Seeds(usd=0.5))
    budget = scope(usd=1.0, key="agent:main:2026-12-05")
    assert await one.admit([budget], 10, 0.3) is None
    await one.settle([budget], (10, 0.3), (10, 0.45))  # 0.95 used
    # the second process's database read is older: it must not reset the counter
    two = RedisUsageCounters(links[1], Seeds(usd=0.0))
    assert await two.admit([budget], 10, 0.01) is None  # 0.95 < 1.0: a lone call may go
    refusal = await one.admit([budget], 10, 0.01)  # in flight: 0.95 + 0.01 + 0.01 fits
    assert refusal is None
    await two.settle([budget], (10, 0.01), (10, 0.2))  # 1.15 used
    refused = await two.admit([budget], 1, 0.0)
    assert refused is not None and refused.unit == "usd" and refused.scope is budget


async def test_a_ceiling_near_the_limit_turns_the_scope_exact_for_every_process(
    links: tuple[RedisLink, RedisLink],  # noqa: F811
) -> None:
    one, two = (RedisUsageCounters(link, Seeds()) for link in links)
    limit = scope(tokens=1000)
    assert await one.admit([limit], 600, 0.0, ceiling=True) is None
    # 600 + 600 > 1000 by the ceilings: a recount, nothing held, and the scope turns exact
    verdict = await two.admit([limit], 600, 0.0, ceiling=True)
    assert isinstance(verdict, Recount) and verdict.scope is limit
    assert isinstance(await one.admit([limit], 10, 0.0, ceiling=True), Recount)  # any process
    # The first ceiling counted exactly (600 -> 200): exact estimates are decided on it
    await one.adjust([limit], (400, 0.0))
    assert await two.admit([limit], 700, 0.0) is None  # 200 + 700
    refused = await two.admit([limit], 200, 0.0)
    assert isinstance(refused, Refusal) and refused.unit == "tokens"
    await one.settle([limit], (200, 0.0), (150, 0.0))
    await two.settle([limit], (700, 0.0), (100, 0.0))
    fields = await links[0].client.hgetall(links[0].key("usage", limit.key))
    held = {k.decode(): v.decode() for k, v in fields.items()}
    assert (held["rt"], held["n"], held["c"], held["ut"], held["x"]) == ("0", "0", "0", "250", "1")


async def test_a_settled_ceiling_is_released_whole(
    links: tuple[RedisLink, RedisLink],  # noqa: F811
) -> None:
    one = RedisUsageCounters(links[0], Seeds())
    limit = scope(tokens=1000)
    assert await one.admit([limit], 900, 0.0, ceiling=True) is None
    await one.settle([limit], (900, 0.0), (50, 0.0), ceiling=True)
    fields = await links[0].client.hgetall(links[0].key("usage", limit.key))
    held = {k.decode(): v.decode() for k, v in fields.items()}
    assert (held["rt"], held["n"], held["c"], held["ut"]) == ("0", "0", "0", "50")
    assert "x" not in held  # never near the limit: still counted by ceilings


async def test_without_redis_the_call_goes_through() -> None:
    link = RedisLink("redis://127.0.0.1:1/0", key_prefix="lgtest-down", lease_seconds=1)
    counters = RedisUsageCounters(link, Seeds(tokens=10_000))
    assert await counters.admit([scope(tokens=1)], 1, 0.0) is None
    await counters.settle([scope(tokens=1)], (1, 0.0), (1, 0.0))  # logged, not raised


@needs_postgres
async def test_a_quota_used_up_in_one_process_refuses_in_another(
    cluster_config: ClusterConfig,  # noqa: F811
    llm: FakeLLM,
) -> None:
    config = cluster_config(usage={"user_daily_tokens": 1000})
    async with Loopgate(config) as first, Loopgate(config) as second:
        assert isinstance(first.meter.counters, RedisUsageCounters)
        llm.script(text("first", usage=(900, 150)))
        here = ChatDriver(first, ChatRef("web", "dm-alice-1", ChatType.DIRECT))
        answered = await here.ask("hello")
        assert answered is not None and answered.status is RunStatus.COMPLETED
        there = ChatDriver(second, ChatRef("web", "dm-alice-2", ChatType.DIRECT))
        refused = await there.ask("hello again")
        assert refused is not None and refused.status is RunStatus.USAGE_LIMIT
        assert len(llm.chat_requests) == 1
