"""``loopgate usage [--since 7d] [--by agent|channel|user|model] [--json]``: tokens, cost and runs
from the hourly rollup (docs/usage.md)."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

from bot.cli.database import with_database
from bot.config import Config
from bot.storage import Database
from bot.storage.usage import DIMENSIONS, SqlUsage
from bot.usage.report import DEFAULT_SINCE, BadPeriod, parse_by, parse_since, usage_report


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    usage = sub.add_parser("usage", parents=[common], help="tokens, cost and runs over a period")
    usage.add_argument("--since", default=DEFAULT_SINCE, help="7d, 24h, 2w or a date (default: 7d)")
    usage.add_argument("--by", choices=DIMENSIONS, default="model", help="the breakdown")
    usage.add_argument("--json", action="store_true", help="one JSON object, for scripts")


async def run(config: Config, args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout  # looked up now: a test may have replaced it
    now = datetime.now(UTC)
    try:
        since = parse_since(args.since, now)
        by = parse_by(args.by)
    except BadPeriod as exc:
        print(f"loopgate: {exc}", file=sys.stderr)
        return 2

    async def act(db: Database) -> int:
        report = await usage_report(SqlUsage(db), since=since, by=by, now=now)
        if args.json:
            print(json.dumps(report, ensure_ascii=False, indent=2), file=out)
        else:
            _table(report, out)
        return 0

    return await with_database(config, act)


def _table(report: dict[str, Any], out: TextIO) -> None:
    by = report["by"]
    print(f"usage since {report['since'][:16].replace('T', ' ')} UTC, by {by}", file=out)
    columns = (by.upper(), "INPUT", "CACHED", "OUTPUT", "COST USD", "RUNS")
    cells = [_cells(str(row[by]), row) for row in report["rows"]]
    cells.append(_cells("total", report))
    widths = [max(len(c[i]) for c in [columns, *cells]) for i in range(len(columns))]
    for line in [columns, *cells]:
        text = line[0].ljust(widths[0]) + "  "
        text += "  ".join(
            cell.rjust(width) for cell, width in zip(line[1:], widths[1:], strict=True)
        )
        print(text.rstrip(), file=out)
    if report["unpriced_calls"]:
        print(
            f"{report['unpriced_calls']} call(s) to models of unknown price are not in the cost "
            "(set providers.<name>.pricing)",
            file=out,
        )


def _cells(label: str, row: dict[str, Any]) -> tuple[str, ...]:
    cost = row["cost_usd"]
    return (
        label,
        f"{row['input_tokens']:,}",
        f"{row['cached_input_tokens']:,}",
        f"{row['output_tokens']:,}",
        "unknown" if cost is None else f"{cost:.4f}",
        f"{row['runs']:,}",
    )
