"""``loopgate usage [--since] [--by] [--json]`` through ``main``, against a SQLite database that
holds usage as the server writes it."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from bot import cli
from bot.storage import open_database
from bot.storage.usage import SqlUsage, UsageKey, UsageTotals, hour_of


@pytest.fixture
def config(tmp_path: Path) -> Path:
    url = f"sqlite+aiosqlite:///{tmp_path / 'usage.db'}"
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"database": {"url": url}}))

    async def seed() -> None:
        now = datetime.now(UTC)
        async with await open_database(url) as db:
            usage = SqlUsage(db)
            old = now - timedelta(days=10)
            rows = [
                (now, "telegram:1", "gpt-4o-mini", UsageTotals.of_call(1000, 100, 400, 0.01, True)),
                (now, "slack:U2", "local", UsageTotals.of_call(500, 50, 0, None, True)),
                (old, "telegram:1", "gpt-4o-mini", UsageTotals.of_call(7, 7, 0, 1.0, True)),
            ]
            for at, user, model, totals in rows:
                channel = user.split(":")[0]
                usage.add(UsageKey(hour_of(at), "main", channel, user, "openai", model), totals)

    asyncio.run(seed())
    return path


def run(config: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(["usage", *argv, "--config", str(config)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_json_has_the_totals_at_the_top_and_the_breakdown_under_rows(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(config, capsys, "--json", "--by", "channel")
    assert code == 0
    report = json.loads(out)
    assert report["input_tokens"] == 1500 and report["output_tokens"] == 150
    assert report["cached_input_tokens"] == 400 and report["runs"] == 2
    assert report["cost_usd"] == pytest.approx(0.01) and report["unpriced_calls"] == 1
    assert report["by"] == "channel"
    assert [(r["channel"], r["input_tokens"], r["cost_usd"]) for r in report["rows"]] == [
        ("telegram", 1000, 0.01),
        ("slack", 500, None),
    ]


def test_since_reaches_further_back(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(config, capsys, "--json", "--since", "30d")
    assert code == 0 and json.loads(out)["runs"] == 3


def test_the_table_shows_each_row_and_the_total(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(config, capsys, "--by", "user")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("usage since ") and lines[0].endswith("UTC, by user")
    assert lines[1].split() == ["USER", "INPUT", "CACHED", "OUTPUT", "COST", "USD", "RUNS"]
    assert lines[2].split() == ["telegram:1", "1,000", "400", "100", "0.0100", "1"]
    assert lines[3].split() == ["slack:U2", "500", "0", "50", "unknown", "1"]
    assert lines[4].split() == ["total", "1,500", "400", "150", "0.0100", "2"]
    assert "1 call(s) to models of unknown price" in lines[5]


def test_a_bad_period_is_refused_with_what_is_expected(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(config, capsys, "--since", "last tuesday")
    assert code == 2
    assert "'last tuesday' is not a period like 7d, 24h, 2w or a date" in err
