"""Several ``loopgate serve`` OS processes as one service (issue 17), for tests.

Each process is a real subprocess started from a generated ``config.yaml``: one Postgres schema
and one Redis key prefix shared by all, its own HTTP port, Telegram (webhook or polling) pointed
at the fake Bot API. The fakes (:class:`ClusterLLM`, ``FakeTelegram``) run in the test's event
loop over real HTTP on 127.0.0.1 and outlive the processes, so what a user sees is what the
fakes recorded, whichever process sent it::

    async with ClusterLLM() as llm, FakeTelegram() as tg:
        cluster = ServeCluster(workdir, llm=llm, tg=tg, redis_url=..., key_prefix=...,
                               schema=...)
        await cluster.start()                       # 3 processes, each /healthz 200, channel up
        await cluster.send(1, tg.private_message("hi", user_id=7))   # webhook to process 1
        holder = await cluster.holder_of(session)   # which process runs that session now
        await holder.kill()                         # SIGKILL: no drain, no cleanup
        await cluster.aclose()

The one thing not as an operator runs it: a process opens the test's Postgres schema (there is
no config key for a schema), by :data:`LAUNCHER`, which wraps ``open_database`` as
``tests/cluster_support.py``'s ``shared_schema`` does in-process, then runs the real CLI.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml
from redis.asyncio import Redis
from sqlalchemy import Connection, text

from bot.storage import Database, open_database
from tests.fakes.llm_server import FakeLLM, ScriptItem
from tests.fakes.telegram_server import FakeTelegram
from tests.service_support import clean_env, free_port
from tests.storage_support import drop_schema

SOURCE = Path(os.environ.get("CLUSTER_TEST_SOURCE") or Path(__file__).resolve().parents[1])
"""Where the processes import Loopgate from: this checkout, or (``CLUSTER_TEST_SOURCE``) another
one, e.g. an earlier commit's tree, to see these tests fail without the feature under test."""
WEBHOOK_SECRET = "cluster-test-secret"
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
SCHEMA_ENV = "CLUSTER_TEST_SCHEMA"
EXITED = (0, -signal.SIGTERM)  # uvicorn re-raises SIGTERM once it has shut down

LAUNCHER = f"""
import functools, os, sys
import bot.app
from bot.storage import open_database
bot.app.open_database = functools.partial(open_database, schema=os.environ[{SCHEMA_ENV!r}])
from bot.cli import main
sys.argv[0] = "loopgate"
raise SystemExit(main())
"""
"""``python -c LAUNCHER serve ...``: ``loopgate serve`` on the schema named by the environment."""


async def until(
    predicate: Callable[[], object | Awaitable[object]],
    what: Callable[[], str],
    timeout: float = 15,
    interval: float = 0.02,
) -> None:
    """Poll ``predicate`` (sync or async) until it holds; on timeout say ``what()``."""

    async def check() -> bool:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        return bool(value)

    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not met in {timeout}s: {what()}")
        await asyncio.sleep(interval)


class ClusterLLM(FakeLLM):
    """The fake LLM, with answers chosen by the user's message: with several processes running
    at once, the order of a shared script means nothing. :meth:`when` registers an answer for
    the next request whose last user message contains ``marker`` (used once); anything else is
    echoed (``echo: <message>``)."""

    def __init__(self) -> None:
        super().__init__()
        self._by_marker: list[tuple[str, ScriptItem]] = []

    def when(self, marker: str, item: ScriptItem) -> None:
        self._by_marker.append((marker, item))

    def asked(self, marker: str) -> int:
        """How many chat requests had ``marker`` in their last user message."""
        return sum(marker in last_user_text(r.json) for r in self.chat_requests)

    def _next_item(self, body: dict[str, Any]) -> ScriptItem:
        question = last_user_text(body)
        for index, (marker, item) in enumerate(self._by_marker):
            if marker in question:
                del self._by_marker[index]
                return item
        return super()._next_item(body)


def last_user_text(body: Any) -> str:
    messages = body.get("messages") if isinstance(body, dict) else None
    for message in reversed(messages or []):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


class PrivateRedis:
    """A ``redis-server`` of the test's own (no persistence), so it can be killed and started
    again on the same port without touching the shared one."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.process: subprocess.Popen[bytes] | None = None

    @staticmethod
    def available() -> bool:
        return shutil.which("redis-server") is not None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def launch(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""],
            cwd=self.workdir,
            stdout=subprocess.DEVNULL,
        )

    async def start(self) -> None:
        """Start it (again, on the same port) and wait until it listens."""
        self.launch()

        def listening() -> bool:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.1).close()
            except OSError:
                return False
            return True

        await until(listening, lambda: f"redis-server on port {self.port}", timeout=10)

    def stop(self) -> None:
        """SIGKILL: everything it held (leases, run hashes) is gone."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


@dataclass
class ServeProcess:
    """One ``loopgate serve`` of the cluster."""

    index: int
    port: int
    log_path: Path
    proc: asyncio.subprocess.Process | None = None
    process_id: str = ""
    """Its cluster identity (``host:pid:random``), from ``/healthz``."""
    http: httpx.AsyncClient | None = None
    """The cluster's client (a new one per request would cost an SSL context each)."""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def health(self) -> dict[str, Any]:
        if self.http is None:
            async with httpx.AsyncClient() as client:
                response = await client.get(f"{self.base_url}/healthz", timeout=5)
        else:
            response = await self.http.get(f"{self.base_url}/healthz", timeout=5)
        body: dict[str, Any] = response.json()
        return body

    def local_ports(self, remote_port: int) -> set[int]:
        """The local TCP ports of its connections to ``remote_port`` on this host (Linux
        ``/proc``): which of a fake server's callers it is. Empty where ``/proc`` can't tell."""
        inodes: set[str] = set()
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{self.pid}/fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(f"/proc/{self.pid}/fd/{fd}")
                    if target.startswith("socket:["):
                        inodes.add(target[len("socket:[") : -1])
        ports: set[int] = set()
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with contextlib.suppress(OSError), open(table) as rows:
                next(rows, None)  # the header
                for row in rows:
                    fields = row.split()
                    if len(fields) > 9 and fields[9] in inodes:
                        local, remote = (int(a.rsplit(":", 1)[1], 16) for a in fields[1:3])
                        if remote == remote_port:
                            ports.add(local)
        return ports

    def signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None and self.proc.returncode is None, "not running"
        self.proc.send_signal(sig)

    async def kill(self) -> None:
        """SIGKILL (a crash, an OOM kill): nothing is released or finished."""
        self.signal(signal.SIGKILL)
        assert await self.exited() == -signal.SIGKILL

    async def terminate(self, timeout: float = 30) -> int:
        """SIGTERM, as a PaaS stops a process, and wait for the exit code."""
        self.signal(signal.SIGTERM)
        return await self.exited(timeout)

    async def exited(self, timeout: float = 30) -> int:
        assert self.proc is not None
        try:
            return await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            raise AssertionError(f"process {self.index} still runs\n{self.log()}") from None

    def log(self, tail: int = 60) -> str:
        if not self.log_path.exists():
            return ""
        lines = self.log_path.read_text(errors="replace").splitlines()
        return f"--- process {self.index} (last {tail} lines) ---\n" + "\n".join(lines[-tail:])


@dataclass
class ServeCluster:
    """``size`` processes of ``loopgate serve`` on one config: one schema, one key prefix."""

    workdir: Path
    llm: FakeLLM
    tg: FakeTelegram
    redis_url: str
    key_prefix: str
    schema: str
    postgres_url: str
    size: int = 3
    mode: str = "webhook"
    lease_seconds: float = 2.0
    telegram: dict[str, Any] = field(default_factory=dict)
    """Extra ``channels.telegram`` keys (e.g. ``rate_limit``)."""
    bot: dict[str, Any] = field(default_factory=dict)
    """Extra ``bot`` keys."""
    extra_channels: dict[str, dict[str, Any]] = field(default_factory=dict)
    """More ``channels.<name>`` sections (Slack, Zalo); each must be up before a process is
    ready."""
    sections: dict[str, Any] = field(default_factory=dict)
    """Further top-level sections (e.g. ``cron``)."""
    processes: list[ServeProcess] = field(default_factory=list)
    _db: Database | None = None
    _http: httpx.AsyncClient | None = None

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def config_path(self) -> Path:
        return self.workdir / "config.yaml"

    def write_config(self) -> Path:
        telegram: dict[str, Any] = {
            "enabled": True,
            "token": self.tg.token,
            "api_base_url": self.tg.base_url,
            "mode": self.mode,
            "polling_timeout": 1,
            # One sendMessage per answer, no previews or reactions: what a user sees is
            # tg.texts(chat), and the processes spend their CPU on the work under test.
            "streaming": "off",
            "reactions": False,
            "rate_limit": "off",
            "group_policy": "open",
        }
        if self.mode == "webhook":
            telegram["webhook_url"] = "https://loopgate.example/telegram/webhook"
            telegram["webhook_secret"] = WEBHOOK_SECRET
        telegram.update(self.telegram)
        data = {
            "database": {"url": self.postgres_url},
            "redis": {"url": self.redis_url},
            "cluster": {"lease_seconds": self.lease_seconds, "key_prefix": self.key_prefix},
            "agents": {"defaults": {"workspace": str(self.workdir / "workspaces")}},
            "providers": {"openai": {"base_url": self.llm.base_url, "model": "fake-model"}},
            "channels": {"telegram": telegram, **self.extra_channels},
            "bot": {
                "sender_rate_limit": "off",
                # Each message its own turn and its own answer (not merged with the ones that
                # arrived during the previous run), so "each answered once" is well defined.
                "queue_mode": "followup",
                "shutdown_grace": 5,
                **self.bot,
            },
            "logging": {"level": "info"},
            **self.sections,
        }
        self.config_path.write_text(yaml.safe_dump(data, allow_unicode=True))
        return self.config_path

    async def start(self, timeout: float = 40) -> None:
        """Migrate the schema once (so the processes skip Alembic), then start every process
        and wait until each answers ``/healthz`` with Redis ok and Telegram up."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.write_config()
        self._db = await open_database(self.postgres_url, schema=self.schema)
        self.processes = [
            ServeProcess(i, free_port(), self.workdir / f"serve-{i}.log", http=self.http)
            for i in range(self.size)
        ]
        await asyncio.gather(*(self._launch(p) for p in self.processes))
        await asyncio.gather(*(self.wait_ready(p, timeout) for p in self.processes))

    async def _launch(self, process: ServeProcess) -> None:
        env = clean_env(self.workdir)
        env["PYTHONPATH"] = str(SOURCE)
        env[SCHEMA_ENV] = self.schema
        with process.log_path.open("ab") as stderr:
            process.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", LAUNCHER,
                "serve", "--config", str(self.config_path), "--port", str(process.port),
                cwd=self.workdir, env=env,
                stdout=asyncio.subprocess.DEVNULL, stderr=stderr,
            )  # fmt: skip

    async def restart(self, process: ServeProcess, timeout: float = 40) -> None:
        """Start a process again in the slot of a dead one (same port, log appended)."""
        assert not process.alive
        await self._launch(process)
        await self.wait_ready(process, timeout)

    async def wait_ready(self, process: ServeProcess, timeout: float = 40) -> None:
        last: dict[str, Any] = {}

        async def ready() -> bool:
            nonlocal last
            if not process.alive:
                raise AssertionError(f"process {process.index} exited\n{process.log()}")
            try:
                last = await process.health()
            except (httpx.TransportError, ValueError):
                return False
            up = last.get("channels", {})
            names = ("telegram", *self.extra_channels)
            return last.get("redis") == "ok" and all(up.get(name) == "up" for name in names)

        await until(ready, lambda: f"{last}\n{process.log()}", timeout=timeout, interval=0.1)
        process.process_id = str(last["process"])
        assert process.process_id.split(":")[1] == str(process.pid), last

    async def aclose(self) -> None:
        """SIGTERM every live process (SIGKILL after 30 s), then drop the schema and the keys."""

        async def stop(process: ServeProcess) -> None:
            if not process.alive:
                return
            assert process.proc is not None
            process.proc.terminate()
            try:
                await asyncio.wait_for(process.proc.wait(), 30)
            except TimeoutError:
                process.proc.kill()
                await process.proc.wait()

        await asyncio.gather(*(stop(p) for p in self.processes), return_exceptions=True)
        if self._http is not None:
            await self._http.aclose()
            self._http = None
        if self._db is not None:
            await drop_schema(self._db, self.schema, if_exists=True)
            await self._db.aclose()
            self._db = None
        with contextlib.suppress(Exception):
            client: Redis = Redis.from_url(self.redis_url)
            try:
                keys = [key async for key in client.scan_iter(match=f"{self.key_prefix}:*")]
                if keys:
                    await client.delete(*keys)
            finally:
                await client.aclose()

    @property
    def http(self) -> httpx.AsyncClient:
        """One client for every request to the processes: creating one costs an SSL context,
        which in the test's event loop (where the fakes run too) slows everything down."""
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=200))
        return self._http

    def logs(self, tail: int = 60) -> str:
        return "\n".join(p.log(tail) for p in self.processes)

    @property
    def alive(self) -> list[ServeProcess]:
        return [p for p in self.processes if p.alive]

    def by_process_id(self, process_id: str) -> ServeProcess:
        for process in self.processes:
            if process.process_id == process_id:
                return process
        raise AssertionError(f"no process {process_id!r} in {[p.process_id for p in self]}")

    def __iter__(self) -> Any:
        return iter(self.processes)

    # -- Telegram in -----------------------------------------------------------------------

    async def send(self, index: int, update: dict[str, Any]) -> int:
        """POST ``update`` (a ``FakeTelegram`` builder's result) with a fresh ``update_id`` to
        process ``index``'s webhook, as Telegram does; asserts it was taken (200) and returns
        the update id."""
        update_id = self.tg.new_update_id()
        response = await self.post(index, update, update_id)
        assert response.status_code == 200, (response.status_code, response.text)
        return update_id

    async def post(self, index: int, update: dict[str, Any], update_id: int) -> httpx.Response:
        """One webhook delivery of ``update`` to process ``index``, with the secret header."""
        return await self.http.post(
            f"{self.processes[index].base_url}/telegram/webhook",
            json={"update_id": update_id, **update},
            headers={SECRET_HEADER: WEBHOOK_SECRET},
        )

    # -- what the processes hold -----------------------------------------------------------

    async def runs(self) -> list[dict[str, Any]]:
        """Every run the cluster mirrors in Redis (``<prefix>:runs:<process>`` hashes): run id,
        session key, requester, owner process."""
        client: Redis = Redis.from_url(self.redis_url)
        try:
            found: list[dict[str, Any]] = []
            async for key in client.scan_iter(match=f"{self.key_prefix}:runs:*"):
                with contextlib.suppress(Exception):  # the pub/sub channel name is no hash
                    for raw in (await client.hgetall(key)).values():
                        found.append(json.loads(raw))
            return found
        finally:
            await client.aclose()

    async def holders_of(self, session_key: str) -> list[ServeProcess]:
        """The processes running a turn of ``session_key`` now."""
        owners = {r["owner"] for r in await self.runs() if r.get("session_key") == session_key}
        return [self.by_process_id(owner) for owner in sorted(owners)]

    async def holder_of(self, session_key: str, timeout: float = 15) -> ServeProcess:
        """The one process running ``session_key``, once there is one."""
        holders: list[ServeProcess] = []

        async def one() -> bool:
            nonlocal holders
            holders = await self.holders_of(session_key)
            return len(holders) == 1

        await until(one, lambda: f"holders of {session_key}: {holders}", timeout=timeout)
        return holders[0]

    async def inbox(self, session_key: str | None = None) -> list[dict[str, Any]]:
        """Rows of the shared ``inbox`` table (id, session_key, state, reason, owner, parts)."""
        assert self._db is not None
        query = "SELECT id, session_key, state, reason, owner, parts FROM inbox"
        params: dict[str, Any] = {}
        if session_key is not None:
            query += " WHERE session_key = :key"
            params["key"] = session_key

        def read(conn: Connection) -> list[dict[str, Any]]:
            rows = conn.execute(text(query + " ORDER BY id"), params).mappings().all()
            return [dict(row) for row in rows]

        return await self._db.run_read(read)

    @property
    def db(self) -> Database:
        """The shared schema, as the processes see it."""
        assert self._db is not None, "not started"
        return self._db

    async def pending(self) -> list[dict[str, Any]]:
        return [r for r in await self.inbox() if r["state"] in ("queued", "running")]


def dm_session(user_id: int, agent: str = "main") -> str:
    return f"agent:{agent}:telegram:direct:{user_id}"


def topic_session(chat_id: int, thread_id: int, agent: str = "main") -> str:
    return f"agent:{agent}:telegram:group:{chat_id}:topic:{thread_id}"


def texts(tg: FakeTelegram, chat_id: int, thread_id: int | None = None) -> list[str]:
    """What the chat (or forum topic) got, in the order Telegram received it."""
    return [
        p["text"]
        for p in tg.sent
        if int(p["chat_id"]) == chat_id
        and (thread_id is None or p.get("message_thread_id") == thread_id)
    ]
