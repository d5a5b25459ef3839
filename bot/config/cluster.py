"""``redis.*`` and ``cluster.*``: several Loopgate processes on one Postgres and one Redis.

Both are off unless ``redis.url`` is set: one process needs no coordination at all.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from pydantic import Field

from bot.config.base import StrictModel


class RedisConfig(StrictModel):
    url: str = ""
    """``redis://[:password@]host:6379/0``; empty (the default): one process, no Redis."""


class ClusterConfig(StrictModel):
    lease_seconds: float = Field(default=15.0, gt=0)
    """How long a dead process keeps what it held (the poller lease, its runs in Redis)."""
    key_prefix: str = Field(default="loopgate", min_length=1)
    """Prefix of every Redis key and channel: several services (or tests) may share a Redis."""
    spread_polled: bool = True
    """The elected poller (Telegram, Zalo in polling mode) assigns new chats over all the
    processes (``bot/cluster/members.py``); off, it answers every chat itself, as a standby
    cluster would: less CPU per reply, one process's ``bot.max_concurrent_runs`` for all."""


def cluster_problems(redis_url: str, database_url: str) -> list[str]:
    """Checks across ``redis.url`` and ``database.url``, reported like schema errors."""
    if not redis_url:
        return []
    problems: list[str] = []
    if not redis_url.startswith(("redis://", "rediss://", "unix://")):
        problems.append("redis.url: must start with redis://, rediss:// or unix://")
    if database_url.startswith("sqlite"):
        # Every process must see the same sessions and inbox: a file per process cannot.
        problems.append(
            "redis.url: several processes need a shared database, but database.url is SQLite "
            "(use postgresql+asyncpg://..., or remove redis.url to run one process)"
        )
    return problems


def redis_password(url: str) -> str:
    """The password in ``redis.url`` (masked in logs); empty when there is none."""
    try:
        return unquote(urlsplit(url).password or "") if url else ""
    except ValueError:  # a malformed URL fails at connect time, with its own message
        return ""
