"""What the end-to-end benchmarks share (``serve.py``, ``cluster.py``): the fake Bot API that
times each reply, ``loopgate serve`` started as a subprocess and stopped with SIGTERM, and CPU
and memory of its process tree read from /proc.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from tests.fakes.telegram_server import FakeTelegram  # noqa: E402
from tests.service_support import clean_env, free_port  # noqa: E402

__all__ = [
    "ROOT",
    "BenchTelegram",
    "cpu_seconds",
    "pct",
    "peak_rss_mib",
    "process_tree",
    "start_serve",
    "stop_serve",
]

TICKS = os.sysconf("SC_CLK_TCK")


class BenchTelegram(FakeTelegram):
    """The fake Bot API, noting when each update is handed out and when each reply arrives,
    with a future per chat instead of the fake's condition scans (which cost O(calls) each)."""

    def __init__(self) -> None:
        super().__init__()
        self.handed_out: dict[int, float] = {}
        self.waiting: dict[int, tuple[str, asyncio.Future[float]]] = {}

    async def __aenter__(self) -> BenchTelegram:  # typed as the subclass for its callers
        await self.start()
        return self

    async def _m_getUpdates(self, params: dict[str, Any]) -> Any:
        result = await super()._m_getUpdates(params)
        now = time.monotonic()
        for update in result:
            self.handed_out.setdefault(update["update_id"], now)
        return result

    async def _m_sendMessage(self, params: dict[str, Any]) -> Any:
        result = await super()._m_sendMessage(params)
        waiter = self.waiting.get(int(params["chat_id"]))
        if waiter is not None and waiter[0] in params.get("text", "") and not waiter[1].done():
            waiter[1].set_result(time.monotonic())
        return result

    def expect_reply(self, user_id: int, text: str) -> asyncio.Future[float]:
        """A future set to the ``time.monotonic()`` at which the answer to ``text`` (the fake
        LLM echoes it) reaches ``sendMessage`` in the DM of ``user_id``."""
        future: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self.waiting[user_id] = (f"echo: {text}", future)
        return future

    async def ask(self, user_id: int, text: str) -> float:
        """Send ``text`` as a DM from ``user_id`` (polling); the ms from hand-out to the reply."""
        future = self.expect_reply(user_id, text)
        update_id = self.push(self.private_message(text, user_id=user_id))
        async with asyncio.timeout(300):
            replied = await future
        del self.waiting[user_id]
        return (replied - self.handed_out[update_id]) * 1000


# -- the server process ----------------------------------------------------------------------


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
            tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def process_tree(root: int) -> list[int]:
    tree = _children()
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo.extend(tree.get(pid, []))
    return pids


def cpu_seconds(root: int) -> float:
    """User + system CPU of the process tree (children already reaped included)."""
    total = 0
    for pid in process_tree(root):
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/{pid}/stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            total += sum(int(v) for v in fields[11:15])  # utime stime cutime cstime
    return total / TICKS


def peak_rss_mib(root: int, field: str = "VmHWM") -> float:
    """``VmHWM`` (the peak) or ``VmRSS`` (now) of the process tree, in MiB."""
    total = 0
    for pid in process_tree(root):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith(f"{field}:"):
                    total += int(line.split()[1])
    return total / 1024


async def start_serve(
    workdir: Path,
    config: Path,
    profile: Path | None = None,
    sample: bool = False,
    *,
    command: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    log_name: str = "serve.log",
) -> tuple[asyncio.subprocess.Process, IO[bytes], int]:
    """``loopgate serve --config CONFIG`` on a free port, once ``/healthz`` answers 200.

    ``profile``: under ``profiled_serve.py`` (``sample``: its stack sampler); ``command``: run
    this instead of ``python -m bot`` (it must take the same arguments); ``env``: added to the
    clean environment. The log goes to ``workdir/log_name``. Returns the process, the open log
    and the port.
    """
    port = free_port()
    full_env = clean_env(workdir)
    full_env["PYTHONPATH"] = str(ROOT)
    full_env.update(env or {})
    argv = list(command) if command is not None else [sys.executable, "-m", "bot"]
    if profile is not None:
        full_env["LOOPGATE_PROFILE_OUT"] = str(profile)
        if sample:
            full_env["LOOPGATE_PROFILE_SAMPLE"] = "1"
        argv = [sys.executable, str(ROOT / "benchmarks" / "profiled_serve.py")]
    log = (workdir / log_name).open("wb")
    proc = await asyncio.create_subprocess_exec(
        *argv, "serve", "--config", str(config), "--port", str(port),
        cwd=workdir, env=full_env, stdout=asyncio.subprocess.DEVNULL, stderr=log,
    )  # fmt: skip
    async with httpx.AsyncClient() as client:
        for _ in range(300):
            with contextlib.suppress(httpx.TransportError):
                if (await client.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200:
                    return proc, log, port
            if proc.returncode is not None:
                break
            await asyncio.sleep(0.1)
    if proc.returncode is None:
        proc.kill()
    log.close()
    raise SystemExit(f"loopgate serve did not start; see {workdir / log_name}")


async def stop_serve(proc: asyncio.subprocess.Process, log: IO[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), 30)
    except TimeoutError:
        proc.kill()
    log.close()


def emit(data: dict[str, Any], out: Path | None) -> None:
    """The result as one JSON line on stdout, and in ``out`` for check_regression.py."""
    line = json.dumps(data)
    print(line)
    if out is not None:
        out.write_text(line + "\n")


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(q * len(ordered)) - 1))]
