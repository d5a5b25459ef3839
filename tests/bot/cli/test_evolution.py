"""``loopgate evolution list|approve|reject|run`` (``bot/cli/evolution.py``), in-process
against a temporary SQLite database: output, exit codes and refusals without a traceback."""

from __future__ import annotations

import asyncio
import getpass
import io
from pathlib import Path

import pytest
import yaml

from bot import cli
from bot.cli import evolution as evolution_cli
from bot.config import parse_config
from bot.evolution.records import Suggestion
from bot.evolution.service import EvolutionService
from bot.storage import open_database
from tests.evolution_support import evolution_config, seed_failing_read_file, seed_runs


def _config_file(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    data = {
        "database": {"url": f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"},
        "agents": {"defaults": {"workspace": str(tmp_path / "workspaces")}},
    }
    path.write_text(yaml.safe_dump(data))
    return path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


class TestCli:
    async def _seed(self, tmp_path: Path) -> list[Suggestion]:
        db = await open_database(f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}")
        try:
            await seed_failing_read_file(db)
            await seed_runs(db, 20, status="max_iterations")
            report = await EvolutionService(db, evolution_config(tmp_path)).run_cycle()
        finally:
            await db.aclose()
        return sorted(report.created, key=lambda s: s.rule)

    def test_list_approve_reject(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        import asyncio

        cfg = str(_config_file(tmp_path))
        code, out, _ = _run(capsys, "evolution", "list", "--config", cfg)
        assert code == 0 and "no evolution suggestions" in out
        iteration, tool = asyncio.run(self._seed(tmp_path))
        assert (iteration.rule, tool.rule) == ("IterationLimitRule", "ToolFailureRule")

        code, out, _ = _run(capsys, "evolution", "list", "--status", "pending", "--config", cfg)
        assert code == 0
        assert tool.id in out and iteration.id in out and "read_file failed in 40" in out

        code, out, err = _run(
            capsys, "evolution", "approve", tool.id, "--by", "carol", "--config", cfg
        )
        assert code == 0, err
        assert f"applied {tool.id} to agent main: disable tool(s) read_file" in out
        assert "baseline quality" in out

        code, out, _ = _run(
            capsys, "evolution", "reject", iteration.id, "--reason", "not now", "--config", cfg
        )
        assert code == 0 and f"rejected {iteration.id}" in out

        code, _, err = _run(capsys, "evolution", "approve", iteration.id, "--config", cfg)
        assert code == 1
        assert err.startswith(f"loopgate: suggestion {iteration.id} is rejected, not pending")
        code, _, err = _run(capsys, "evolution", "reject", "nope", "--config", cfg)
        assert (code, err.strip()) == (1, "loopgate: no evolution suggestion 'nope'")

        code, out, _ = _run(capsys, "evolution", "list", "--agent", "main", "--config", cfg)
        assert f"{tool.id}: watching" in out and "by carol" in out
        assert f"{iteration.id}: rejected: not now" in out
        code, out, _ = _run(capsys, "agents", "list", "--config", cfg)
        assert "config+db" in out or " db " in out

    def test_run_makes_a_cycle(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        import asyncio

        cfg = str(_config_file(tmp_path))

        async def seed() -> None:
            db = await open_database(f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}")
            try:
                await seed_failing_read_file(db)
            finally:
                await db.aclose()

        asyncio.run(seed())
        code, out, _ = _run(capsys, "evolution", "run", "--config", cfg)
        assert code == 0
        assert "cycle over 1 agent(s): 1 new suggestion(s)" in out
        assert "ToolFailureRule" in out
        code, out, _ = _run(capsys, "evolution", "run", "--config", cfg)
        assert "0 new suggestion(s)" in out and "already pending" in out


class TestUnits:
    def test_the_reviewer_is_the_user_or_just_cli(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(getpass, "getuser", lambda: "dana")
        assert evolution_cli._default_reviewer() == "cli:dana"

        def nobody() -> str:
            raise KeyError("getpwuid(): uid not found: 1000")  # a bare container

        monkeypatch.setattr(getpass, "getuser", nobody)
        assert evolution_cli._default_reviewer() == "cli"

    def test_approved_without_by_records_the_user(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(getpass, "getuser", lambda: "dana")
        cfg = str(_config_file(tmp_path))
        [iteration, _tool] = asyncio.run(TestCli()._seed(tmp_path))
        code, _, err = _run(capsys, "evolution", "approve", iteration.id, "--config", cfg)
        assert code == 0, err
        code, out, _ = _run(capsys, "evolution", "list", "--status", "applied", "--config", cfg)
        assert iteration.id in out and "by cli:dana" in out

    def test_an_unreachable_database_is_exit_2(self) -> None:
        url = "postgresql+asyncpg://nobody:secret@127.0.0.1:1/none"
        config = parse_config({"database": {"url": url}}, {})
        out, err = io.StringIO(), io.StringIO()
        assert asyncio.run(evolution_cli.list_suggestions(config, out=out, err=err)) == 2
        assert out.getvalue() == "" and err.getvalue().startswith("loopgate: ")
