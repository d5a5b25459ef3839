"""Slack Events API ingestion: signed events/s verified and acknowledged, and ack latency.

A Loopgate with Slack in ``http`` mode serves ``POST /slack/events`` under uvicorn on 127.0.0.1;
a fake Slack Web API (tests/fakes/slack_server.py) answers the adapter's calls and the provider
answers instantly in-process. Clients post v0-signed ``event_callback`` requests over real HTTP
with some concurrency and time each request until its 200. Everything shares one event loop, so
the numbers are a lower bound of what a dedicated process does.

    python benchmarks/slack_events.py [--events 3000] [--concurrency 32] [--kind channel|dm]

``channel``: messages in one channel that don't mention the bot (verify, ack, persisted dedupe,
normalize, gating; no run). ``dm``: every event is a DM (its own conversation) that runs the
agent and posts a reply.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import httpx
import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent_core.testing import ScriptedProvider
from bot.app import Loopgate
from bot.config import parse_config
from bot.http.server import create_app
from bot.logging_setup import configure_logging
from tests.fakes.slack_server import (
    EventSender,
    FakeSlack,
    event_callback,
    message_event,
)


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def bench(events: int, concurrency: int, kind: str, workdir: Path) -> None:
    async with FakeSlack() as slack:
        config = parse_config(
            {
                "database": {"url": f"sqlite+aiosqlite:///{workdir / 'bench.db'}"},
                "agents": {"defaults": {"workspace": str(workdir / "ws")}},
                "bot": {"reactions": False, "sender_rate_limit": "off"},
                "channels": {
                    "slack": {
                        "enabled": True,
                        "mode": "http",
                        "bot_token": slack.bot_token,
                        "signing_secret": slack.signing_secret,
                        "api_base_url": slack.base_url,
                        "rate_limit": "off",
                    }
                },
            },
            {},
        )
        async with Loopgate(config, providers={"openai": ScriptedProvider()}) as app:
            server = _Server(
                uvicorn.Config(
                    create_app(app, manage_lifespan=False),
                    host="127.0.0.1",
                    port=0,
                    log_config=None,
                    log_level="warning",
                    access_log=False,
                    lifespan="off",
                )
            )
            task = asyncio.create_task(server.serve())
            while not server.started:  # noqa: ASYNC110 (uvicorn offers no started event)
                await asyncio.sleep(0.005)
            port = server.servers[0].sockets[0].getsockname()[1]
            url = f"http://127.0.0.1:{port}/slack/events"
            # aiohttp as the client: lighter than httpx, so the client steals less of the loop.
            connector = aiohttp.TCPConnector(limit=concurrency)
            async with aiohttp.ClientSession(connector=connector) as client:
                signer = EventSender(httpx.AsyncClient(), slack.signing_secret)

                async def send(payload: dict[str, object]) -> int:
                    body = json.dumps(payload).encode()
                    headers = {"Content-Type": "application/json", **signer.headers(body)}
                    async with client.post(url, data=body, headers=headers) as response:
                        await response.read()
                        return response.status

                bodies = [
                    event_callback(
                        message_event(f"event {i}", channel=f"D{i}" if kind == "dm" else "C1")
                    )
                    for i in range(events + 50)
                ]
                for body in bodies[:50]:  # warm-up
                    await send(body)
                latencies: list[float] = []
                queue = list(reversed(bodies[50:]))

                async def worker() -> None:
                    while queue:
                        body = queue.pop()
                        t = time.perf_counter()
                        status = await send(body)
                        latencies.append((time.perf_counter() - t) * 1000)
                        assert status == 200, status

                started = time.perf_counter()
                await asyncio.gather(*(worker() for _ in range(concurrency)))
                elapsed = time.perf_counter() - started
                q = statistics.quantiles(sorted(latencies), n=100)
                print(f"kind={kind} events={events} concurrency={concurrency}")
                print(f"acknowledged: {events / elapsed:,.0f} events/s (verified + acked)")
                print(
                    f"ack latency: p50 {q[49]:.2f} ms, p99 {q[98]:.2f} ms, max "
                    f"{max(latencies):.2f} ms"
                )
                processed_at = time.perf_counter()
                if kind == "dm":
                    await slack.wait_for(lambda: len(slack.posts) >= events + 50, timeout=300)
                    took = time.perf_counter() - started
                    print(
                        f"all {events} runs answered after {took:.1f} s "
                        f"({events / took:,.0f} replies/s incl. fake Slack posts)"
                    )
                else:
                    channel = app.gateway.channels["slack"]
                    while pending := list(getattr(channel, "_tasks", ())):
                        await asyncio.gather(*pending, return_exceptions=True)
                    print(
                        f"background processing drained {time.perf_counter() - processed_at:.2f} "
                        "s after the last ack"
                    )
                print(f"fake Slack API calls: {json.dumps(_count(slack))}")
            server.should_exit = True
            await task


def _count(slack: FakeSlack) -> dict[str, int]:
    counts: dict[str, int] = {}
    for call in slack.calls:
        counts[call.method] = counts.get(call.method, 0) + 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--kind", choices=["channel", "dm"], default="channel")
    args = parser.parse_args()
    configure_logging("warning", "console")
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(bench(args.events, args.concurrency, args.kind, Path(tmp)))


if __name__ == "__main__":
    main()
