"""The start-up cost of one ``exec`` in its sandbox: ``true``, from the tool call to its result.

Runs ``true`` through the ``exec`` tool's sandbox N times each way and prints p50, p90, p99 and
max in milliseconds, and the ratio of each to a bare ``/bin/sh -c true`` started the same way
(asyncio subprocess, both streams read):

- ``host``: ``/bin/sh -c true`` itself (the baseline);
- ``none``: ``sandbox: none`` (prlimit, then sh; the host);
- ``bwrap``: ``sandbox: bwrap`` with the network off (namespaces, mounts, prlimit, sh; and a
  pids cgroup per command when the service runs as root);
- ``bwrap+net``: ``network: true`` (no network namespace to create);
- ``tool``: the whole ``exec`` tool in bwrap (arguments, credentials, masking, the result text).

    python benchmarks/exec.py [--runs 200]

One JSON line at the end. Docker is not measured: there is no Docker daemon on these machines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from agent_core.sandbox import BASE_ENV, BwrapSandbox, HostSandbox, Limits
from agent_core.sandbox.process import run_process
from agent_core.tools import ToolContext, exec_tool
from bot.logging_setup import configure_logging

KEEP = 4096


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


async def timed(runs: int, once: Callable[[], Awaitable[object]]) -> list[float]:
    await once()  # warm-up: page cache, the first fork of the event loop's child watcher
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        await once()
        samples.append((time.perf_counter() - t0) * 1000)
    return samples


async def bench(runs: int) -> dict[str, dict[str, float]]:
    workspace = Path(tempfile.mkdtemp(prefix="loopgate-bench-exec-"))
    limits = Limits()
    cases: dict[str, Callable[[], Awaitable[object]]] = {
        "host": lambda: run_process(
            ["/bin/sh", "-c", "true"], env=BASE_ENV, wall_time=10, keep=KEEP
        ),
        "none": lambda: HostSandbox(limits).run(
            "true", workspace, BASE_ENV, wall_time=10, keep=KEEP
        ),
    }
    if shutil.which("bwrap"):
        closed, opened = BwrapSandbox(limits=limits), BwrapSandbox(network=True, limits=limits)
        await closed.probe()
        cases["bwrap"] = lambda: closed.run("true", workspace, BASE_ENV, wall_time=10, keep=KEEP)
        cases["bwrap+net"] = lambda: opened.run(
            "true", workspace, BASE_ENV, wall_time=10, keep=KEEP
        )
        tool = exec_tool(closed)
        ctx = ToolContext(workspace, "bench", "u", "main", "r")
        cases["tool"] = lambda: tool.handler({"command": "true"}, ctx)
    else:
        print("bwrap not installed: only host and none are measured", file=sys.stderr)
    results: dict[str, dict[str, float]] = {}
    base: float | None = None
    print(f"{'case':<10} {'p50':>8} {'p90':>8} {'p99':>8} {'max':>8}  (ms)  p50 ÷ host")
    for name, once in cases.items():
        samples = await timed(runs, once)
        row = {
            "p50": statistics.median(samples),
            "p90": percentile(samples, 0.90),
            "p99": percentile(samples, 0.99),
            "max": max(samples),
        }
        base = base or row["p50"]
        row["ratio"] = row["p50"] / base
        results[name] = row
        print(
            f"{name:<10} {row['p50']:8.2f} {row['p90']:8.2f} {row['p99']:8.2f} "
            f"{row['max']:8.2f}        {row['ratio']:.1f}×"
        )
    shutil.rmtree(workspace, ignore_errors=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    configure_logging("warning", "console")  # one exec.ran line per run would drown the table
    results = asyncio.run(bench(args.runs))
    print(json.dumps({"benchmark": "exec", "runs": args.runs, "ms": results}))


if __name__ == "__main__":
    main()
