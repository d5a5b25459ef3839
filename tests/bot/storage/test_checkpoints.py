"""SQLite's WAL is checkpointed in the background (bot/storage/_checkpoints.py), not inside the
commit of whichever write crosses SQLite's threshold."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import Connection, Row

from bot.storage import _checkpoints as checkpoints
from bot.storage import open_database
from bot.storage._state import SqlChannelState


def _passive(conn: Connection) -> Row[tuple[int, int, int]]:
    return conn.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)").one()


async def _wal_after_writes(tmp_path: Path, name: str, writes: int, *, pause_every: int) -> int:
    url = f"sqlite+aiosqlite:///{tmp_path}/{name}.db"
    async with await open_database(url) as db:
        state = SqlChannelState(db)
        for n in range(writes):
            await state.set("telegram", f"key{n % 50}", "x" * 2000)
            # A service's writes pause now and then (pause_every), or never (0). Kept sleep:
            # the pause itself is what the test simulates (the checkpointer's idle moments).
            await asyncio.sleep(0.05 if pause_every and n % pause_every == 0 else 0)
        assert db.checkpoints is not None
        await db.checkpoints.aclose()
        # frames written since the log last restarted
        return await db.run_read(lambda conn: int(_passive(conn)[1]))


async def test_connections_leave_checkpoints_to_the_service(tmp_path: Path) -> None:
    def autocheckpoint(conn: Connection) -> int:
        return int(conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar_one())

    async with await open_database(f"sqlite+aiosqlite:///{tmp_path}/x.db") as db:
        assert await db.run_write(autocheckpoint) == 0
        assert await db.run_read(autocheckpoint) == 0


async def test_background_checkpoints_keep_the_log_small(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoints, "EVERY_WRITES", 10**9)
    unbounded = await _wal_after_writes(tmp_path, "never", 400, pause_every=40)
    monkeypatch.setattr(checkpoints, "EVERY_WRITES", 40)
    bounded = await _wal_after_writes(tmp_path, "every40", 400, pause_every=40)
    # A checkpoint that caught up lets the next write start the log over.
    assert bounded * 3 < unbounded


@pytest.mark.parametrize(("cap", "under_the_slot"), [(10**9, []), (10, [True])])
async def test_writes_that_never_pause_still_get_a_complete_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cap: int, under_the_slot: list[bool]
) -> None:
    monkeypatch.setattr(checkpoints, "EVERY_WRITES", 10**9)  # started by hand below
    monkeypatch.setattr(checkpoints, "CATCH_UP_ROUNDS", 2)
    monkeypatch.setattr(checkpoints, "RETRY_AFTER", 0.001)
    monkeypatch.setattr(checkpoints, "MAX_LOG_FRAMES", cap)
    async with await open_database(f"sqlite+aiosqlite:///{tmp_path}/x.db") as db:
        state = SqlChannelState(db)
        for n in range(50):
            await state.set("telegram", f"key{n}", "x" * 2000)
        service, writer = db.checkpoints, db._writer
        assert service is not None and writer is not None
        held: list[bool] = []
        passive = service._passive

        async def a_write_lands_during_every_round() -> tuple[int, int]:
            held.append(writer.busy)
            result = await passive()
            service._commits += 1  # so no background round may count as caught up
            return result

        monkeypatch.setattr(service, "_passive", a_write_lands_during_every_round)
        await service._checkpoint()
        # two background rounds beside the writers; past the cap, one more holding the slot
        assert held == [False, False, *under_the_slot]
        assert service.done == len(under_the_slot)
