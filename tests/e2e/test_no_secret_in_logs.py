"""No configured secret in any log, stored trace or reply (issue 18, point 5).

``loopgate serve`` runs as a subprocess at ``logging.level: debug``, with the HTTP and platform
libraries turned up to DEBUG as well (:data:`LAUNCHER`), its stderr (every structlog line and
every stdlib record: uvicorn, httpx, python-telegram-bot, slack_sdk) going to a file, against
the fake Telegram, Slack, Zalo and LLM servers. Each platform answers one message in each of
its transports, the web chat one over ``/ws?token=``, the LLM fails once with the API key echoed
in its error (as OpenAI's "Incorrect API key provided: sk-…" does), and every webhook gets a
forged request first. Telegram can't poll and take webhooks in one process, so there are two
processes: the long-lived connections (polling, Socket Mode) and the webhooks (HTTP).

Then every place a secret could end up is searched for every configured secret, raw and
URL-encoded: the log file, every row of every table of the SQLite database plus the raw bytes of
its files, the replies the users got, the web chat's frames, the answers to forged requests and
what the model was sent. Each search also checks it saw real content (the channels started, the
model was called, httpx logged the Bot API URLs, traces were stored), so an empty log can't
pass.

``admin.token`` (the dashboard's, not built yet) belongs in :data:`SECRETS` once it exists;
``web.token`` stands for it today.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sqlite3
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import websockets
import yaml

from agent_core.tracing import SpanKind, new_trace
from bot.redaction import MASK, register_secrets
from bot.storage import Database, SqlTraceStore
from bot.storage.inbox import InboxState, SqlInbox
from channels import ChatRef, ChatType, InboundMessage, Sender
from tests.fakes.llm_server import FakeLLM, error, stream_error
from tests.fakes.slack_events import EventSender, event_callback, message_event
from tests.fakes.slack_server import FakeSlack
from tests.fakes.telegram_server import FakeTelegram
from tests.fakes.zalo_server import FakeZalo, text_event
from tests.service_support import clean_env, free_port, until
from tests.waiting import wait_until

# Realistic in shape, so any masking that keys on a format (or misses one) is tested too.
TELEGRAM_TOKEN = "7391046285:AAF3kQz9Xw-Lp2Vn8Rt5Yb7Hc1Md4Ge6JsU"
TELEGRAM_WEBHOOK_SECRET = "tgHook_Vq7Lm2Zx9Pw4Rk8NcY3"
SLACK_BOT_TOKEN = "xoxb-5120398471-6029384756102-Qm7Rz2Kp9Lw4Xn8Vt3Yb6Hc1"
SLACK_APP_TOKEN = "xapp-1-A07QK3M2B9L-7390162845730-9f2c4e6a8b1d3f5e7a9c0b2d4f6e8a1c"
SLACK_SIGNING_SECRET = "8f3a1c9e5b7d2f4a6c8e0b1d3f5a7c9e"
ZALO_TOKEN = "3920571846203958172:QvTzHpLmXkRsWnYbJcFdGaEu"
ZALO_WEBHOOK_SECRET = "zaloHook-Kd8Wq3Nr6Tz1Fm5JxB"
OPENAI_API_KEY = "sk-proj-Xa7Lq2Vm9Rt4Kp8Zw3Nb6Hd1Jf5Gs0YcT2"
ANTHROPIC_API_KEY = "sk-ant-api03-Qw7Er2Ty9Ui4Op8As3Df6Gh1Jk5Lz0XcV"
WEB_TOKEN = "web-7Hq2Ln9Vx4Rk8Pz3Mb6Tw1Fs"

SECRETS = {
    "channels.telegram.token": TELEGRAM_TOKEN,
    "channels.telegram.webhook_secret": TELEGRAM_WEBHOOK_SECRET,
    "channels.slack.bot_token": SLACK_BOT_TOKEN,
    "channels.slack.app_token": SLACK_APP_TOKEN,
    "channels.slack.signing_secret": SLACK_SIGNING_SECRET,
    "channels.zalo.token": ZALO_TOKEN,
    "channels.zalo.webhook_secret": ZALO_WEBHOOK_SECRET,
    "providers.openai.api_key": OPENAI_API_KEY,
    "providers.anthropic.api_key": ANTHROPIC_API_KEY,
    "web.token": WEB_TOKEN,
}

ERROR_REPLY = "Sorry, that failed on our side."
# What OpenAI answers a wrong key with: the key itself, in the error message.
KEY_ECHOED = f"Incorrect API key provided: {OPENAI_API_KEY}. You can find your API key at ..."


def leak_forms(secret: str) -> dict[str, str]:
    """The secret as it may appear: raw, URL-encoded (``:`` in a token is ``%3A`` in a URL)
    and, for ``<bot id>:<secret>`` tokens, the secret half alone."""
    forms = {"raw": secret, "url-encoded": quote(secret, safe="")}
    if ":" in secret:
        forms["after ':'"] = secret.split(":", 1)[1]
    return forms


def leaks(where: str, text: str) -> list[str]:
    return [
        f"{name} ({form}) in {where}"
        for name, secret in SECRETS.items()
        for form, value in leak_forms(secret).items()
        if value in text
    ]


# -- the service -------------------------------------------------------------------------------


@dataclass
class Fakes:
    llm: FakeLLM
    tg: FakeTelegram
    slack: FakeSlack
    zalo: FakeZalo


@asynccontextmanager
async def fakes() -> AsyncIterator[Fakes]:
    slack = FakeSlack(
        bot_token=SLACK_BOT_TOKEN, app_token=SLACK_APP_TOKEN, signing_secret=SLACK_SIGNING_SECRET
    )
    async with (
        FakeLLM(api_key=OPENAI_API_KEY) as llm,  # answers only a request with the real key
        FakeTelegram(token=TELEGRAM_TOKEN) as tg,
        slack,
        FakeZalo(ZALO_TOKEN) as zalo,
    ):
        yield Fakes(llm, tg, slack, zalo)


def write_config(root: Path, f: Fakes, *, webhooks: bool, log_format: str) -> Path:
    telegram: dict[str, Any] = {
        "enabled": True,
        "token": TELEGRAM_TOKEN,
        "api_base_url": f.tg.base_url,
        "polling_timeout": 1,
        "rate_limit": "off",
    }
    slack: dict[str, Any] = {
        "enabled": True,
        "mode": "socket",
        "bot_token": SLACK_BOT_TOKEN,
        "app_token": SLACK_APP_TOKEN,
        "signing_secret": SLACK_SIGNING_SECRET,
        "api_base_url": f.slack.base_url,
        "ping_interval": 0.5,
        "rate_limit": "off",
    }
    zalo: dict[str, Any] = {
        "enabled": True,
        "token": ZALO_TOKEN,
        "api_base_url": f.zalo.base_url,
        "mode": "polling",
        "polling_timeout": 1,
        "backoff_initial": 0.02,
        "backoff_max": 0.5,
    }
    if webhooks:
        telegram |= {
            "mode": "webhook",
            "webhook_url": "https://bot.example.com/telegram/webhook",
            "webhook_secret": TELEGRAM_WEBHOOK_SECRET,
        }
        slack["mode"] = "http"
        zalo |= {
            "mode": "webhook",
            "webhook_url": "https://bot.example.com/zalo/webhook",
            "webhook_secret": ZALO_WEBHOOK_SECRET,
        }
    data = {
        "database": {"url": f"sqlite+aiosqlite:///{root / 'loopgate.db'}"},
        "agents": {"defaults": {"workspace": str(root / "workspaces")}},
        "providers": {
            "openai": {
                "base_url": f.llm.base_url,
                "model": "fake-model",
                "api_key": OPENAI_API_KEY,
            },
            # Configured, never called: its key must not show up either.
            "anthropic": {"kind": "anthropic", "api_key": ANTHROPIC_API_KEY},
        },
        "channels": {"telegram": telegram, "slack": slack, "zalo": zalo},
        "web": {"token": WEB_TOKEN},
        "bot": {"error_reply": ERROR_REPLY, "typing_interval": 0.2},
        "logging": {"level": "debug", "format": log_format},
    }
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@dataclass
class Served:
    """One ``loopgate serve`` process, with everything it said to anyone."""

    root: Path
    log_file: Path
    proc: asyncio.subprocess.Process
    base: str
    said: list[tuple[str, str]] = field(default_factory=list)
    """(where, text): answers to our own requests (webhooks, health, web chat frames)."""

    def log(self) -> str:
        return self.log_file.read_text(errors="replace")

    async def stop(self) -> None:
        """SIGTERM and wait, so the log and the database are complete."""
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(self.proc.wait(), 30)


# ``loopgate serve``, with the HTTP and platform libraries at DEBUG too. Loopgate's own debug
# level leaves them at INFO (httpx at WARNING), so they would log no request URL at all; here
# they log every one, bot tokens in the path included, as they would under an operator's
# own logging setup. SQLite's driver stays quiet: it only repeats the queries.
LAUNCHER = """
import logging, sys
import bot.cli.command as command

configure = command.configure_logging

def with_libraries_at_debug(level="info", fmt="console"):
    configure(level, fmt)
    logging.getLogger().setLevel(logging.DEBUG)
    for name in ("httpx", "httpcore", "telegram", "slack_sdk", "slack_bolt", "aiohttp",
                 "websockets", "uvicorn"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    logging.getLogger("aiosqlite").setLevel(logging.INFO)

command.configure_logging = with_libraries_at_debug
raise SystemExit(command.main(sys.argv[1:]))
"""


@asynccontextmanager
async def serve(root: Path, config: Path) -> AsyncIterator[Served]:
    log_file = root / "serve.log"
    port = free_port()
    with log_file.open("wb") as stderr:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", LAUNCHER, "serve", "--config", str(config), "--port", str(port),
            cwd=root, env=clean_env(root), stdout=asyncio.subprocess.DEVNULL, stderr=stderr,
        )  # fmt: skip
    served = Served(root, log_file, proc, f"http://127.0.0.1:{port}")
    try:
        await until_up(served, {"telegram", "slack", "zalo"})
        yield served
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def until_up(served: Served, channels: set[str]) -> None:
    up: dict[str, str] = {}

    def failure() -> str:
        return f"channels not up: {up}\n{served.log()}"

    async with httpx.AsyncClient(base_url=served.base) as http:

        async def all_up() -> bool:
            nonlocal up
            if served.proc.returncode is not None:
                raise AssertionError(failure())
            with contextlib.suppress(httpx.TransportError):
                health = await http.get("/healthz")
                up = health.json()["channels"]
                if all(up.get(name) == "up" for name in channels):
                    served.said.append(("/healthz", health.text))
                    return True
            return False

        await wait_until(all_up, 20, interval=0.05, what=failure)


async def web_chat(served: Served, text: str, *, user: str) -> dict[str, Any]:
    """One message over ``/ws?token=`` (the query form uvicorn's access log records), until
    the answer (or error reply) comes back; every frame is kept for the scan."""
    address = served.base.removeprefix("http://")
    url = f"ws://{address}/ws?user={user}&token={WEB_TOKEN}"
    async with websockets.connect(url) as ws:
        served.said.append(("web chat", str(await ws.recv())))
        await ws.send(json.dumps({"type": "message", "text": text}))
        while True:
            raw = str(await asyncio.wait_for(ws.recv(), 15))
            served.said.append(("web chat", raw))
            frame = json.loads(raw)
            if frame["type"] == "outbound" and frame["kind"] == "message":
                return dict(frame)


# -- the scan ----------------------------------------------------------------------------------


def database_text(root: Path) -> tuple[str, dict[str, int]]:
    """Every row of every table, as text, and the row count per table."""
    db = sqlite3.connect(root / "loopgate.db")
    try:
        tables = [
            name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        ]
        counts: dict[str, int] = {}
        dump: list[str] = []
        for table in tables:
            rows = db.execute(f'SELECT * FROM "{table}"').fetchall()
            counts[table] = len(rows)
            dump.extend(f"{table}: {row!r}" for row in rows)
        return "\n".join(dump), counts
    finally:
        db.close()


def database_files(root: Path) -> str:
    """The raw bytes (deleted pages, the WAL), as text: a secret can sit in freed space."""
    return "\n".join(
        path.read_bytes().decode("latin-1") for path in sorted(root.glob("loopgate.db*"))
    )


def replies(f: Fakes) -> str:
    """What the users were sent, on every platform."""
    texts = [*f.tg.texts(), *(p.text for p in f.slack.posts), *f.zalo.texts()]
    return "\n".join(texts)


def model_requests(f: Fakes) -> str:
    """What the model was sent (the Authorization header carries the key by design)."""
    return "\n".join(json.dumps(r.json) for r in f.llm.requests)


def assert_no_secret(served: Served, f: Fakes, *, events: list[str]) -> None:
    log = served.log()
    db_rows, counts = database_text(served.root)
    said = "\n".join(f"{where}: {text}" for where, text in served.said)
    places = {
        "the log": log,
        "the database rows": db_rows,
        "the database files": database_files(served.root),
        "the replies to users": replies(f),
        "answers to our requests": said,
        "the model requests": model_requests(f),
    }
    # The scan saw the real thing: a debug log of every channel and the model, stored runs.
    for event in ["telegram", "slack", "zalo", "storage.trace_saved", *events]:
        assert event in log, f"{event!r} not in the log:\n{log}"
    # httpx logged the Bot API URLs (Telegram's and Zalo's), the token in them masked.
    assert f"/bot{MASK}/sendMessage" in log, log
    assert counts.get("traces", 0) >= 4 and counts.get("spans", 0) >= 4, counts
    assert ERROR_REPLY in places["the replies to users"] + said
    found = [leak for where, text in places.items() for leak in leaks(where, text)]
    assert not found, "\n".join(found)


# -- the two processes -------------------------------------------------------------------------


def now_ms() -> int:
    return int(time.time() * 1000)  # Zalo's date: replay_max_age counts from it


class TestNoSecretLeaks:
    async def test_polling_socket_mode_and_web_chat(self, tmp_path: Path) -> None:
        async with fakes() as f:
            config = write_config(tmp_path, f, webhooks=False, log_format="console")
            async with serve(tmp_path, config) as served:
                f.tg.push(f.tg.private_message("hello from telegram", user_id=42))
                await f.slack.push_event(message_event("hello from slack", channel="D1"))
                f.zalo.push(text_event("hello from zalo", chat_id="zalo-user", date=now_ms()))
                answered = await web_chat(served, "hello from the web", user="web-1")
                assert answered["text"] == "echo: hello from the web"
                await until(
                    lambda: f.tg.texts(42) and f.slack.posts and f.zalo.texts("zalo-user"),
                    lambda: f"answers: {replies(f)!r}\n{served.log()}",
                )
                # The model refuses the key and echoes it; the user gets the error reply.
                f.llm.script(error(401, KEY_ECHOED))
                f.tg.push(f.tg.private_message("this one fails", user_id=43))
                await until(lambda: f.tg.texts(43), served.log)
                assert f.tg.texts(43) == [ERROR_REPLY]
                await served.stop()
            assert f.tg.texts(42) == ["echo: hello from telegram"]
            assert [p.text for p in f.slack.posts] == ["echo: hello from slack"]
            assert f.zalo.texts("zalo-user") == ["echo: hello from zalo"]
            assert_no_secret(served, f, events=["run.error_reply", "web"])

    async def test_webhooks_http_events_and_forged_requests(self, tmp_path: Path) -> None:
        async with fakes() as f:
            config = write_config(tmp_path, f, webhooks=True, log_format="json")
            async with (
                serve(tmp_path, config) as served,
                httpx.AsyncClient(base_url=served.base) as http,
            ):
                assert f.tg.webhook is not None and f.zalo.webhook["url"]
                update = {"update_id": f.tg.new_update_id(), **f.tg.private_message("hi tg")}
                slack = EventSender(http, SLACK_SIGNING_SECRET)
                payload = event_callback(message_event("hi slack", channel="D1"))
                hook = f"{served.base}/zalo/webhook"
                zalo_event = text_event("hi zalo", chat_id="zalo-user", date=now_ms())

                # Forged first: wrong secrets, wrong signature, a wrong web token. All refused.
                forged = [
                    await http.post(
                        "/telegram/webhook",
                        json=update,
                        headers={"X-Telegram-Bot-Api-Secret-Token": "forged-secret-123"},
                    ),
                    await slack.send(payload, secret="forged-signing-secret"),
                    await f.zalo.post_webhook(hook, zalo_event, secret="forged-secret-123"),
                    await http.post("/login", data={"token": "guessed-token"}),
                ]
                for response in forged:
                    served.said.append((f"forged {response.url.path}", response.text))
                assert [r.status_code for r in forged] == [401, 401, 401, 401]

                headers = {"X-Telegram-Bot-Api-Secret-Token": TELEGRAM_WEBHOOK_SECRET}
                genuine = [
                    await http.post("/telegram/webhook", json=update, headers=headers),
                    await slack.send(payload),
                    await f.zalo.post_webhook(hook, zalo_event, secret=ZALO_WEBHOOK_SECRET),
                ]
                for response in genuine:
                    served.said.append((response.url.path, response.text))
                assert [r.status_code for r in genuine] == [200, 200, 200]
                await until(
                    lambda: f.tg.texts() and f.slack.posts and f.zalo.texts(),
                    lambda: f"answers: {replies(f)!r}\n{served.log()}",
                )
                # An error inside the model's stream, key echoed, seen by the web chat (which
                # also gets the run's events, error text included).
                f.llm.script(stream_error(KEY_ECHOED))
                failed = await web_chat(served, "this one fails", user="web-2")
                assert failed["text"] == ERROR_REPLY
                await served.stop()
            assert f.tg.texts() == ["echo: hi tg"]
            assert [p.text for p in f.slack.posts] == ["echo: hi slack"]
            assert f.zalo.texts() == ["echo: hi zalo"]
            events = ["run.error_reply", "telegram.webhook", "zalo.webhook_set"]
            assert_no_secret(served, f, events=events)


class TestStoredErrorTextIsMasked:
    """The providers mask their own key in their errors; the stores don't rely on it. Any
    configured secret in an error (a key echoed by a provider that doesn't mask it, a URL with
    a bot token in an exception) is masked when a trace or an inbox reason is written."""

    async def test_traces_and_inbox_reasons(self, db: Database) -> None:
        register_secrets([OPENAI_API_KEY, TELEGRAM_TOKEN])
        quoted = f"{KEY_ECHOED} (POST https://api.telegram.org/bot{TELEGRAM_TOKEN}/sendMessage)"
        trace = new_trace("run-1", "agent:main:web:direct:u1", "main")
        span = trace.start_span(SpanKind.LLM, "openai", model="fake-model")
        span.end(error=True, error_message=quoted, tried=[{"url": quoted}])
        trace.finish("error", output=quoted, error=quoted)
        await SqlTraceStore(db).save_trace(trace)

        inbox = SqlInbox(db, owner="p1")
        chat = ChatRef(channel="web", chat_id="u1", chat_type=ChatType.DIRECT)
        msg = InboundMessage(chat=chat, message_id="m1", sender=Sender(id="u1"), text="hi")
        entry = await inbox.add(msg, session_key="agent:main:web:direct:u1", agent_id="main")
        await inbox.finish(entry, InboxState.FAILED, f"run: ProviderError: {quoted}")

        [stored] = await SqlTraceStore(db).recent_traces()
        text = json.dumps(
            [stored.error, stored.output_preview, [s.attributes for s in stored.spans]]
        )
        reason = (await inbox.get(entry)).reason  # type: ignore[union-attr]
        assert text.count(MASK) == 8 and reason is not None and reason.count(MASK) == 2, text
        assert not leaks("the stored trace", text) and not leaks("the inbox", reason)
