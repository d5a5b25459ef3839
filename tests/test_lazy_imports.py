"""What a start-up imports (issue 16, memory): libraries for features that are off stay out."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import Connection, text

from bot.storage import StorageError, open_database
from bot.storage._db import HEAD_REVISION, alembic_config, head_revision
from tests.paths import ROOT


def _scalar(sql: str) -> Callable[[Connection], Any]:
    return lambda conn: conn.scalar(text(sql))


def _imported_after(code: str, cwd: Path, *, modules: bool = False) -> set[str]:
    """The top-level packages (``modules``: the modules) in ``sys.modules`` after running
    ``code`` in a new interpreter (this one has imported everything the other tests needed)."""
    script = textwrap.dedent(code) + "\nimport sys\nprint(' '.join(sorted(sys.modules)))\n"
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=cwd,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return {name if modules else name.split(".")[0] for name in done.stdout.split()}


def test_head_revision_constant_matches_the_migrations_folder() -> None:
    # A new migration must move the constant too, or every start would import Alembic for
    # nothing (and a database at the old head would not be upgraded).
    assert head_revision() == HEAD_REVISION, "set HEAD_REVISION in bot/storage/_db.py"


async def test_a_database_at_head_opens_without_alembic(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}"
    async with await open_database(url):
        pass  # created and migrated (Alembic runs here)
    modules = _imported_after(
        f"""
        import asyncio
        from bot.storage import open_database

        async def main():
            db = await open_database({url!r})
            await db.aclose()

        asyncio.run(main())
        """,
        tmp_path,
    )
    assert "sqlalchemy" in modules
    assert not modules & {"alembic", "mako"}


async def test_a_database_behind_head_is_still_upgraded(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}"
    async with await open_database(url) as db:
        await db.run_write(lambda conn: command.downgrade(alembic_config(conn), "0005"))
    async with await open_database(url) as db:
        assert (
            await db.run_read(_scalar("SELECT version_num FROM alembic_version")) == HEAD_REVISION
        )
        assert await db.run_read(_scalar("SELECT count(*) FROM evolution_suggestions")) == 0


def test_a_server_migrates_a_new_database_in_a_child_without_alembic(tmp_path: Path) -> None:
    # loopgate serve: Alembic, Mako and the scripts (~8 MiB) would stay resident for good.
    url = f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}"
    modules = _imported_after(
        f"""
        import asyncio
        from sqlalchemy import Connection, text
        from bot.storage import open_database
        from bot.storage._db import HEAD_REVISION

        async def main():
            db = await open_database({url!r}, migrate_apart=True)
            version = await db.run_read(
                lambda conn: conn.scalar(text("SELECT version_num FROM alembic_version"))
            )
            assert version == HEAD_REVISION, version
            await db.aclose()

        asyncio.run(main())
        """,
        tmp_path,
    )
    assert "sqlalchemy" in modules
    assert not modules & {"alembic", "mako"}


async def test_a_migration_that_fails_in_the_child_fails_the_start(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    with sqlite3.connect(path) as conn:  # a revision this release does not know
        conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) PRIMARY KEY)")
        conn.execute("INSERT INTO alembic_version VALUES ('9999')")
    with pytest.raises(StorageError, match=r"migration failed: .*9999"):
        await open_database(f"sqlite+aiosqlite:///{path}", migrate_apart=True)


def test_the_http_app_without_admin_token_does_not_import_the_dashboard(tmp_path: Path) -> None:
    modules = _imported_after(
        """
        from bot.app import Loopgate
        from bot.config import Config
        from bot.http.server import create_app

        create_app(Loopgate(Config()), manage_lifespan=False)
        """,
        tmp_path,
    )
    assert "starlette" in modules
    assert not modules & {"jinja2", "alembic", "slack_bolt", "slack_sdk", "aiohttp", "anthropic"}


def test_the_dashboards_module_is_imported_only_with_admin_token(tmp_path: Path) -> None:
    # Issue 33: nor is the admin package's routing module imported without the token, while
    # /admin still answers a plain 404 (tests/bot/admin/test_app.py::TestOff).
    code = """
        from bot.app import Loopgate
        from bot.config import parse_config
        from bot.http.server import create_app

        create_app(Loopgate(parse_config(CONFIG, {})), manage_lifespan=False)
        """
    without = _imported_after(code.replace("CONFIG", "{}"), tmp_path, modules=True)
    assert "bot.http.server" in without
    assert not any(m.startswith("bot.admin") for m in without)
    token = {"admin": {"token": "t" * 32}}
    with_token = _imported_after(code.replace("CONFIG", repr(token)), tmp_path, modules=True)
    assert "bot.admin.app" in with_token


def test_a_reply_on_an_openai_model_without_redis_imports_neither_redis_nor_anthropic(
    tmp_path: Path,
) -> None:
    # Redis only with redis.url; the Anthropic provider only when configured;
    # tiktoken only when a conversation grows near a threshold
    # (tests/agent_core/test_tokens_deferred.py).
    modules = _imported_after(
        """
        import asyncio
        from agent_core.testing import ScriptedProvider, reply
        from bot.app import Loopgate
        from bot.config import parse_config
        from bot.http.server import create_app
        from channels import ChatRef, ChatType, InboundMessage, Sender

        async def main():
            config = parse_config(
                {
                    "database": {"url": "sqlite+aiosqlite:///./db.sqlite"},
                    "agents": {"defaults": {"workspace": "./workspaces"}},
                },
                {},
            )
            provider = ScriptedProvider(reply("one"), reply("two"))
            # As loopgate serve does: the new database is migrated by a child, so Alembic
            # (which imports every dialect it knows) stays out of this process.
            app = Loopgate(config, providers={"openai": provider}, migrate_apart=True)
            create_app(app, manage_lifespan=False)
            async with app:
                chat = ChatRef("web", "c1", ChatType.DIRECT)
                for n, text in enumerate(("hello", "again")):
                    message = InboundMessage(chat, str(n), Sender("u1", "U"), text)
                    job = await app.gateway.handle(message)
                    result = await job.done
                    assert result is not None and result.content in ("one", "two"), result
            assert len(provider.requests) == 2, "both turns reached the model"

        asyncio.run(main())
        """,
        tmp_path,
        modules=True,
    )
    assert "bot.pipeline.gateway" in modules and "agent_core.context_budget" in modules
    # croniter (with dateutil, about 5 MiB) only once a cron expression is scheduled.
    # trafilatura (with lxml, justext, htmldate...) only with the first HTML page web_fetch reads.
    # genai-prices (~10 MiB once its table is built) only in the child that looks a price up
    # (bot/usage/_table_lookup.py).
    heavy = {"redis", "tiktoken", "httpx_sse", "croniter", "trafilatura", "lxml", "justext"}
    heavy |= {"genai_prices"}
    # The evolution schedule (on by default, "daily") is a task of our own now: no APScheduler,
    # which stays installed for benchmarks/ab.py against older commits (pyproject dev extras).
    heavy |= {"apscheduler"}
    assert not {m.split(".")[0] for m in modules} & heavy
    # prometheus-client only once /metrics is asked; the OpenTelemetry SDK only with
    # tracing.otlp.endpoint set (bot/telemetry).
    assert not {m.split(".")[0] for m in modules} & {"prometheus_client", "opentelemetry"}
    assert "agent_core.providers._anthropic" not in modules
    assert "bot.scheduling.ticker" in modules  # the scheduler runs, without croniter
    # The evolution schedule runs; its cycle's modules wait for the first cycle or review.
    assert "bot.evolution.schedule" in modules
    evolution_cycle = {"cycle", "rules", "metrics", "apply", "guardrails", "host"}
    assert not modules & {f"bot.evolution.{name}" for name in evolution_cycle}
    # On SQLite, SQLAlchemy's Postgres dialect (~2 MiB) is never loaded (bot/storage/_sql.py),
    # nor its asyncio extension, the ORM it imports, and aiosqlite (~7 MiB): the statements run
    # on the lanes' sqlite3 connections (bot/storage/_lane.py, _table.py).
    assert "sqlalchemy.dialects.sqlite" in modules
    assert not any(m.startswith("sqlalchemy.dialects.postgresql") for m in modules)
    assert not any(m.startswith(("sqlalchemy.orm", "sqlalchemy.ext.asyncio")) for m in modules)
    assert not {m.split(".")[0] for m in modules} & {"aiosqlite"}
    # The exec tool is off by default: its sandbox backends (bwrap, docker, the host, their
    # process and cgroup helpers) load with the first sandbox built (agent_core/sandbox).
    assert "agent_core.tools.exec" in modules
    sandboxes = {m for m in modules if m.startswith("agent_core.sandbox")}
    assert sandboxes == {"agent_core.sandbox", "agent_core.sandbox.base"}


def test_a_start_imports_neither_rich_nor_pygments(tmp_path: Path) -> None:
    # structlog and httpx import them when installed (import-linter brings them into a
    # development environment): ~4.5 MiB for a traceback formatter our logs don't use and
    # httpx's command-line client (bot/__init__.py).
    modules = _imported_after(
        """
        import bot.cli, bot.app, bot.platforms.telegram, channels.telegram
        import httpx, structlog.dev
        assert structlog.dev.rich is None
        """,
        tmp_path,
    )
    assert {"structlog", "httpx", "telegram"} <= modules
    assert not modules & {"rich", "pygments"}


def test_the_cluster_imports_redis_without_opentelemetry_metrics_nor_cryptography(
    tmp_path: Path,
) -> None:
    # redis-py 8 imports OpenTelemetry's metrics SDK and cryptography whenever they are
    # installed, for its own metrics and the sync client's OCSP checks, which Loopgate never
    # uses: ~8 MiB in every clustered process (bot/cluster/_redis.py). Hidden only for that
    # import: OTLP tracing and cryptography still load later.
    modules = _imported_after(
        """
        from bot.cluster.connection import RedisLink
        import redis.asyncio
        import opentelemetry.sdk.trace  # still importable afterwards
        """,
        tmp_path,
        modules=True,
    )
    assert "redis.asyncio" in modules and "opentelemetry.sdk.trace" in modules
    assert "opentelemetry.sdk.metrics" not in modules
    assert "cryptography" not in modules


def test_cryptography_is_importable_after_the_cluster_loaded_redis(tmp_path: Path) -> None:
    modules = _imported_after(
        """
        from bot.cluster.connection import RedisLink
        from cryptography.hazmat.primitives import hashes  # the MCP SDK's OAuth needs it
        """,
        tmp_path,
        modules=True,
    )
    assert "redis.asyncio" in modules and "cryptography.hazmat.primitives.hashes" in modules


def test_a_server_imports_uvicorn_without_watchfiles_nor_websockets(tmp_path: Path) -> None:
    # uvicorn imports watchfiles for a reloader Loopgate never runs (~1.4 MiB), and its
    # websocket protocol as it loads its config (~3 MiB); here that protocol is imported with the
    # first upgrade to a websocket (bot/http/uvicorn_config.py; tests/e2e/test_service.py chats over
    # /ws through a served process).
    modules = _imported_after(
        """
        from bot.app import Loopgate
        from bot.config import Config
        from bot.http.uvicorn_config import server_config
        from bot.http.draining import DrainingServer
        from bot.http.server import create_app

        config = server_config(create_app(Loopgate(Config()), manage_lifespan=False), Config())
        config.load()
        assert callable(config.ws_protocol_class)
        """,
        tmp_path,
    )
    assert "uvicorn" in modules
    assert not modules & {"watchfiles", "websockets", "wsproto"}
