"""What the libraries alone make resident, before any of Loopgate's code runs.

Each row is a fresh interpreter that imports its libraries and those of every row above it,
collects garbage and reads its own ``VmRSS``: the floor a ``loopgate serve`` process cannot go
below while it uses them. Compare the last rows with ``serve.py``'s "after start-up" figure.

    python benchmarks/memory_floor.py [--out floor.json]

Prints a table and one JSON line. A module written ``-name`` is hidden from the imports after
it, ``+name`` makes it visible again (as ``channels/telegram/_ptb.py`` does with cryptography).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# (label, modules): cumulative, in the order a Telegram-only `loopgate serve` needs them.
STEPS: list[tuple[str, list[str]]] = [
    ("interpreter", []),
    ("asyncio, ssl (any async HTTP client)", ["asyncio", "ssl"]),
    # As channels/telegram/_ptb.py imports it: without Telegram Passport's cryptography; and as
    # bot/__init__.py imports httpx and structlog: without rich and Pygments.
    (
        "python-telegram-bot (with httpx)",
        ["-cryptography", "-rich", "-pygments", "httpx", "telegram", "+cryptography"],
    ),
    # Core and the sqlite3 driver only: SQLite runs on the lanes, without the asyncio extension,
    # the ORM it imports and aiosqlite (~7 MiB more; bot/storage/_db.py).
    ("SQLAlchemy Core + sqlite3", ["sqlalchemy", "sqlalchemy.dialects.sqlite.pysqlite"]),
    (
        "pydantic, PyYAML, structlog",
        ["pydantic.main", "pydantic.types", "yaml", "structlog", "+rich", "+pygments"],
    ),
    ("uvicorn, starlette (the HTTP server)", ["uvicorn", "starlette.applications", "uvloop"]),
    ("aiohttp (model and Bot API calls)", ["aiohttp"]),
    ("Loopgate's own modules", ["bot.cli", "bot.app", "channels.telegram", "agent_core"]),
    # loopgate serve migrates in a child since issue 33; `loopgate chat` and the tests still here.
    ("Alembic (a new database's migrations)", ["alembic.command", "alembic.runtime.migration"]),
]

_PROBE = """
import gc, importlib, sys
for name in sys.argv[1:]:
    if name.startswith("-"):  # hidden from the imports that follow
        sys.modules[name[1:]] = None
    elif name.startswith("+"):  # visible again
        del sys.modules[name[1:]]
    else:
        importlib.import_module(name)
gc.collect()
for line in open("/proc/self/status"):
    if line.startswith("VmRSS:"):
        print(int(line.split()[1]))
"""


def resident_kib(modules: list[str]) -> int:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, *modules],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return int(out.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    modules: list[str] = []
    rows: list[dict[str, object]] = []
    previous = 0
    for label, extra in STEPS:
        modules = modules + extra
        # The lowest of three: page-cache and allocator noise only ever add.
        kib = min(resident_kib(modules) for _ in range(3))
        rows.append({"step": label, "rss_mib": round(kib / 1024, 1)})
        added = (kib - previous) / 1024 if previous else kib / 1024
        print(f"{label:42} {'+' if previous else ' '}{added:5.1f} MiB  = {kib / 1024:6.1f} MiB")
        previous = kib
    line = json.dumps({"floor": rows})
    print(line)
    if args.out is not None:
        args.out.write_text(line + "\n")


if __name__ == "__main__":
    main()
