"""The ``loopgate`` command (``bot/cli/command.py``): parsing and dispatch, check-config, the
serve options and event loop, pairing, and freezing start-up objects out of the collector's
sight (a full collection then walks only what the service made since)."""

from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bot import cli
from bot.cli import command
from bot.cli.command import freeze_startup_objects
from bot.config import Config
from bot.pipeline.access import PairingStore
from bot.storage import open_database


def config_file(tmp_path: Path, **sections: object) -> str:
    path = tmp_path / "config.yaml"
    data = {"database": {"url": f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"}, **sections}
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_startup_objects_are_out_of_the_collectors_sight() -> None:
    before = len(gc.get_objects())
    try:
        frozen = freeze_startup_objects()
        assert frozen == gc.get_freeze_count() and frozen > before // 2
        assert len(gc.get_objects()) < before - frozen // 2  # no longer walked
    finally:
        gc.unfreeze()


class TestCheckConfigCommand:
    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "bot", "check-config", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )

    def test_invalid_file_exits_non_zero_naming_the_key(self, tmp_path: Path) -> None:
        path = tmp_path / "bad.yaml"
        path.write_text("channels:\n  telegram:\n    enabled: true\n")
        done = self.run("--config", str(path))
        assert done.returncode == 2
        assert "channels.telegram.token: field required" in done.stderr

    def test_valid_file_exits_zero(self, tmp_path: Path) -> None:
        path = tmp_path / "ok.yaml"
        path.write_text("server:\n  port: 9999\n")
        done = self.run("--config", str(path))
        assert done.returncode == 0, done.stderr
        assert "configuration OK" in done.stdout
        assert "tools.exec: off" in done.stdout

    def test_says_whether_exec_is_offered_and_why_not(self, tmp_path: Path) -> None:
        path = tmp_path / "exec.yaml"
        path.write_text("tools:\n  exec: {enabled: true, sandbox: docker, image: nope:1}\n")
        done = self.run("--config", str(path))
        assert done.returncode == 0, done.stderr
        line = done.stdout.splitlines()[-1]
        assert line.startswith("tools.exec: ")
        if "NOT offered" in line:  # no Docker here: the reason is given
            assert "sandbox 'docker' unavailable: " in line


class TestInProcess:
    def test_a_bad_file_is_one_line_and_exit_2(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = tmp_path / "bad.yaml"
        path.write_text("server: {port: http}\n")
        with pytest.raises(SystemExit) as exited:
            cli.main(["agents", "list", "--config", str(path)])
        assert exited.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith(f"loopgate: {path}") and "server.port" in err
        assert "Traceback" not in err

    def test_a_command_is_required(self, capsys: pytest.CaptureFixture[str]) -> None:
        with pytest.raises(SystemExit) as exited:
            cli.main([])
        assert exited.value.code == 2
        assert "required" in capsys.readouterr().err

    def test_serve_options_override_the_config(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        served: list[Config] = []

        def serve(config: Config) -> int:
            served.append(config)
            return 0

        monkeypatch.setattr(command, "_serve", serve)  # the server itself: not started here
        cfg = config_file(tmp_path, server={"host": "127.0.0.1", "port": 8001})
        assert cli.main(["serve", "--config", cfg]) == 0
        assert cli.main(["serve", "--host", "0.0.0.0", "--port", "0", "--config", cfg]) == 0
        assert [(c.server.host, c.server.port) for c in served] == [
            ("127.0.0.1", 8001),
            ("0.0.0.0", 0),  # port 0 is a port, not "unset"
        ]

    def test_serve_refuses_uvloop_when_it_is_missing(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop → ImportError
        cfg = config_file(tmp_path, server={"event_loop": "uvloop"})
        assert cli.main(["serve", "--config", cfg]) == 2
        assert "server.event_loop is uvloop, which is not installed" in capsys.readouterr().err


class TestPairing:
    def test_list_and_approve(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        cfg = config_file(tmp_path)
        assert cli.main(["pairing", "list", "--config", cfg]) == 0
        assert "no pending pairing requests" in capsys.readouterr().out

        async def request() -> str:
            async with await open_database(f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}") as db:
                made = await PairingStore(db).request("telegram", "u1", "Ann")
                assert made is not None
                return made.code

        code = asyncio.run(request())
        capsys.readouterr()
        assert cli.main(["pairing", "list", "--config", cfg]) == 0
        listed = capsys.readouterr().out
        assert listed.startswith(f"{code}  telegram  u1  Ann  (expires ") and "UTC)" in listed
        assert cli.main(["pairing", "approve", code.lower(), "--config", cfg]) == 0
        assert capsys.readouterr().out == "approved telegram user u1 Ann\n"
        assert cli.main(["pairing", "approve", code, "--config", cfg]) == 1  # used up
        assert f"no pending pairing code {code!r}" in capsys.readouterr().err
