"""``loopgate`` with every table in the Postgres schema ``$LOOPGATE_BENCH_SCHEMA`` (cluster.py).

    LOOPGATE_BENCH_SCHEMA=bench_1a2b python benchmarks/schema_serve.py serve --config c.yaml

The same as ``python -m bot`` except that the database is opened with ``schema=`` (as the
cluster tests do in-process), so each benchmark run gets a fresh schema in a shared database
without needing the right to create databases. Without the variable it changes nothing.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bot.app
from bot.cli import main
from bot.storage._db import open_database

if __name__ == "__main__":
    schema = os.environ.get("LOOPGATE_BENCH_SCHEMA")
    if schema:
        bot.app.open_database = functools.partial(open_database, schema=schema)  # type: ignore[attr-defined]
    main()
