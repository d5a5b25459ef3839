"""Exactly once under fire: three ``loopgate serve`` processes, random SIGKILLs, three platforms.

The processes share one Postgres schema and one Redis key prefix (``tests/cluster_processes.py``)
and run the default configuration with streaming on: Telegram polling (the poller lease picks
one process), Slack over the HTTP Events API (each event POSTed to a live process at random,
and retried on another after a failure or a 3 s timeout, with ``X-Slack-Retry-Num``, as Slack
does), Zalo polling. The LLM streams each answer (``echo: <message>``) in three pieces about
``--pace`` seconds apart, so kills land mid-stream as well as between messages.

While ``--messages`` messages go out evenly over ``--duration`` seconds, a random live process
is SIGKILLed about every ``duration / kills`` seconds and started again 1-3 s later. Then the
harness waits until the inbox is empty and every process is up, and counts for each message
the bot messages that show its answer now (previews that were deleted don't count):

- exactly once, doubled (two or more), lost (none);
- the time from sending to the first visible answer (p50, p95, max).

Zalo's ``getUpdates`` consumes what it returns, so a message fetched by a process killed before
it stored it is gone for good (Zalo can't deliver it again): its losses are reported apart.

    python benchmarks/chaos.py [--messages 1000] [--kills 100] [--duration 300] [--pace 0.4]
        [--processes 3] [--lease 15] [--seed N] [--out FILE]

The URLs come from $LOOPGATE_TEST_POSTGRES_URL and $LOOPGATE_TEST_REDIS_URL (set by .ci/run).
Prints a table and one JSON line; the short form runs in CI (tests/e2e/test_chaos.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import secrets
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from tests.cluster_processes import ServeCluster, ServeProcess
from tests.fakes.llm_server import FakeLLM, ScriptItem, text
from tests.fakes.slack_events import EventSender, event_callback, message_event
from tests.fakes.slack_server import FakeSlack
from tests.fakes.telegram_server import FakeTelegram
from tests.fakes.zalo_server import FakeZalo, text_event

PLATFORMS = ("telegram", "slack", "zalo")
SEND_TO_KILL = 5.0
"""A Telegram or Zalo double is the documented window (a kill between a chunk's send and its
record: neither platform can be asked whether it went out) when the process that sent its first
copy was SIGKILLed at most this long after the send: the window is one HTTP response plus one
database write, stretched on a loaded machine."""
SLACK_ACK_TIMEOUT = 3.0  # Slack retries an event not acknowledged within 3 s
SLACK_RETRY_DELAYS = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0)
"""Seconds before each redelivery of an unacknowledged event (Slack itself retries three times
over about five minutes; more, sooner, keeps the run short)."""


class StreamingEcho(FakeLLM):
    """Answers ``echo: <message>`` streamed in three pieces ``pace`` seconds apart."""

    def __init__(self, pace: float) -> None:
        super().__init__()
        self.pace = pace

    def _next_item(self, body: dict[str, Any]) -> ScriptItem:
        messages = body.get("messages") or []
        question = next(
            (str(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), ""
        )
        return text("echo: ", question[: len(question) // 2], question[len(question) // 2 :],
                    pace=self.pace)  # fmt: skip


@dataclass
class Sent:
    platform: str
    text: str
    at: float
    answered_at: float | None = None


@dataclass(frozen=True)
class Kill:
    at: float
    ports: dict[str, frozenset[int]]
    """Per platform (``telegram``, ``zalo``): the local ports of the victim's connections to
    its fake server just before the kill."""


@dataclass
class Chaos:
    cluster: ServeCluster
    tg: FakeTelegram
    slack: FakeSlack
    zalo: FakeZalo
    rng: random.Random
    sent: list[Sent] = field(default_factory=list)
    kills: int = 0
    kill_log: list[Kill] = field(default_factory=list)
    restarts: list[asyncio.Task[None]] = field(default_factory=list)
    slack_deliveries: int = 0
    slack_retries: int = 0
    slack_unacked: list[str] = field(default_factory=list)
    slack_outcomes: Counter[str] = field(default_factory=Counter)
    """What each delivery got: an HTTP status, ``timeout`` (no ack within 3 s) or ``refused``."""
    restarting: set[int] = field(default_factory=set)
    """Processes being started again: not killed before they are up (the next kill waits)."""

    # -- messages in ---------------------------------------------------------------------

    async def send(self, index: int, users: int) -> None:
        platform = PLATFORMS[index % len(PLATFORMS)]
        user = index // len(PLATFORMS) % users
        body = f"chaos-{platform[0]}{index}"
        self.sent.append(Sent(platform, body, time.monotonic()))
        if platform == "telegram":
            self.tg.push(self.tg.private_message(body, user_id=5000 + user))
        elif platform == "zalo":
            now_ms = int(time.time() * 1000)
            self.zalo.push(text_event(body, chat_id=f"zu{user}", message_id=f"z{index}",
                                      date=now_ms))  # fmt: skip
        else:
            event = message_event(body, user=f"U{user}", channel=f"D{user}")
            await self.deliver_slack(event_callback(event, event_id=f"Ev{index}"))

    async def deliver_slack(self, payload: dict[str, Any]) -> None:
        """POST to a live process; on a failure, a 5xx or no answer within 3 s, again to
        another one, as Slack retries an unacknowledged event."""
        for attempt, wait in enumerate((*SLACK_RETRY_DELAYS, None)):
            alive = self.cluster.alive
            if alive:
                process = self.rng.choice(alive)
                sender = EventSender(self.cluster.http, self.slack.signing_secret,
                                     path=f"{process.base_url}/slack/events")  # fmt: skip
                self.slack_deliveries += 1
                try:
                    response = await asyncio.wait_for(
                        sender.send(payload, retry_num=attempt or None), SLACK_ACK_TIMEOUT
                    )
                except TimeoutError:
                    self.slack_outcomes["timeout"] += 1
                except httpx.HTTPError:
                    self.slack_outcomes["refused"] += 1
                else:
                    self.slack_outcomes[str(response.status_code)] += 1
                    if response.status_code == 200:
                        return
            else:
                self.slack_outcomes["none alive"] += 1
            if wait is None:
                break
            self.slack_retries += 1
            await asyncio.sleep(wait)
        self.slack_unacked.append(str(payload["event_id"]))

    # -- kills -----------------------------------------------------------------------------

    async def kill_one(self) -> None:
        # On a loaded machine every process may still be restarting when the next kill is due:
        # wait for one to be up rather than skip the kill (a run must make all its kills).
        deadline = time.monotonic() + 120
        while not (up := [p for p in self.cluster.alive if p.index not in self.restarting]):
            if time.monotonic() > deadline:
                return
            await asyncio.sleep(0.1)
        victim = self.rng.choice(up)
        self.restarting.add(victim.index)
        ports = {
            "telegram": frozenset(victim.local_ports(self.tg.port)),
            "zalo": frozenset(victim.local_ports(self.zalo.port)),
        }
        await victim.kill()
        self.kill_log.append(Kill(time.monotonic(), ports))
        self.kills += 1
        self.restarts.append(asyncio.create_task(self._restart(victim)))

    async def _restart(self, process: ServeProcess) -> None:
        try:
            await asyncio.sleep(self.rng.uniform(1.0, 3.0))
            await self.cluster.restart(process, timeout=90)
        finally:
            self.restarting.discard(process.index)

    # -- what users see ------------------------------------------------------------------

    def visible_answers(self) -> Counter[str]:
        """How many bot messages show each answer now, across the three platforms."""
        shown: Counter[str] = Counter()
        for message in self.tg.messages.values():
            if not message.deleted:
                shown[message.text] += 1
        for message in self.slack.messages.values():
            if message.get("bot_id") == self.slack.bot_id:
                shown[str(message.get("text", ""))] += 1
        for body in self.zalo.texts():
            shown[body] += 1
        return shown

    def note_answers(self) -> None:
        shown = self.visible_answers()
        now = time.monotonic()
        for message in self.sent:
            if message.answered_at is None and shown[f"echo: {message.text}"]:
                message.answered_at = now

    def doubles_in_window(self, platform: str, answer: str) -> bool:
        """Whether every copy of a doubled Telegram or Zalo answer but the last was sent by a
        process SIGKILLed within :data:`SEND_TO_KILL` seconds after, and before the next copy
        went out (the replay of the killed process's entry sends it again)."""
        made = sorted(self._copies(platform, answer))  # per visible copy: when, by whom
        return all(
            any(
                port is not None
                and port in kill.ports[platform]
                and at <= kill.at <= min(at + SEND_TO_KILL, next_at)
                for kill in self.kill_log
            )
            for (at, port), (next_at, _) in pairwise(made)
        )

    def _copies(self, platform: str, answer: str) -> list[tuple[float, int | None]]:
        """The call that made each visible copy of ``answer`` show it: its time, its caller."""
        if platform == "zalo":
            return [(m.at, m.client_port) for m in self.zalo.messages if m.json["text"] == answer]
        made = []
        for (_, message_id), message in self.tg.messages.items():
            if message.deleted or message.text != answer:
                continue
            calls = [
                c
                for c in self.tg.calls
                if (c.method == "sendMessage" and c.params.get("_message_id") == message_id)
                or (
                    c.method == "editMessageText"
                    and str(c.params.get("message_id")) == str(message_id)
                )
            ]
            last = max(calls, key=lambda c: c.at)
            made.append((last.at, last.client_port))
        return made

    async def watch(self) -> None:
        while True:
            self.note_answers()
            await asyncio.sleep(0.2)


async def settle(chaos: Chaos, within: float) -> None:
    """Until every process is up, the inbox holds nothing pending and the answers are stable."""
    deadline = time.monotonic() + within
    stable_since, last = 0.0, Counter[str]()
    while time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        if len(chaos.cluster.alive) < len(chaos.cluster.processes):
            continue
        shown = chaos.visible_answers()
        if await chaos.cluster.pending() or shown != last:
            stable_since, last = time.monotonic(), shown
            continue
        if time.monotonic() - stable_since >= 3.0:
            return
    print("warning: not settled before the timeout", file=sys.stderr)


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[max(0, min(len(ordered) - 1, round(q * len(ordered)) - 1))], 2)


def report(chaos: Chaos, elapsed: float) -> dict[str, Any]:
    shown = chaos.visible_answers()
    result: dict[str, Any] = {
        "messages": len(chaos.sent),
        "kills": chaos.kills,
        "seconds": round(elapsed, 1),
        "slack_deliveries": chaos.slack_deliveries,
        "slack_retries": chaos.slack_retries,
        "slack_unacked": chaos.slack_unacked,
        "slack_outcomes": dict(chaos.slack_outcomes),
    }
    for platform in PLATFORMS:
        mine = [m for m in chaos.sent if m.platform == platform]
        counts = [shown[f"echo: {m.text}"] for m in mine]
        doubles = [m.text for m, c in zip(mine, counts, strict=True) if c >= 2]
        waits = [m.answered_at - m.at for m in mine if m.answered_at is not None]
        result[platform] = {
            "sent": len(mine),
            "exactly_once": sum(c == 1 for c in counts),
            "doubled": sum(c >= 2 for c in counts),
            "lost": sum(c == 0 for c in counts),
            "lost_examples": [m.text for m, c in zip(mine, counts, strict=True) if c == 0][:5],
            "doubled_examples": doubles[:5],
            "most_copies": max(counts, default=0),
            "answer_s": {
                "p50": percentile(waits, 0.50),
                "p95": percentile(waits, 0.95),
                "max": percentile(waits, 1.0),
            },
        }
        if platform != "slack":  # Slack is asked (conversations.history): never doubled
            result[platform]["doubled_after_kill"] = sum(
                chaos.doubles_in_window(platform, f"echo: {body}") for body in doubles
            )
    return result


async def run(
    *,
    messages: int,
    kills: int,
    duration: float,
    pace: float,
    processes: int,
    lease: float,
    seed: int,
    postgres_url: str,
    redis_url: str,
    workdir: Path,
    users: int = 20,
    settle_timeout: float = 180.0,
) -> dict[str, Any]:
    rng = random.Random(seed)
    async with (
        StreamingEcho(pace) as llm,
        FakeTelegram() as tg,
        FakeSlack() as slack,
        FakeZalo() as zalo,
    ):
        cluster = ServeCluster(
            workdir,
            llm=llm,
            tg=tg,
            redis_url=redis_url,
            key_prefix=f"chaos-{secrets.token_hex(4)}",
            schema=f"chaos_{secrets.token_hex(4)}",
            postgres_url=postgres_url,
            size=processes,
            mode="polling",
            lease_seconds=lease,
            # The default configuration, streaming and reactions included.
            telegram={"streaming": "partial", "reactions": True},
            bot={"shutdown_grace": 20},
            extra_channels={
                "slack": {
                    "enabled": True,
                    "mode": "http",
                    "bot_token": slack.bot_token,
                    "signing_secret": slack.signing_secret,
                    "api_base_url": slack.base_url,
                    "rate_limit": "off",
                },
                "zalo": {
                    "enabled": True,
                    "token": zalo.token,
                    "api_base_url": zalo.base_url,
                    "mode": "polling",
                    "polling_timeout": 1,
                    "backoff_initial": 0.05,
                    "backoff_max": 1.0,
                },
            },
        )
        await cluster.start(timeout=90)
        chaos = Chaos(cluster, tg, slack, zalo, rng)
        watcher = asyncio.create_task(chaos.watch())
        started = time.monotonic()
        try:
            sending = asyncio.create_task(send_all(chaos, messages, duration, users))
            for _ in range(kills):
                await asyncio.sleep(rng.uniform(0.5, 1.5) * duration / max(kills, 1))
                await chaos.kill_one()
            await sending
            await asyncio.gather(*chaos.restarts)
            await settle(chaos, settle_timeout)
            chaos.note_answers()
            return report(chaos, time.monotonic() - started)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            for task in chaos.restarts:
                task.cancel()
            await cluster.aclose()


async def send_all(chaos: Chaos, messages: int, duration: float, users: int) -> None:
    gap = duration / max(messages, 1)
    start = time.monotonic()
    pending: list[asyncio.Task[None]] = []
    for index in range(messages):
        delay = start + index * gap - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        # Slack deliveries wait for their ack (and retries): they don't hold up the others.
        pending.append(asyncio.create_task(chaos.send(index, users)))
    await asyncio.gather(*pending)


def print_table(result: dict[str, Any]) -> None:
    print(
        f"{result['messages']} messages, {result['kills']} SIGKILLs, {result['seconds']} s "
        f"(slack: {result['slack_deliveries']} deliveries, {result['slack_retries']} retried, "
        f"{len(result['slack_unacked'])} never acknowledged)"
    )
    print(f"{'platform':<10}{'sent':>6}{'once':>7}{'doubled':>9}{'lost':>6}"
          f"{'p50 s':>8}{'p95 s':>8}{'max s':>8}")  # fmt: skip
    for platform in PLATFORMS:
        row = result[platform]
        waits = row["answer_s"]
        print(
            f"{platform:<10}{row['sent']:>6}{row['exactly_once']:>7}{row['doubled']:>9}"
            f"{row['lost']:>6}{waits['p50']!s:>8}{waits['p95']!s:>8}{waits['max']!s:>8}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--duration", type=float, default=300.0)
    parser.add_argument("--pace", type=float, default=0.4)
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--lease", type=float, default=15.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    postgres_url = os.environ.get("LOOPGATE_TEST_POSTGRES_URL")
    redis_url = os.environ.get("LOOPGATE_TEST_REDIS_URL")
    if not postgres_url or not redis_url:
        parser.error("set LOOPGATE_TEST_POSTGRES_URL and LOOPGATE_TEST_REDIS_URL (see .ci/run)")
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    with tempfile.TemporaryDirectory(prefix="loopgate-chaos-") as workdir:
        result = asyncio.run(
            run(
                messages=args.messages,
                kills=args.kills,
                duration=args.duration,
                pace=args.pace,
                processes=args.processes,
                lease=args.lease,
                seed=seed,
                postgres_url=postgres_url,
                redis_url=redis_url,
                workdir=Path(workdir),
            )
        )
    result["seed"] = seed
    print_table(result)
    line = json.dumps(result)
    print(line)
    if args.out is not None:
        args.out.write_text(line + "\n")


if __name__ == "__main__":
    main()
