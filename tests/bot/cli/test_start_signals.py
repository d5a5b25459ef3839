"""A signal while ``loopgate serve`` starts (``bot/cli/start_signals.py``): the window between
the start and uvicorn taking the signals, in-process (a signal during the start itself:
tests/e2e/test_service.py)."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from bot.app import Loopgate
from bot.cli import command
from bot.cli.start_signals import StartSignals
from bot.config import parse_config
from bot.http.draining import DrainingServer


def test_a_ctrl_c_after_the_start_keeps_the_server_from_serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = parse_config(
        {
            "database": {"url": f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}"},
            "agents": {"defaults": {"workspace": str(tmp_path / "workspaces")}},
        },
        {},
    )
    served: list[DrainingServer] = []

    async def serve(self: DrainingServer, sockets: object = None) -> None:
        served.append(self)

    def freeze() -> int:  # runs right after the start: the signal lands in the window
        signal.raise_signal(signal.SIGINT)
        return 0

    monkeypatch.setattr(DrainingServer, "serve", serve)
    monkeypatch.setattr(command, "freeze_startup_objects", freeze)
    stopped: list[str] = []
    original = Loopgate.aclose

    async def aclose(self: Loopgate) -> None:
        await original(self)
        stopped.append("closed")

    monkeypatch.setattr(Loopgate, "aclose", aclose)
    before = signal.getsignal(signal.SIGINT)
    assert asyncio.run(command._serve_async(config)) == 130
    assert served == []  # never served
    assert stopped == ["closed"]  # what the start opened is closed
    assert signal.getsignal(signal.SIGINT) is before  # the handlers are given back


async def test_a_signal_cancels_the_start_and_gives_the_handlers_back() -> None:
    started = asyncio.Event()

    async def start() -> None:
        started.set()
        await asyncio.sleep(30)

    before = signal.getsignal(signal.SIGTERM)
    with StartSignals() as signals:
        waiting = asyncio.ensure_future(signals.run(start()))
        await started.wait()
        signal.raise_signal(signal.SIGTERM)
        assert await asyncio.wait_for(waiting, 5) is False
    assert signals.received == signal.SIGTERM and signals.exit_code == 143
    assert signal.getsignal(signal.SIGTERM) is before
