"""The CPU that usage accounting adds to a reply (issue 32's target: under 0.5 ms).

Two measures, both in this process's CPU time (``time.process_time``), SQLite file database:

- **meter**: what the loop asks of the meter for one model call, repeated: ``reserve`` and
  ``settle`` (price, the rollup's in-memory merge, the counters), the rollup's batched upserts
  written behind (flushed every ``--batch`` calls, as a busy service's writer would), and with
  ``--limits`` a user quota and an agent budget, so each call is also estimated (the request's
  messages counted with the calibrated tokenizer, as the loop does) and reserved;
- **replies**: whole replies through the service (web channel, an in-process echo model), in
  rounds alternating the meter off and on, so drift hits both alike; per-reply CPU of each and
  their ratio. A reply's own CPU varies more than accounting costs, so this shows the share;
  the meter measure gives the figure.

    python benchmarks/usage.py [--calls 20000] [--batch 50] [--replies 300] [--rounds 6]

Prints per-call and per-reply CPU (p50 and p90 over rounds) and one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from agent_core import LlmCall, Message, RunRequest, Usage
from agent_core.testing import ScriptedProvider
from agent_core.tokens import TokenCounter, get_encoder
from bot.app import Loopgate
from bot.config import Config, parse_config
from bot.logging_setup import configure_logging
from bot.storage import open_database
from bot.storage.usage import SqlUsage
from bot.usage import Meter
from channels import ChatRef, ChatType, InboundMessage, Sender

PRICING = {"input_per_mtok": 0.15, "output_per_mtok": 0.6, "cached_input_per_mtok": 0.075}


def bench_config(workdir: Path, *, limits: bool) -> Config:
    data: dict[str, Any] = {
        "database": {"url": f"sqlite+aiosqlite:///{workdir / 'bench.db'}"},
        "agents": {"defaults": {"workspace": str(workdir / "ws")}},
        "bot": {"reactions": False, "sender_rate_limit": "off"},
        "providers": {"openai": {"model": "gpt-4o-mini", "pricing": PRICING}},
    }
    if limits:
        data["usage"] = {"user_daily_tokens": 10**12, "user_daily_usd": 10**6}
        data["agents"]["main"] = {"budget": {"daily_usd": 10**6, "monthly_usd": 10**7}}
    return parse_config(data, {})


def messages() -> list[Message]:
    """A conversation of the size a reply carries: a system prompt and some history."""
    history = [Message.system("You are a helpful assistant. " * 200)]
    for n in range(10):
        history += [Message.user(f"question {n} " * 30), Message.assistant(f"answer {n} " * 60)]
    return history


async def meter_rounds(
    workdir: Path, *, limits: bool, calls: int, batch: int, rounds: int
) -> list[float]:
    """Per-call CPU (ms) of each round."""
    config = bench_config(workdir, limits=limits)
    per_call: list[float] = []
    async with await open_database(config.database.url) as db:
        meter = Meter(config, SqlUsage(db))
        await meter.price_note("openai", "gpt-4o-mini")  # the price is looked up once
        counter = TokenCounter("gpt-4o-mini")
        counter.load(get_encoder("gpt-4o-mini"))
        convo = messages()
        counter.count(convo)  # counts are cached per message, as across a conversation's calls
        usage = Usage(3000, 200, 1000)
        for _ in range(rounds):
            start = time.process_time()
            for n in range(calls):
                request = RunRequest("s", "hi", f"web:u{n % 100}", channel="web")
                tokens = counter.count(convo) if meter.needs_estimate(request) else 0
                call = LlmCall(request, "openai", "gpt-4o-mini", 1, tokens, 1024, True)
                await meter.settle(await meter.reserve(call), usage)
                if n % batch == batch - 1:
                    await meter.store.flush()
            await meter.store.flush()
            per_call.append((time.process_time() - start) * 1000 / calls)
    return per_call


async def reply_rounds(workdir: Path, *, replies: int, rounds: int) -> dict[str, list[float]]:
    config = bench_config(workdir, limits=False)
    cpu: dict[str, list[float]] = {"off": [], "on": []}
    async with Loopgate(config, providers={"openai": ScriptedProvider()}) as app:
        loop = await app.gateway.router.resolve("main")
        meter = loop.meter
        n = 0
        for r in range(-1, rounds * 2):  # round -1 warms up (caches, workspaces): not counted
            mode = "on" if r % 2 else "off"
            loop.meter = meter if mode == "on" else None
            start = time.process_time()
            for _ in range(replies):
                n += 1
                # A chat of its own per reply: sessions that grew would be compacted now and
                # then, in whichever round, and that costs far more than accounting.
                chat = ChatRef("web", f"c{n}", ChatType.DIRECT)
                message = InboundMessage(chat, f"m{n}", Sender(f"u{n % 50}"), "hello there")
                job = await app.gateway.handle(message)
                assert job is not None
                await job.done
            await app.meter.store.flush()
            if r >= 0:
                cpu[mode].append((time.process_time() - start) * 1000 / replies)
    return cpu


def quantiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return {"p50": round(statistics.median(ordered), 4), "p90": round(p90, 4)}


async def bench(args: argparse.Namespace, workdir: Path) -> None:
    plain = await meter_rounds(
        workdir / "plain", limits=False, calls=args.calls, batch=args.batch, rounds=args.rounds
    )
    limited = await meter_rounds(
        workdir / "limits", limits=True, calls=args.calls, batch=args.batch, rounds=args.rounds
    )
    replies = await reply_rounds(workdir / "replies", replies=args.replies, rounds=args.rounds)
    off, on = statistics.median(replies["off"]), statistics.median(replies["on"])
    result = {
        "meter_ms_per_call": quantiles(plain),
        "meter_with_limits_ms_per_call": quantiles(limited),
        "reply_cpu_ms": {
            "meter_off": quantiles(replies["off"]),
            "meter_on": quantiles(replies["on"]),
        },
        "reply_ratio_on_off": round(on / off, 3),
        "target_ms": 0.5,
    }
    plain_q = result["meter_ms_per_call"]
    print(f"meter, one model call (reserve, settle, rollup write), {args.calls} x {args.rounds}")
    print(f"  accounting only:           p50 {plain_q['p50']} ms, p90 {plain_q['p90']} ms")
    limits = result["meter_with_limits_ms_per_call"]
    print(f"  with a quota and a budget: p50 {limits['p50']} ms, p90 {limits['p90']} ms")
    print(f"whole replies (echo model), {args.replies} per round, {args.rounds} rounds each way")
    print(f"  meter off: p50 {result['reply_cpu_ms']['meter_off']['p50']} ms CPU per reply")
    print(f"  meter on:  p50 {result['reply_cpu_ms']['meter_on']['p50']} ms CPU per reply")
    print(f"  ratio on/off: {result['reply_ratio_on_off']}")
    print(json.dumps(result))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--replies", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    configure_logging("error")
    with tempfile.TemporaryDirectory() as tmp:
        for sub in ("plain", "limits", "replies"):
            (Path(tmp) / sub).mkdir()
        asyncio.run(bench(args, Path(tmp)))


if __name__ == "__main__":
    main()
