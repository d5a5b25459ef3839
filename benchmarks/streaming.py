"""Streamed replies: time to first visible text against the full answer time, platform API
calls per answer, and CPU per reply with streaming on and off.

Telegram polling against the fake Bot API and the fake OpenAI-compatible LLM from tests/, both
over real HTTP on 127.0.0.1, pacing off. A slow answer is 20 chunks 50 ms apart (~1 s); the
time runs from the update being handed out to the first text visible (a sent message or a
draft) and to the final text. CPU per reply: instant answers, sequential, ``time.process_time``
of this process (the fakes run in it too, so the ratio is the figure to read).

    python benchmarks/streaming.py [--answers 20] [--replies 150]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.app import Loopgate
from bot.config import parse_config
from bot.logging_setup import configure_logging
from tests.fakes.llm_server import FakeLLM, text
from tests.fakes.telegram_server import FakeTelegram

CHUNKS = 20
PACE = 0.05
GROUP = -100777
VISIBLE = ("sendMessage", "sendMessageDraft")
API = ("sendMessage", "editMessageText", "sendMessageDraft", "deleteMessage")


def config(workdir: Path, llm: FakeLLM, tg: FakeTelegram, streaming: str) -> Any:
    return parse_config(
        {
            "database": {"url": f"sqlite+aiosqlite:///{workdir / f'{streaming}.db'}"},
            "agents": {"defaults": {"workspace": str(workdir / "ws")}},
            "providers": {"openai": {"base_url": llm.base_url, "model": "fake-model"}},
            "bot": {"sender_rate_limit": "off"},
            "channels": {
                "telegram": {
                    "enabled": True,
                    "token": tg.token,
                    "api_base_url": tg.base_url,
                    "polling_timeout": 1,
                    "rate_limit": "off",
                    "group_policy": "open",
                    "streaming": streaming,
                }
            },
        },
        {},
    )


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def shown(tg: FakeTelegram, chat_id: int) -> list[str]:
    """What the chat's bot messages show now (after their edits)."""
    return [tg.visible(c, m) or "" for (c, m) in tg.message_history if c == chat_id]


def calls_for(tg: FakeTelegram, chat_id: int, methods: tuple[str, ...], since: float) -> list[Any]:
    return [
        c
        for m in methods
        for c in tg.calls_of(m)
        if c.at >= since and int(c.params.get("chat_id", 0)) == chat_id
    ]


async def slow_answers(workdir: Path, streaming: str, chat: str, answers: int) -> dict[str, Any]:
    first: list[float] = []
    full: list[float] = []
    calls: list[int] = []
    async with (
        FakeLLM() as llm,
        FakeTelegram() as tg,
        Loopgate(config(workdir / f"slow-{streaming}-{chat}", llm, tg, streaming)),
    ):
        for n in range(answers):
            pieces = [f"word{n}-{i} " for i in range(CHUNKS)]
            final = "".join(pieces).strip()
            llm.script(text(*pieces, pace=PACE))
            update = tg.group_message(f"q{n}") if chat == "group" else tg.private_message(f"q{n}")
            chat_id = GROUP if chat == "group" else 42
            t0 = time.monotonic()
            tg.push(update)
            await tg.wait_for(lambda f=final, c=chat_id: f in shown(tg, c), timeout=30)  # type: ignore[misc]
            visible = calls_for(tg, chat_id, VISIBLE, t0)
            first.append((min(c.at for c in visible) - t0) * 1000)
            done = [c.at for c in calls_for(tg, chat_id, API, t0)]
            full.append((max(done) - t0) * 1000)
            calls.append(len(calls_for(tg, chat_id, API, t0)))
            await asyncio.sleep(1.0)  # the user reads: the chat's edit throttle is not the test
    return {"first": first, "full": full, "calls": calls}


async def cpu_per_reply(workdir: Path, streaming: str, replies: int) -> float:
    async with (
        FakeLLM() as llm,
        FakeTelegram() as tg,
        Loopgate(config(workdir / f"cpu-{streaming}", llm, tg, streaming)),
    ):
        for n in range(5):  # warm-up
            tg.push(tg.group_message(f"warm {n}"))
            await tg.wait_for(lambda n=n: f"echo: warm {n}" in shown(tg, GROUP))  # type: ignore[misc]
        start = time.process_time()
        for n in range(replies):
            tg.push(tg.group_message(f"m{n}"))
            await tg.wait_for(lambda n=n: f"echo: m{n}" in shown(tg, GROUP))  # type: ignore[misc]
        return (time.process_time() - start) * 1000 / replies


async def bench(answers: int, replies: int, workdir: Path) -> None:
    print(f"slow answer: {CHUNKS} chunks {PACE * 1000:.0f} ms apart; {answers} answers per row")
    print(f"{'mode':<22}{'first text p50/p95':>22}{'full answer p50/p95':>24}{'API calls':>11}")
    for streaming, chat in (("off", "group"), ("partial", "group"), ("partial", "dm")):
        r = await slow_answers(workdir, streaming, chat, answers)
        print(
            f"{streaming + ' ' + chat:<22}"
            f"{statistics.median(r['first']):>10.0f} / {pct(r['first'], 0.95):<5.0f} ms"
            f"{statistics.median(r['full']):>12.0f} / {pct(r['full'], 0.95):<5.0f} ms"
            f"{statistics.mean(r['calls']):>11.1f}"
        )
    off = await cpu_per_reply(workdir, "off", replies)
    on = await cpu_per_reply(workdir, "partial", replies)
    print(
        f"CPU per instant reply: streaming off {off:.2f} ms, partial {on:.2f} ms, "
        f"ratio {on / off:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--answers", type=int, default=20)
    parser.add_argument("--replies", type=int, default=150)
    args = parser.parse_args()
    configure_logging("warning", "console")
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(bench(args.answers, args.replies, Path(tmp)))


if __name__ == "__main__":
    main()
