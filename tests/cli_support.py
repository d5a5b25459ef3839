"""``loopgate ...`` run in-process against a temporary SQLite database (the CLI tests of
``links``, ``teams`` and ``tasks``): its output, exit code and the store it changed."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot import cli
from bot.storage import SqlOrchestrationStore, open_database


class Cli:
    """``loopgate ... --config <temp config>`` in-process, returning (code, stdout, stderr)."""

    def __init__(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.url = f"sqlite+aiosqlite:///{tmp_path / 'orchestration.db'}"
        self.config = tmp_path / "config.yaml"
        data = {
            "database": {"url": self.url},
            "agents": {"cache_ttl": 42, "list": [{"id": "support"}, {"id": "coder"}]},
        }
        self.config.write_text(yaml.safe_dump(data))
        self.capsys = capsys

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        code = cli.main([*argv, "--config", str(self.config)])
        captured = self.capsys.readouterr()
        assert "Traceback" not in captured.err
        return code, captured.out, captured.err

    def store(self, action: Any) -> Any:
        """Run ``action(store)`` on the same database, as the server would."""

        async def run() -> Any:
            async with await open_database(self.url) as db:
                return await action(SqlOrchestrationStore(db))

        return asyncio.run(run())


def table(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines()]
