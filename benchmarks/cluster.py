"""Several ``loopgate serve`` processes on one Postgres and one Redis (docs/scaling.md).

For each process count (default 1, 2 and 3) the processes form one service (``redis.url`` +
``database.url`` on Postgres); for comparison, one process on the same Postgres without Redis
runs first (the baseline: today's single-process service). Telegram runs in webhook mode
against the fake Bot API, and each update is POSTed to the next process in turn (round-robin):
a webhook is the only way updates reach several processes. The LLM is the instant fake; send
pacing and the per-sender limit are off. Every configuration gets a fresh Postgres schema and a
fresh Redis key prefix.

- latency: from POSTing the update to the reply's ``sendMessage`` reaching the fake, both for
  sequential DMs of one chat (idle) and for every DM of the throughput phase (under load);
- throughput: N chats at once, each sending its DMs one after the other (the next once the
  previous is answered), replies/s; before it, one unmeasured DM from N other chats at once
  brings the processes' pools to the size that load needs (``--no-warm-burst``: measure from
  the pools the sequential warm-up left, as stops before 41 did); ``--rate R`` sends the
  phase's DMs at R per second instead (open loop), so that setups are compared at the same load
  rather than each at its own saturation;
- CPU per reply: user + system seconds of all the Loopgate processes' trees, from /proc; the
  coordination overhead is that minus the baseline's. Postgres's and Redis's own CPU over the
  same phase is shown too when readable (whole servers: other clients count as well).

    python benchmarks/cluster.py [--processes 1,2,3] [--chats 40] [--per-chat 5] [--out FILE]
        [--rounds 3] [--routing round-robin|sticky] [--independent]
        [--database-url postgresql+asyncpg://...] [--redis-url redis://127.0.0.1:6379/15]

``--rounds`` repeats every setup, interleaved, and reports medians (a shared machine is noisy);
``--routing polling`` runs Telegram in polling mode instead of webhooks: the elected poller
receives every update and assigns new chats to the processes (``bot/cluster/members.py``); the
``split`` column shows each process's share of the CPU.
``--routing sticky`` sends all updates of one chat to the same process instead, which shows how
much of the extra CPU comes from a chat's messages landing in different processes.
``--independent`` adds, for each N > 1, N processes that share nothing (each its own schema, no
Redis, a chat's updates always to the same one): the cluster's CPU per reply minus theirs
("coord") is what coordination costs, apart from what N busy processes cost on this machine by
themselves (each at a fraction of the load batches less; N pools, N sets of timers).

The URLs default to $LOOPGATE_TEST_POSTGRES_URL and $LOOPGATE_TEST_REDIS_URL (set by .ci/run).
Prints a table and one JSON line; ``--out`` also writes the JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import secrets
import shutil
import signal
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp
import redis.asyncio as aioredis
import uvloop
from serve_common import (
    ROOT,
    BenchTelegram,
    cpu_seconds,
    emit,
    pct,
    peak_rss_mib,
    start_serve,
    stop_serve,
)

from bot.logging_setup import configure_logging
from bot.storage._db import open_database
from tests.fakes.llm_server import FakeLLM

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
LATENCY_USER = 42
WARMUP_USER = 7
WARM_BURST_USER = 200_000


@dataclass
class Setup:
    name: str
    processes: int
    clustered: bool
    # N processes that share nothing: each its own schema, no Redis, a chat always sent to the
    # same one. What N processes on this machine cost without any coordination.
    independent: bool = False


@dataclass
class Result:
    setup: Setup
    idle: list[float] = field(default_factory=list)
    loaded: list[float] = field(default_factory=list)
    replies: int = 0
    seconds: float = 0.0
    cpu: float = 0.0
    postgres_cpu: float | None = None
    redis_cpu: float | None = None
    bench_cpu: float = 0.0
    busy_cores: float = 0.0
    idle_cpu_per_s: float = 0.0
    rss: float = 0.0
    # Context switches of the Loopgate processes over the phase: a voluntary one is a process
    # going to sleep with nothing to do (a wake-up follows), an involuntary one a preemption.
    voluntary_switches: int = 0
    involuntary_switches: int = 0
    answers: int = 0
    sent: int = 0
    per_process: list[int] = field(default_factory=list)
    cpu_per_process: list[float] = field(default_factory=list)

    @property
    def cpu_ms(self) -> float:
        return self.cpu * 1000 / self.replies

    @property
    def foreign_cores(self) -> float:
        """Cores busy with something else than this benchmark (other users of the machine)."""
        ours = self.cpu + self.bench_cpu + (self.postgres_cpu or 0) + (self.redis_cpu or 0)
        return max(0.0, self.busy_cores - ours / self.seconds)


def summarize(
    rounds: list[Result], baseline_cpu_ms: float | None, independent_cpu_ms: float | None = None
) -> dict[str, Any]:
    """One setup over its rounds: latencies pooled, everything else the median of the rounds."""
    setup, replies = rounds[0].setup, rounds[0].replies
    loaded = [v for r in rounds for v in r.loaded]
    idle = [v for r in rounds for v in r.idle]

    def median(values: list[float | None], scale: float = 1.0, digits: int = 2) -> float | None:
        known = [v for v in values if v is not None]
        return round(statistics.median(known) * scale, digits) if known else None

    cpu_ms = statistics.median(r.cpu_ms for r in rounds)
    per_reply = 1000 / replies
    return {
        "processes": setup.processes,
        "redis": setup.clustered,
        "independent": setup.independent,
        "throughput_rps": median([replies / r.seconds for r in rounds], digits=1),
        "latency_ms": {"p50": round(pct(loaded, 0.50), 1), "p99": round(pct(loaded, 0.99), 1)},
        "idle_latency_ms": {"p50": round(pct(idle, 0.50), 1), "p99": round(pct(idle, 0.99), 1)},
        "cpu_ms_per_reply": round(cpu_ms, 2),
        "cpu_ms_per_reply_rounds": [round(r.cpu_ms, 2) for r in rounds],
        "voluntary_switches_per_reply": median(
            [r.voluntary_switches for r in rounds], 1 / replies, 1
        ),
        "involuntary_switches_per_reply": median(
            [r.involuntary_switches for r in rounds], 1 / replies, 1
        ),
        "overhead_cpu_ms_per_reply": (
            round(cpu_ms - baseline_cpu_ms, 2)
            if (setup.clustered or setup.independent) and baseline_cpu_ms is not None
            else None
        ),
        "coordination_cpu_ms_per_reply": (
            round(cpu_ms - independent_cpu_ms, 2)
            if setup.clustered and independent_cpu_ms is not None
            else None
        ),
        "postgres_cpu_ms_per_reply": median([r.postgres_cpu for r in rounds], per_reply),
        "redis_cpu_ms_per_reply": median([r.redis_cpu for r in rounds], per_reply),
        "bench_cpu_ms_per_reply": median([r.bench_cpu for r in rounds], per_reply),
        "machine_busy_cores": median([r.busy_cores for r in rounds]),
        "foreign_busy_cores": median([r.foreign_cores for r in rounds]),
        "idle_cpu_ms_per_s": median([r.idle_cpu_per_s for r in rounds], 1000, 1),
        "peak_rss_mib": median([r.rss for r in rounds], digits=1),
        "updates_per_process": [sum(c) for c in zip(*(r.per_process for r in rounds), strict=True)],
        # Each process's share of the Loopgate CPU of the phase, over all rounds.
        "cpu_split": [
            round(sum(c) / max(1e-9, sum(r.cpu for r in rounds)), 2)
            for c in zip(*(r.cpu_per_process for r in rounds), strict=True)
        ],
        "updates": sum(r.sent for r in rounds),
        "answers": sum(r.answers for r in rounds),
        "rounds": len(rounds),
    }


# -- servers beside Loopgate -----------------------------------------------------------------


def context_switches(pids: list[int]) -> tuple[int, int]:
    """Voluntary and involuntary context switches of every thread of these processes."""
    voluntary = involuntary = 0
    for pid in pids:
        for status in Path(f"/proc/{pid}/task").glob("*/status"):
            with contextlib.suppress(OSError):
                for line in status.read_text().splitlines():
                    name, _, value = line.partition(":")
                    if name == "voluntary_ctxt_switches":
                        voluntary += int(value)
                    elif name == "nonvoluntary_ctxt_switches":
                        involuntary += int(value)
    return voluntary, involuntary


def postmaster_pid() -> int | None:
    """The local Postgres server's main process (its tree holds every backend), if visible."""
    comms: dict[int, tuple[str, int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            comm = stat[stat.index("(") + 1 : stat.rindex(")")]
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
            comms[int(entry.name)] = (comm, ppid)
    for pid, (comm, ppid) in comms.items():
        if comm == "postgres" and comms.get(ppid, ("", 0))[0] != "postgres":
            return pid
    return None


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU jiffies of the whole machine since boot, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return sum(values) - idle, sum(values)


def own_cpu() -> float:
    """CPU seconds of this process: the fake Bot API, the fake LLM and the HTTP client."""
    times = os.times()
    return times.user + times.system


async def redis_cpu(client: aioredis.Redis) -> float:
    info = await client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


async def drop_schema(database_url: str, schema: str) -> None:
    async with await open_database(database_url, schema=schema) as db:
        await db.run_write(lambda conn: conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE'))


async def drop_keys(client: aioredis.Redis, prefix: str) -> None:
    keys = [key async for key in client.scan_iter(match=f"{prefix}:*")]
    if keys:
        await client.delete(*keys)


# -- one configuration -----------------------------------------------------------------------


def write_config(
    workdir: Path,
    llm: FakeLLM,
    tg: BenchTelegram,
    args: argparse.Namespace,
    setup: Setup,
    secret: str,
    prefix: str,
) -> Path:
    telegram: dict[str, Any] = {
        "enabled": True,
        "token": tg.token,
        "api_base_url": tg.base_url,
        "rate_limit": "off",
    }
    if args.routing == "polling":
        telegram["mode"] = "polling"
    else:
        telegram |= {
            "mode": "webhook",
            "webhook_url": "https://bench.example/telegram/webhook",
            "webhook_secret": secret,
        }
    config: dict[str, Any] = {
        "database": {"url": args.database_url},
        "providers": {"openai": {"base_url": llm.base_url, "model": "fake-model"}},
        "channels": {"telegram": telegram},
        # Every chat of the phase may run at once, in one process as in several: this measures
        # the coordination, not bot.max_concurrent_runs (which would hold back only the single
        # process, and so flatter the cluster's overhead).
        "bot": {"sender_rate_limit": "off", "max_concurrent_runs": max(30, args.chats)},
    }
    if setup.clustered:
        config["redis"] = {"url": args.redis_url}
        config["cluster"] = {"key_prefix": prefix, "lease_seconds": args.lease}
        if not args.separate_workspaces:
            # One volume for every replica, as the deploy recipe mounts it (docs/scaling.md): a
            # chat moves between processes, its workspace must not. Each process's own data/
            # would have every process seed its own copy of each user's files.
            config["agents"] = {"defaults": {"workspace": str(workdir / "workspaces")}}
    path = workdir / "config.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


class Webhooks:
    """Posts each update to the next process in turn (``sticky``: always the same process for
    one chat) and waits for its reply at the fake."""

    def __init__(self, tg: BenchTelegram, ports: list[int], secret: str, sticky: bool) -> None:
        self.tg = tg
        self.sticky = sticky
        self.urls = [f"http://127.0.0.1:{port}/telegram/webhook" for port in ports]
        self.headers = {SECRET_HEADER: secret}
        self.turn = itertools.count()
        self.per_process = [0] * len(ports)
        # aiohttp rather than httpx: the benchmark shares the two cores with what it measures,
        # and httpx took a third of its CPU (a fraction of that with aiohttp).
        self.http = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=200), timeout=aiohttp.ClientTimeout(total=60)
        )

    async def aclose(self) -> None:
        await self.http.close()

    async def ask(self, user_id: int, text: str) -> float:
        """Send ``text`` as a DM from ``user_id``; the ms from the POST to the reply."""
        turn = user_id if self.sticky else next(self.turn)
        index = turn % len(self.urls)
        self.per_process[index] += 1
        future = self.tg.expect_reply(user_id, text)
        body = {
            "update_id": self.tg.new_update_id(),
            **self.tg.private_message(text, user_id=user_id),
        }
        posted = time.monotonic()
        for attempt in range(3):
            try:
                async with self.http.post(
                    self.urls[index], json=body, headers=self.headers
                ) as response:
                    status = response.status
                    await response.read()
                break
            except aiohttp.ClientConnectionError as exc:
                # A kept-alive connection the server closed just then (uvicorn drops idle ones
                # after 5 s): post again, as Telegram would; the update_id makes it idempotent.
                if attempt == 2:
                    raise SystemExit(f"process {index} unreachable: {exc!r} (see --keep)") from exc
        if status != 200:
            raise SystemExit(f"webhook refused by process {index}: {status}")
        async with asyncio.timeout(300):
            replied = await future
        del self.tg.waiting[user_id]
        return (replied - posted) * 1000


class Polling:
    """Queues each update at the fake Bot API for the elected poller to fetch, and waits for
    its reply there."""

    sticky = False

    def __init__(self, tg: BenchTelegram) -> None:
        self.tg = tg
        self.per_process = [0]  # every update reaches the poller

    async def ask(self, user_id: int, text: str) -> float:
        """The ms from the poller's ``getUpdates`` handing the update out to the reply."""
        self.per_process[0] += 1
        return await self.tg.ask(user_id, text)

    async def aclose(self) -> None:
        pass


async def measure(args: argparse.Namespace, setup: Setup, workdir: Path) -> Result:
    result = Result(setup)
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    # Independent processes share nothing, so each gets a schema of its own.
    schemas = [f"{schema}_{n}" for n in range(setup.processes)] if setup.independent else [schema]
    prefix = f"loopgate-bench-{uuid.uuid4().hex[:8]}"
    secret = secrets.token_hex(16)
    redis_client: aioredis.Redis = aioredis.Redis.from_url(args.redis_url)
    postgres = postmaster_pid()
    procs: list[tuple[asyncio.subprocess.Process, IO[bytes]]] = []
    try:
        async with FakeLLM() as llm, BenchTelegram() as tg:
            config = write_config(workdir, llm, tg, args, setup, secret, prefix)
            command = [sys.executable, str(ROOT / "benchmarks" / "schema_serve.py")]
            ports: list[int] = []
            for n in range(setup.processes):  # one at a time: start-up is not measured
                home = workdir / f"p{n}"  # its own cwd: data/ and serve.log
                home.mkdir()
                env = {"LOOPGATE_BENCH_SCHEMA": schemas[n % len(schemas)]}
                proc, log, port = await start_serve(home, config, command=command, env=env)
                procs.append((proc, log))
                ports.append(port)
            hooks: Webhooks | Polling = (
                Polling(tg)
                if args.routing == "polling"
                else Webhooks(tg, ports, secret, args.routing == "sticky" or setup.independent)
            )
            try:
                pids = [proc.pid for proc, _ in procs]
                for n in range(args.warmup * setup.processes):
                    # Sticky: one warm-up chat per process, so that each is warmed as with
                    # round-robin.
                    user = WARMUP_USER + (n % setup.processes if hooks.sticky else 0)
                    await hooks.ask(user, f"warm {n}")
                for n in range(args.latency):
                    result.idle.append(await hooks.ask(LATENCY_USER, f"m{n}"))
                if args.idle > 0:  # background work with nothing to answer
                    cpu0 = sum(cpu_seconds(pid) for pid in pids)
                    await asyncio.sleep(args.idle)
                    idle_cpu = sum(cpu_seconds(pid) for pid in pids) - cpu0
                    result.idle_cpu_per_s = idle_cpu / args.idle

                async def conversation(index: int) -> None:
                    user_id = 100_000 + index
                    for n in range(args.per_chat):
                        if args.rate:
                            # Open loop: the phase's k-th DM is due k/rate seconds in, whatever
                            # the answers' pace (a chat whose last answer is late sends late).
                            due = t0 + (n * args.chats + index) / args.rate
                            await asyncio.sleep(max(0.0, due - time.monotonic()))
                        result.loaded.append(await hooks.ask(user_id, f"c{user_id} m{n}"))

                if args.warm_burst:
                    # One unmeasured DM from each of as many other chats at once: a service
                    # that has run for a while keeps its pools (Postgres connections, prepared
                    # statements) at the size its load needs, and the phase measures that
                    # steady state rather than each process opening its connections.
                    await asyncio.gather(
                        *(hooks.ask(WARM_BURST_USER + c, "warm") for c in range(args.chats))
                    )

                switches0 = context_switches(pids)
                cpus0 = [cpu_seconds(pid) for pid in pids]
                cpu0 = sum(cpus0)
                pg0 = cpu_seconds(postgres) if postgres else None
                redis0 = await redis_cpu(redis_client) if setup.clustered else None
                own0, (busy0, total0) = own_cpu(), machine_busy()
                spies = await start_spies(args, path=workdir, pids=pids)
                t0 = time.monotonic()
                await asyncio.gather(*(conversation(c) for c in range(args.chats)))
                result.seconds = time.monotonic() - t0
                await stop_spies(spies)
                cpus1 = [cpu_seconds(pid) for pid in pids]
                result.cpu = sum(cpus1) - cpu0
                result.cpu_per_process = [b - a for a, b in zip(cpus0, cpus1, strict=True)]
                switches1 = context_switches(pids)
                result.voluntary_switches = switches1[0] - switches0[0]
                result.involuntary_switches = switches1[1] - switches0[1]
                result.bench_cpu = own_cpu() - own0
                busy1, total1 = machine_busy()
                result.busy_cores = (
                    (busy1 - busy0) / max(1, total1 - total0) * (os.cpu_count() or 1)
                )
                if postgres and pg0 is not None:
                    result.postgres_cpu = cpu_seconds(postgres) - pg0
                if redis0 is not None:
                    result.redis_cpu = await redis_cpu(redis_client) - redis0
                result.replies = args.chats * args.per_chat
                result.rss = sum(peak_rss_mib(pid) for pid in pids)
                await asyncio.sleep(0.5)  # a late second answer would show up here
                result.answers = sum(
                    1
                    for call in tg.calls
                    if call.method == "sendMessage"
                    and str(call.params.get("text", "")).startswith("echo: ")
                )
                result.sent = sum(hooks.per_process)
                result.per_process = hooks.per_process
            finally:
                await hooks.aclose()
                await asyncio.gather(*(stop_serve(proc, log) for proc, log in procs))
    finally:
        for name in schemas:
            with contextlib.suppress(Exception):
                await drop_schema(args.database_url, name)
        with contextlib.suppress(Exception):
            await drop_keys(redis_client, prefix)
        await redis_client.aclose()
    return result


async def start_spies(
    args: argparse.Namespace, path: Path, pids: list[int]
) -> list[asyncio.subprocess.Process]:
    """With ``--py-spy DIR``, sample each process over the measured phase (py-spy, raw
    collapsed stacks, idle frames left out): where a setup's CPU per reply goes."""
    if not args.py_spy:
        return []
    args.py_spy.mkdir(parents=True, exist_ok=True)
    exe = py_spy_path()
    assert exe is not None  # main() checked
    spies = []
    for n, pid in enumerate(pids):
        out = args.py_spy / f"{path.name}-p{n}.txt"
        spies.append(
            await asyncio.create_subprocess_exec(
                exe,
                "record",
                "--pid",
                str(pid),
                "--rate",
                "250",
                "--format",
                "raw",
                "--output",
                str(out),
                "--nonblocking",
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
        )
    await asyncio.sleep(0.3)  # attached before the first DM
    return spies


def py_spy_path() -> str | None:
    """py-spy beside this interpreter (a venv's, not on PATH), else on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


async def stop_spies(spies: list[asyncio.subprocess.Process]) -> None:
    for spy in spies:
        spy.send_signal(signal.SIGINT)  # py-spy writes its file on Ctrl-C
    await asyncio.gather(*(spy.wait() for spy in spies))


async def run(args: argparse.Namespace, workdir: Path) -> dict[str, list[Result]]:
    setups = []
    if args.baseline:
        setups.append(Setup("single (no Redis)", 1, False))
    for n in args.processes:
        if args.independent and n > 1:
            setups.append(Setup(f"independent x{n}", n, False, independent=True))
        setups.append(Setup(f"cluster x{n}", n, True))
    results: dict[str, list[Result]] = {setup.name: [] for setup in setups}
    for round_ in range(args.rounds):  # interleaved: a noisy minute hits every setup alike
        for setup in setups:
            print(f"round {round_ + 1}: {setup.name} ...", file=sys.stderr, flush=True)
            path = workdir / f"{round_}-{setup.name.replace(' ', '_').strip('()')}"
            path.mkdir()
            results[setup.name].append(await measure(args, setup, path))
    return results


# -- output ----------------------------------------------------------------------------------


def report(results: dict[str, list[Result]], args: argparse.Namespace) -> dict[str, Any]:
    def median_cpu(name: str) -> float | None:
        rounds = results.get(name)
        return statistics.median(r.cpu_ms for r in rounds) if rounds else None

    base_ms = median_cpu("single (no Redis)")
    return {
        "cores": os.cpu_count(),
        "messages_per_setup": args.chats * args.per_chat,
        "chats": args.chats,
        "latency_dms": args.latency,
        "rounds": args.rounds,
        "routing": args.routing,
        "rate": args.rate,
        "warm_burst": args.warm_burst,
        "independent": args.independent,
        "results": {
            name: summarize(
                rounds, base_ms, median_cpu(f"independent x{rounds[0].setup.processes}")
            )
            for name, rounds in results.items()
        },
    }


def print_table(data: dict[str, Any]) -> None:
    def show(value: float | None) -> str:
        return "-" if value is None else f"{value:g}"

    def signed(value: float | None) -> str:
        return "-" if value is None else f"{value:+g}"

    head = (
        "setup", "replies/s", "p50 ms", "p99 ms", "idle p50", "idle p99",
        "CPU ms/reply", "overhead", "coord", "sleeps", "preempted",
        "postgres", "redis", "bench", "busy", "others",
        "idle ms/s",
        "RSS MiB", "answers", "split",
    )  # fmt: skip
    lines = [head]
    for name, row in data["results"].items():
        lines.append(
            (
                name,
                show(row["throughput_rps"]),
                show(row["latency_ms"]["p50"]),
                show(row["latency_ms"]["p99"]),
                show(row["idle_latency_ms"]["p50"]),
                show(row["idle_latency_ms"]["p99"]),
                show(row["cpu_ms_per_reply"]),
                signed(row["overhead_cpu_ms_per_reply"]),
                signed(row["coordination_cpu_ms_per_reply"]),
                show(row["voluntary_switches_per_reply"]),
                show(row["involuntary_switches_per_reply"]),
                show(row["postgres_cpu_ms_per_reply"]),
                show(row["redis_cpu_ms_per_reply"]),
                show(row["bench_cpu_ms_per_reply"]),
                show(row["machine_busy_cores"]),
                show(row["foreign_busy_cores"]),
                show(row["idle_cpu_ms_per_s"]),
                show(row["peak_rss_mib"]),
                f"{row['answers']}/{row['updates']}",
                "/".join(f"{share:.0%}" for share in row["cpu_split"]),
            )
        )  # fmt: skip
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    for line in lines:
        cells = [line[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(line[1:], widths[1:], strict=True)
        ]
        print("  ".join(cells))
    load = (
        f"sent at {data['rate']:g} DMs/s (open loop)"
        if data.get("rate")
        else "each chat's next once answered"
    )
    print(
        f"{data['messages_per_setup']} DMs from {data['chats']} chats at once per setup, {load} "
        f"(latency p50/p99 under that load), sleeps/preempted: the processes' voluntary and "
        f"involuntary context switches per reply; idle: {data['latency_dms']} sequential DMs; "
        "CPU: all Loopgate "
        "processes; overhead: CPU ms/reply minus the single process's; coord: minus that of as "
        "many independent processes (--independent); postgres/redis: whole "
        "servers' CPU ms/reply over the same phase; bench: this process's (fake Bot API, fake "
        "LLM, HTTP client); busy: cores busy on the whole machine during the phase, of "
        f"{data['cores']}, others: of those, not this benchmark's; median of {data['rounds']} "
        f"round(s); routing: {data['routing']}; pools warmed by a burst first: "
        f"{'yes' if data.get('warm_burst', False) else 'no'}; idle ms/s: all Loopgate processes' "
        "CPU with nothing to answer; split: each process's share of that CPU"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--processes", default="1,2,3", help="process counts to measure (default 1,2,3)"
    )
    parser.add_argument("--chats", type=int, default=40, help="chats at once (default 40)")
    parser.add_argument("--per-chat", type=int, default=5, help="DMs per chat (default 5)")
    parser.add_argument("--latency", type=int, default=30, help="sequential DMs (default 30)")
    parser.add_argument("--warmup", type=int, default=3, help="DMs per process before measuring")
    parser.add_argument(
        "--no-warm-burst",
        dest="warm_burst",
        action="store_false",
        help="measure from a cold pool: no unmeasured burst of --chats DMs first",
    )
    parser.add_argument(
        "--idle", type=float, default=5.0, help="seconds of idle CPU measured (default 5)"
    )
    parser.add_argument(
        "--routing",
        choices=("round-robin", "sticky", "polling"),
        default="round-robin",
        help="round-robin: each update to the next process (default); sticky: a chat's updates "
        "always to the same process; polling: Telegram polling, the elected poller receives all",
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="repeat every setup, interleaved (default 1)"
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="open loop: send the phase's DMs at this many per second in all (spread over the "
        "chats) instead of each chat's next once answered; below what the machine can answer, "
        "every setup does the same work per second and the CPU per reply is compared at equal "
        "load rather than each at its own saturation (default: closed loop)",
    )
    parser.add_argument("--lease", type=float, default=15.0, help="cluster.lease_seconds")
    parser.add_argument(
        "--independent",
        action="store_true",
        help="also measure N processes that share nothing (own schemas, no Redis, sticky) for "
        "each N > 1: the cluster's CPU minus theirs is what coordination costs",
    )
    parser.add_argument(
        "--no-baseline", dest="baseline", action="store_false", help="skip the no-Redis run"
    )
    parser.add_argument(
        "--database-url",
        default=os.environ.get("LOOPGATE_TEST_POSTGRES_URL"),
        help="Postgres (default $LOOPGATE_TEST_POSTGRES_URL); a fresh schema per setup",
    )
    parser.add_argument(
        "--redis-url",
        default=os.environ.get("LOOPGATE_TEST_REDIS_URL"),
        help="Redis (default $LOOPGATE_TEST_REDIS_URL); a fresh key prefix per setup",
    )
    parser.add_argument("--out", type=Path, help="also write the JSON result here")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (logs)")
    parser.add_argument(
        "--separate-workspaces",
        action="store_true",
        help="each clustered process keeps its own workspaces directory (stops before 47 "
        "measured so); by default they share one, as the deploy recipe's volume",
    )
    parser.add_argument(
        "--py-spy",
        type=Path,
        metavar="DIR",
        help="sample each process with py-spy over the measured phase; collapsed stacks to "
        "DIR/<round>-<setup>-p<N>.txt (the sampling costs CPU: do not read its CPU figures)",
    )
    args = parser.parse_args()
    if not args.database_url or not args.database_url.startswith("postgres"):
        parser.error("a Postgres URL is needed: --database-url or LOOPGATE_TEST_POSTGRES_URL")
    if not args.redis_url:
        parser.error("a Redis URL is needed: --redis-url or LOOPGATE_TEST_REDIS_URL")
    if args.py_spy and py_spy_path() is None:
        parser.error("--py-spy needs py-spy: pip install py-spy")
    if args.routing == "polling" and args.independent:
        parser.error("--independent needs webhooks: independent processes would poll one bot")
    configure_logging("warning", "console")  # the schema clean-up's storage.opened
    args.processes = [int(n) for n in args.processes.split(",") if n.strip()]
    workdir = Path(tempfile.mkdtemp(prefix="loopgate-cluster-"))
    try:
        # uvloop, as the processes it measures run on: the fakes and the client take less of
        # the two cores they share with them.
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            results = runner.run(run(args, workdir))
    finally:
        if args.keep:
            print(f"work dir: {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    data = report(results, args)
    print_table(data)
    emit(data, args.out)


if __name__ == "__main__":
    main()
