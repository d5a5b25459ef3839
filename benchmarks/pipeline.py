"""Whole-pipeline benchmark: local channel → gateway → SQLite store → loop → local channel.

The provider answers instantly in-process, so what is measured is Loopgate's own overhead per
message (queueing, history load, run bookkeeping, atomic write, trace write, the durable inbox's
writes, delivery).

    python benchmarks/pipeline.py [--messages 2000] [--sessions 200] [--idle 1000]

Prints messages/s, p50/p99 gateway overhead per message, and RSS per 1,000 idle sessions, then
the unloaded overhead with the durable inbox off and on, side by side (what its writes cost).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from agent_core.testing import ScriptedProvider
from bot.app import Loopgate
from bot.config import Config, parse_config
from bot.logging_setup import configure_logging
from channels import ChatRef, ChatType, InboundMessage, Sender
from channels.local import Outbound


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def message(chat_id: str, text: str) -> InboundMessage:
    chat = ChatRef("web", chat_id, ChatType.DIRECT)
    return InboundMessage(chat=chat, message_id=uuid.uuid4().hex, sender=Sender(chat_id), text=text)


def bench_config(workdir: Path) -> Config:
    return parse_config(
        {
            "database": {"url": f"sqlite+aiosqlite:///{workdir / 'bench.db'}"},
            "agents": {"defaults": {"workspace": str(workdir / "ws")}},
            "bot": {"reactions": False, "sender_rate_limit": "off"},
        },
        {},
    )


async def unloaded(app: Loopgate, count: int, prefix: str) -> tuple[list[float], list[float]]:
    """One message at a time, each to its own session: the true per-message cost, in ms, until
    the reply is sent (what the user waits for) and until the turn is done (its last records)."""
    to_reply: list[float] = []
    to_done: list[float] = []
    replied: dict[str, float] = {}

    async def on_message(o: Outbound) -> None:
        if o.kind == "message":
            replied[o.chat.chat_id] = time.perf_counter()

    for i in range(count):
        chat_id = f"{prefix}{i}"
        unsubscribe = app.web.listen(chat_id, on_message)
        t = time.perf_counter()
        job = await app.gateway.handle(message(chat_id, "hello"))
        assert job is not None
        await job.done
        done = time.perf_counter()
        unsubscribe()
        to_reply.append((replied[chat_id] - t) * 1000)
        to_done.append((done - t) * 1000)
    return to_reply, to_done


async def inbox_cost(workdir: Path, count: int, rounds: int) -> None:
    """The same unloaded measurement with the inbox off and on, interleaved in rounds so that
    drift of the machine (other load, the file growing) hits both alike."""
    reply: dict[bool, list[float]] = {False: [], True: []}
    done: dict[bool, list[float]] = {False: [], True: []}
    for round_no in range(rounds + 1):
        for durable in (False, True):
            directory = workdir / f"durable-{durable}"
            async with Loopgate(
                bench_config(directory), providers={"openai": ScriptedProvider()}, durable=durable
            ) as app:
                if round_no == 0:  # warm-up: first-use costs are not the steady state
                    await unloaded(app, 20, "warm")
                    continue
                to_reply, to_done = await unloaded(app, count, f"r{round_no}-")
                reply[durable] += to_reply
                done[durable] += to_done
    print(f"durable inbox cost ({rounds} × {count} sequential messages each, SQLite):")
    print(f"  {'':<22}{'inbox off p50':>14}{'on p50':>8}{'added':>8}"
          f"{'off p99':>9}{'on p99':>8}{'added':>8}")  # fmt: skip
    for name, series in (("until the reply is sent", reply), ("until the turn is done", done)):
        off = statistics.quantiles(sorted(series[False]), n=100)
        on = statistics.quantiles(sorted(series[True]), n=100)
        print(
            f"  {name:<22}{off[49]:>14.2f}{on[49]:>8.2f}{on[49] - off[49]:>+8.2f}"
            f"{off[98]:>9.2f}{on[98]:>8.2f}{on[98] - off[98]:>+8.2f}"
        )


async def bench(messages: int, sessions: int, idle: int, workdir: Path) -> None:
    config = bench_config(workdir)
    provider = ScriptedProvider()  # echo, no delay
    async with Loopgate(config, providers={"openai": provider}) as app:
        sent_at: dict[str, float] = {}
        latencies: list[float] = []
        finished = asyncio.Event()

        async def on_message(o: Outbound) -> None:
            if o.kind == "message":
                latencies.append(time.perf_counter() - sent_at[o.chat.chat_id])
                if len(latencies) == messages:
                    finished.set()

        for s in range(sessions):
            app.web.listen(f"s{s}", on_message)

        # Warm-up: first-use costs (imports, DB pages, prompt build) are not the steady state.
        for s in range(min(sessions, 20)):
            job = await app.gateway.handle(message(f"warm{s}", "warm up"))
            assert job is not None
            await job.done

        _, solo = await unloaded(app, min(300, messages), "solo")
        sq = statistics.quantiles(sorted(solo), n=100)
        print(
            f"unloaded overhead per message ({len(solo)} sequential): "
            f"p50 {sq[49]:.2f} ms, p99 {sq[98]:.2f} ms"
        )

        # Loaded: one message in flight per session at a time, like users waiting for answers.
        per_session = messages // sessions
        messages = per_session * sessions

        async def user(s: int) -> None:
            chat_id = f"s{s}"
            for i in range(per_session):
                sent_at[chat_id] = time.perf_counter()
                job = await app.gateway.handle(message(chat_id, f"message {i}"))
                assert job is not None
                await job.done

        t0 = time.perf_counter()
        await asyncio.gather(*(user(s) for s in range(sessions)))
        elapsed = time.perf_counter() - t0

        lat_ms = sorted(x * 1000 for x in latencies)
        q = statistics.quantiles(lat_ms, n=100)
        print(f"messages: {messages} over {sessions} concurrent sessions, SQLite file store")
        print(f"throughput: {messages / elapsed:,.0f} messages/s")
        print(
            f"loaded latency per message (queueing included): p50 {q[49]:.2f} ms, "
            f"p99 {q[98]:.2f} ms, max {lat_ms[-1]:.2f} ms"
        )

        # Idle sessions: each had one exchange and is now quiet. What do they keep in memory?
        gc.collect()
        before = rss_mib()
        for s in range(idle):
            job = await app.gateway.handle(message(f"idle{s}", "hello"))
            assert job is not None
            await job.done
        gc.collect()
        after = rss_mib()
        per_thousand = (after - before) / idle * 1000
        print(
            f"RSS: {before:.1f} MiB → {after:.1f} MiB after {idle} idle sessions "
            f"= {per_thousand:.2f} MiB per 1,000 idle sessions "
            f"(scheduler lanes held: {app.gateway.scheduler.lanes})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--idle", type=int, default=1000)
    parser.add_argument("--inbox-rounds", type=int, default=4)
    args = parser.parse_args()
    configure_logging("error")
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(bench(args.messages, args.sessions, args.idle, Path(tmp)))
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(inbox_cost(Path(tmp), 200, args.inbox_rounds))


if __name__ == "__main__":
    main()
