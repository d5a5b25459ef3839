"""Issue 27's chaos run, short form: ``benchmarks/chaos.py`` with 150 messages and 15 SIGKILLs.

Three ``loopgate serve`` processes on Postgres and Redis, the default configuration with
streaming on, messages over the fake Telegram, Slack and Zalo while random processes are killed
and started again. Every Telegram and Slack message must be answered exactly once. Zalo's
``getUpdates`` consumes what it returns, so a message fetched by a process killed before it
stored it can't come back: Zalo may lose, but never double.
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


async def test_killed_processes_lose_and_double_nothing(tmp_path: Path) -> None:
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
    for platform in ("telegram", "slack"):
        row = result[platform]
        assert (row["lost"], row["doubled"]) == (0, 0), (platform, row, f"seed {seed}")
        assert row["exactly_once"] == row["sent"] == 50
    assert result["zalo"]["doubled"] == 0, result["zalo"]
