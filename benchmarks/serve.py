"""Cost per reply as a user deploys it: ``loopgate serve`` in its own process.

Telegram polling against the fake Bot API server and an OpenAI-compatible fake LLM that answers
instantly (both from tests/fakes, over real HTTP on 127.0.0.1, in this process), send pacing off
(``rate_limit: off``), SQLite, everything else default except ``bot.sender_rate_limit: off``
(50 messages from one user would otherwise be refused by design after the first 5).

- latency: sequential DMs in one chat, from ``getUpdates`` handing the update out to the reply's
  ``sendMessage`` reaching the fake (p50/p95/p99);
- throughput: N chats at once, each sending its DMs one after the other (the next once the
  previous is answered), replies/s;
- CPU seconds per reply (user + system, from /proc) and peak RSS (VmHWM) of the server's
  process tree.

    python benchmarks/serve.py [--latency 50] [--chats 200] [--per-chat 5] [--out result.json]
    python benchmarks/serve.py --long-chats   # 50 chats x 200 DMs: conversations that grow
    python benchmarks/serve.py --restart   # measure a restart (database already migrated)
    python benchmarks/serve.py --profile serve.prof     # + cProfile of the throughput phase
    python benchmarks/serve.py --show-profile serve.prof 1000 35.0   # its tables again, scaled

Prints a table and one JSON line; ``--out`` also writes the JSON (for check_regression.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from serve_common import (  # noqa: E402
    BenchTelegram,
    cpu_seconds,
    emit,
    pct,
    peak_rss_mib,
    start_serve,
    stop_serve,
)

from tests.fakes.llm_server import FakeLLM  # noqa: E402
from tests.fakes.otlp_collector import FakeCollector  # noqa: E402

LATENCY_USER = 42
WARMUP_USER = 7
LONG_CHATS = (50, 200)
"""``--long-chats``: chats at once and DMs in each. The default load (5 DMs a chat) never makes a
conversation long; this one once loaded the tokenizer and kept every counted message (docs/
performance.md, stop 52)."""


def write_config(
    workdir: Path, llm: FakeLLM, tg: BenchTelegram, collector: FakeCollector | None = None
) -> Path:
    """The benchmark's configuration; with ``collector``, every capability of
    :data:`ALL_CAPABILITIES` too, its spans exported there."""
    config: dict[str, Any] = {
        "providers": {"openai": {"base_url": llm.base_url, "model": "fake-model"}},
        "channels": {
            "telegram": {
                "enabled": True,
                "token": tg.token,
                "api_base_url": tg.base_url,
                "rate_limit": "off",
            }
        },
        "bot": {"sender_rate_limit": "off"},
    }
    if collector is not None:
        config.update(ALL_CAPABILITIES)
        config["providers"]["openai"]["pricing"] = {"input_per_mtok": 0.15, "output_per_mtok": 0.6}
        config["tracing"] = {"otlp": {"endpoint": collector.base_url}}
    path = workdir / "config.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


# Every capability added since issue 33 configured but not used (the replies stay text):
# a daily heartbeat (a cron job that does not fire during the run), voice transcription,
# web_fetch and web_search against a search server that is not there, exec in bwrap (probed at
# start), quotas and budgets far above what the run spends (with a configured price, so the
# USD limits count), and each run's spans exported over OTLP to a fake collector in this
# process (one that is down would instead hold up to 4,096 spans in memory by design).
ALL_CAPABILITIES: dict[str, Any] = {
    "agents": {
        "defaults": {"budget": {"daily_usd": 1_000_000, "monthly_usd": 1_000_000}},
        "main": {"heartbeat": {"every": "1d", "chat": f"telegram:{LATENCY_USER}"}},
    },
    "cron": {"timezone": "UTC"},
    "media": {"transcription": {"provider": "openai"}},
    "tools": {
        "web": {
            "search": {"provider": "searxng", "searxng": {"base_url": "http://127.0.0.1:9"}},
            "allow_hosts": ["127.0.0.1"],
        },
        "exec": {"enabled": True, "sandbox": "bwrap"},
    },
    "usage": {"user_daily_tokens": 1_000_000_000, "user_daily_usd": 1_000_000},
}


# -- the measurements ------------------------------------------------------------------------


@dataclass
class Result:
    latencies: list[float] = field(default_factory=list)
    latency_cpu: float = 0.0
    replies: int = 0
    latency_calls: dict[str, float] = field(default_factory=dict)
    calls: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    cpu: float = 0.0
    rss: float = 0.0
    end_rss: float = 0.0
    startup_rss: float = 0.0
    otlp_spans: int | None = None  # spans the collector received (--all-capabilities)

    def as_json(self) -> dict[str, Any]:
        spans = {} if self.otlp_spans is None else {"otlp_spans": self.otlp_spans}
        return spans | {
            "latency_ms": {
                "p50": round(pct(self.latencies, 0.50), 2),
                "p95": round(pct(self.latencies, 0.95), 2),
                "p99": round(pct(self.latencies, 0.99), 2),
            },
            "latency_cpu_ms_per_reply": round(self.latency_cpu * 1000 / len(self.latencies), 2),
            "throughput_rps": round(self.replies / self.seconds, 1),
            "cpu_ms_per_reply": round(self.cpu * 1000 / self.replies, 2),
            "peak_rss_mib": round(self.rss, 1),
            "end_rss_mib": round(self.end_rss, 1),
            "startup_rss_mib": round(self.startup_rss, 1),
            "replies": self.replies + len(self.latencies),
            "telegram_calls_per_reply": {
                "sequential": self.latency_calls,
                "throughput": self.calls,
            },
        }


def api_calls(tg: BenchTelegram, since: int, replies: int) -> dict[str, float]:
    """Bot API calls per reply by method, from the fake's record since call number ``since``."""
    counts = Counter(call.method for call in tg.calls[since:])
    return {method: round(n / max(replies, 1), 2) for method, n in counts.most_common()}


async def run(args: argparse.Namespace, workdir: Path) -> Result:
    result = Result()
    async with contextlib.AsyncExitStack() as fakes:
        llm = await fakes.enter_async_context(FakeLLM())
        tg = await fakes.enter_async_context(BenchTelegram())
        collector = None
        if args.all_capabilities:
            collector = await fakes.enter_async_context(FakeCollector())
        config = write_config(workdir, llm, tg, collector)
        if args.restart:  # a deployment's usual start: the database exists and is migrated
            first, first_log, _ = await start_serve(workdir, config, None)
            await stop_serve(first, first_log)
        proc, log, _ = await start_serve(workdir, config, args.profile, args.sample)
        try:
            pid = proc.pid
            result.startup_rss = peak_rss_mib(pid)
            for n in range(args.warmup):
                await tg.ask(WARMUP_USER, f"warm {n}")
            cpu0, calls0 = cpu_seconds(pid), len(tg.calls)
            for n in range(args.latency):
                result.latencies.append(await tg.ask(LATENCY_USER, f"m{n}"))
            result.latency_cpu = cpu_seconds(pid) - cpu0
            result.latency_calls = api_calls(tg, calls0, args.latency)

            async def conversation(user_id: int) -> None:
                for n in range(args.per_chat):
                    await tg.ask(user_id, f"c{user_id} m{n}")

            if args.profile is not None:
                os.kill(pid, signal.SIGUSR1)
            cpu0, t0, calls0 = cpu_seconds(pid), time.monotonic(), len(tg.calls)
            await asyncio.gather(*(conversation(100_000 + c) for c in range(args.chats)))
            result.seconds = time.monotonic() - t0
            result.cpu = cpu_seconds(pid) - cpu0
            result.replies = args.chats * args.per_chat
            result.calls = api_calls(tg, calls0, result.replies)
            result.rss = peak_rss_mib(pid)
            result.end_rss = peak_rss_mib(pid, "VmRSS")
            if args.profile is not None:
                os.kill(pid, signal.SIGUSR2)
                for _ in range(600):
                    if args.profile.exists():
                        break
                    await asyncio.sleep(0.1)
        finally:
            await stop_serve(proc, log)
        if collector is not None:
            result.otlp_spans = len(collector.spans)
    return result


def fmt_calls(data: dict[str, Any], phase: str) -> str:
    calls = data["telegram_calls_per_reply"][phase]
    return f"{sum(calls.values()):.1f}: " + ", ".join(f"{m} {n}" for m, n in calls.items())


def print_table(data: dict[str, Any], args: argparse.Namespace) -> None:
    lat = data["latency_ms"]
    rows = [
        (f"latency p50 / p95 / p99 ({args.latency} DMs)", f"{lat['p50']} / {lat['p95']} / "
         f"{lat['p99']} ms"),
        ("CPU per reply, sequential", f"{data['latency_cpu_ms_per_reply']} ms"),
        (f"throughput ({args.chats} chats x {args.per_chat})",
         f"{data['throughput_rps']} replies/s"),
        ("CPU per reply, throughput", f"{data['cpu_ms_per_reply']} ms"),
        ("Bot API calls per reply, sequential", fmt_calls(data, "sequential")),
        ("Bot API calls per reply, throughput", fmt_calls(data, "throughput")),
        ("RSS peak (VmHWM) / at the end / after start-up", f"{data['peak_rss_mib']} / "
         f"{data['end_rss_mib']} / {data['startup_rss_mib']} MiB"),
    ]  # fmt: skip
    width = max(len(name) for name, _ in rows) + 2
    for name, value in rows:
        print(f"{name:<{width}}{value}")


def print_profile(path: Path, replies: int, cpu_ms: float) -> None:
    """Where each millisecond goes: own time per package, as a share of the profile and that
    share of ``cpu_ms`` (cProfile slows Python code down, so scale to an unprofiled run's)."""
    import pstats

    stats = pstats.Stats(str(path))
    buckets: dict[str, float] = {}
    for (filename, _, name), (_, _, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        buckets[bucket(filename, name)] = buckets.get(bucket(filename, name), 0.0) + tottime
    total = sum(buckets.values())
    print(f"\nprofile: {total * 1000 / replies:.1f} ms/reply under cProfile; scaled to {cpu_ms} ms")
    print(f"{'where (own time)':<34}{'share':>7}{'ms/reply':>10}")
    for name, seconds in sorted(buckets.items(), key=lambda kv: -kv[1])[:25]:
        share = seconds / total
        print(f"{name:<34}{share:>7.1%}{share * cpu_ms:>10.2f}")
    print("\ntop functions by cumulative time (project code):")
    stats.sort_stats("cumulative")
    for func in stats.fcn_list[:400]:  # type: ignore[attr-defined]
        filename, line, name = func
        if not any(f"/{p}/" in filename for p in ("bot", "channels", "agent_core")):
            continue
        if "site-packages" in filename:
            continue
        _, calls, _, cumtime, _ = stats.stats[func]  # type: ignore[attr-defined]
        where = filename.split(str(ROOT) + "/")[-1]
        print(
            f"{cumtime * 1000 / replies:>8.2f} ms  {calls / replies:>6.1f}x  {where}:{line} {name}"
        )


def print_samples(path: Path, replies: int, cpu_ms: float) -> None:
    """The sampler's view: busy samples (the main thread not waiting in epoll) by the package
    of the innermost frame, then by project function anywhere on the stack, as shares of the
    busy samples and those shares of ``cpu_ms``."""
    stacks: list[tuple[list[str], int]] = []
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        if frames[-1].endswith(("selectors.py:select", "runners.py:run")):
            # idle: the event loop waits for I/O. Under uvloop the loop is C code, so a stack
            # that ends at asyncio.run is idle or in uvloop itself: neither is counted.
            continue
        stacks.append((frames, int(count)))
    busy = sum(count for _, count in stacks) or 1
    leaf: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    for frames, count in stacks:
        filename, _, name = frames[-1].rpartition(":")
        where = bucket(filename, name)
        leaf[where] = leaf.get(where, 0) + count
        for frame in set(frames):
            filename, _, name = frame.rpartition(":")
            if filename.startswith(str(ROOT)) and "/.venv/" not in filename:
                key = f"{filename[len(str(ROOT)) + 1 :]}:{name}"
                inclusive[key] = inclusive.get(key, 0) + count
    print(f"\nsampled: {busy} busy samples; shares scaled to {cpu_ms} ms/reply")
    print(f"{'where (innermost frame)':<34}{'share':>7}{'ms/reply':>10}")
    for name, count in sorted(leaf.items(), key=lambda kv: -kv[1])[:25]:
        print(f"{name:<34}{count / busy:>7.1%}{count / busy * cpu_ms:>10.2f}")
    print("\nproject functions, inclusive (anywhere on the stack):")
    for name, count in sorted(inclusive.items(), key=lambda kv: -kv[1])[:60]:
        print(f"{count / busy:>7.1%}{count / busy * cpu_ms:>8.2f} ms  {name}")


def bucket(filename: str, name: str) -> str:
    if filename == "~":
        return "C builtins (" + name.split(" of ")[-1].strip("}>'").split(".")[0] + ")"
    if "site-packages/" in filename:
        return filename.split("site-packages/")[1].split("/")[0].removesuffix(".py")
    if filename.startswith(str(ROOT)):
        parts = filename[len(str(ROOT)) + 1 :].split("/")
        return "/".join(parts[:2]) if len(parts) > 2 else parts[0]
    parts = filename.split("/")
    if len(parts) < 2:
        return filename  # <frozen ...>, <string>
    return "stdlib " + (parts[-2] if parts[-2] not in ("lib", "python3.11") else parts[-1])


def configuration(args: argparse.Namespace) -> str:
    """What the result is compared with (check_regression.py picks the baseline by it)."""
    name = "all-capabilities" if args.all_capabilities else "plain"
    return f"{name}, long chats" if args.long_chats else name


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--latency", type=int, default=50, help="sequential DMs (default 50)")
    parser.add_argument("--chats", type=int, default=200, help="chats at once (default 200)")
    parser.add_argument("--per-chat", type=int, default=5, help="DMs per chat (default 5)")
    parser.add_argument("--warmup", type=int, default=10, help="DMs before measuring")
    parser.add_argument("--out", type=Path, help="also write the JSON result here")
    parser.add_argument("--profile", type=Path, help="cProfile the throughput phase to this file")
    parser.add_argument(
        "--sample",
        action="store_true",
        help="with --profile: sample the stack every ms instead of cProfile (no call overhead)",
    )
    parser.add_argument(
        "--long-chats",
        action="store_true",
        help=f"{LONG_CHATS[0]} chats x {LONG_CHATS[1]} DMs (10,000 replies, about 2 minutes): "
        "conversations long enough to reach the context budget's thresholds",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work dir (log, database)")
    parser.add_argument(
        "--restart",
        action="store_true",
        help="start and stop the server once first, so the measured one opens a migrated database",
    )
    parser.add_argument(
        "--all-capabilities",
        action="store_true",
        help="configure cron, media, web, exec, usage limits and OTLP too (replies stay text)",
    )
    parser.add_argument(
        "--show-profile",
        nargs=3,
        metavar=("FILE", "REPLIES", "CPU_MS"),
        help="only print an earlier --profile FILE's tables, scaled to an unprofiled CPU_MS",
    )
    args = parser.parse_args()
    if args.show_profile:
        path, replies, cpu_ms = args.show_profile
        show = print_samples if args.sample else print_profile
        show(Path(path), int(replies), float(cpu_ms))
        return
    if args.long_chats:
        args.chats, args.per_chat = LONG_CHATS
    if args.profile is not None:
        args.profile = args.profile.resolve()
        args.profile.unlink(missing_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="loopgate-serve-"))
    try:
        result = asyncio.run(run(args, workdir))
    finally:
        if not args.keep:
            import shutil

            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"work dir: {workdir}", file=sys.stderr)
    data = result.as_json()
    data["configuration"] = configuration(args)
    print_table(data, args)
    if args.profile is not None:
        show = print_samples if args.sample else print_profile
        show(args.profile, result.replies, data["cpu_ms_per_reply"])
    emit(data, args.out)


if __name__ == "__main__":
    main()
