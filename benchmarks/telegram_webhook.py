"""Telegram webhook ingestion: updates/s accepted by POST /telegram/webhook, and p50/p99 time
from receiving an update to the first ``sendChatAction typing`` reaching the (fake) Bot API.

Instant in-process provider, pacing off, the fake Bot API from tests/ over real HTTP, the bot's
ASGI app called in-process. Run: ``python benchmarks/telegram_webhook.py [--updates N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_core.testing import ScriptedProvider
from bot.app import Loopgate
from bot.config import parse_config
from bot.http.server import create_app
from bot.logging_setup import configure_logging
from tests.fakes.telegram_server import FakeTelegram


async def bench(updates: int, concurrency: int, workdir: Path) -> None:
    configure_logging("warning", "console")
    async with FakeTelegram() as tg:
        config = parse_config(
            {
                "database": {"url": f"sqlite+aiosqlite:///{workdir / 'bench.db'}"},
                "agents": {"defaults": {"workspace": str(workdir / "ws")}},
                "bot": {"reactions": False, "queue_cap": 1000, "sender_rate_limit": "off"},
                "channels": {
                    "telegram": {
                        "enabled": True,
                        "token": tg.token,
                        "api_base_url": tg.base_url,
                        "mode": "webhook",
                        "webhook_url": "https://bench.example/telegram/webhook",
                        "webhook_secret": "bench",
                        "rate_limit": "off",
                    }
                },
            },
            {},
        )
        async with Loopgate(config, providers={"openai": ScriptedProvider()}) as app:
            transport = httpx.ASGITransport(app=create_app(app, manage_lifespan=False))
            headers = {"X-Telegram-Bot-Api-Secret-Token": "bench"}
            posted: dict[int, float] = {}
            semaphore = asyncio.Semaphore(concurrency)
            async with httpx.AsyncClient(transport=transport, base_url="http://bot") as http:

                async def post(i: int) -> None:
                    user = 10_000 + i  # one DM per update: no per-session queueing
                    body = {
                        "update_id": tg.new_update_id(),
                        **tg.private_message(f"m{i}", user_id=user),
                    }
                    async with semaphore:
                        posted[user] = time.perf_counter()
                        response = await http.post("/telegram/webhook", json=body, headers=headers)
                        assert response.status_code == 200, response.text

                started = time.perf_counter()
                await asyncio.gather(*(post(i) for i in range(updates)))
                accepted = time.perf_counter() - started
                await tg.wait_for(lambda: len(tg.sent) >= updates, timeout=300)
                total = time.perf_counter() - started
            first_typing: dict[int, float] = {}
            for c in tg.calls_of("sendChatAction"):
                first_typing.setdefault(int(c.params["chat_id"]), c.at)
            # Call.at is time.monotonic(); convert posted (perf_counter) to the same clock.
            offset = time.monotonic() - time.perf_counter()
            latencies = sorted(
                (first_typing[u] - (posted[u] + offset)) * 1000 for u in posted if u in first_typing
            )
    p99 = latencies[int(len(latencies) * 0.99) - 1]
    print(f"updates: {updates}, concurrency: {concurrency}")
    print(f"webhook accepted: {updates / accepted:,.0f} updates/s ({accepted:.2f} s)")
    print(f"answered end to end: {updates / total:,.0f} updates/s ({total:.2f} s)")
    print(f"time to first typing: p50 {statistics.median(latencies):.1f} ms, p99 {p99:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--updates", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(bench(args.updates, args.concurrency, Path(tmp)))


if __name__ == "__main__":
    main()
