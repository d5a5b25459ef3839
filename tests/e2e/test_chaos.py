"""Issue 27's chaos run, short form: ``benchmarks/chaos.py`` with 150 messages and 15 SIGKILLs.

Three ``loopgate serve`` processes on Postgres and Redis, the default configuration with
streaming on, messages over the fake Telegram, Slack and Zalo while random processes are killed
and started again. Every Slack message must be answered exactly once. Every Telegram message
must be answered once, or twice where the process that sent it was killed between the send and
its record (Telegram can't be asked whether it went out; ``docs/deploys.md``). Zalo can't be
asked either, so the same holds for its doubles; and its ``getUpdates`` consumes what it
returns, so a message fetched by a process killed before it stored it can't come back: Zalo
may also lose.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
from pathlib import Path

from tests.cluster_support import needs_postgres, needs_redis
from tests.paths import ROOT
from tests.service_support import clean_env

pytestmark = [needs_postgres, needs_redis]


async def test_killed_processes_lose_nothing_and_double_only_in_the_send_window(
    tmp_path: Path,
) -> None:
    seed = random.randrange(1 << 30)
    out = tmp_path / "chaos.json"
    env = clean_env(tmp_path)
    for name in ("LOOPGATE_TEST_POSTGRES_URL", "LOOPGATE_TEST_REDIS_URL"):
        env[name] = os.environ[name]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "benchmarks" / "chaos.py"),
        "--messages", "150", "--kills", "15", "--duration", "45",
        "--seed", str(seed), "--out", str(out),
        cwd=tmp_path, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    output, _ = await asyncio.wait_for(proc.communicate(), 600)
    tail = output.decode(errors="replace")[-4000:]
    assert proc.returncode == 0, tail
    result = json.loads(out.read_text())
    assert result["kills"] == 15, tail
    slack, telegram, zalo = result["slack"], result["telegram"], result["zalo"]
    assert (slack["lost"], slack["doubled"]) == (0, 0), (slack, f"seed {seed}")
    assert slack["exactly_once"] == slack["sent"] == 50
    # Telegram and Zalo can't be asked whether a chunk went out: a kill between its send and its
    # record resends it on replay (docs/deploys.md). Such a double is allowed, once per answer,
    # and only when the process that sent the first copy was killed within seconds of sending
    # it. How many answers a kill doubles is not bounded by a count: one kill lands in the send
    # window of every chat that process was answering at that instant (seed 430888134 doubled
    # three Zalo answers, each attributed to its sender's kill).
    for row in (telegram, zalo):
        assert row["doubled"] == row["doubled_after_kill"], (row, f"seed {seed}")
        assert row["most_copies"] <= 2, (row, f"seed {seed}")
    assert telegram["lost"] == 0, (telegram, f"seed {seed}")
    assert telegram["exactly_once"] + telegram["doubled"] == telegram["sent"] == 50
