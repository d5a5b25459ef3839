"""The installed commands as an operator runs them: `loopgate serve` and `loopgate chat`."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import websockets

from tests.fakes.llm_server import FakeLLM, text
from tests.fakes.telegram_server import FakeTelegram
from tests.service_support import clean_env, free_port, run_cli, start_server, until

OFFLINE_MARKER = "No LLM is configured"


class TestChatCommand:
    async def test_one_message_offline_is_honest(self, tmp_path: Path) -> None:
        code, out, err = await run_cli(tmp_path, "chat", "-m", "hello")
        assert code == 0, err
        assert OFFLINE_MARKER in out and "OPENAI_API_KEY" in out
        # Built-in defaults: the SQLite database lands under ./data/.
        assert (tmp_path / "data" / "loopgate.db").exists()

    async def test_one_message_through_a_real_model_server(self, tmp_path: Path) -> None:
        async with FakeLLM() as llm:
            llm.script(text("Hi from the model"))
            config = tmp_path / "custom.yaml"
            config.write_text(
                f"providers:\n  openai:\n    base_url: {llm.base_url}\n    model: fake-model\n"
            )
            code, out, err = await run_cli(tmp_path, "chat", "--config", str(config), "-m", "hi")
            assert code == 0, err
            assert out.strip() == "Hi from the model"
            assert llm.chat_requests[0].json["messages"][-1]["content"] == "hi"

    async def test_reads_config_yaml_from_the_working_directory(self, tmp_path: Path) -> None:
        (tmp_path / "config.yaml").write_text("channels:\n  zalo:\n    enabled: true\n")
        code, _, err = await run_cli(tmp_path, "chat", "-m", "hi")
        assert code == 2
        assert "channels.zalo.token: field required" in err


@pytest.mark.parametrize(("allowed", "secure"), [("*", True), ("10.9.8.7", False)])
async def test_server_forwarded_allow_ips_decides_whether_a_proxys_https_counts(
    tmp_path: Path, allowed: str, secure: bool
) -> None:
    # Behind a PaaS's TLS proxy the request reaches uvicorn as http: only a trusted proxy's
    # X-Forwarded-Proto makes it https, and the dashboard's session cookie Secure.
    token = "a-dashboard-token-of-32-chars-xx"
    (tmp_path / "config.yaml").write_text(
        f"admin:\n  token: {token}\nserver:\n  forwarded_allow_ips: '{allowed}'\n"
    )
    proc, base = await start_server(tmp_path)
    try:
        async with httpx.AsyncClient() as client:
            login = await client.post(
                f"{base}/admin/login",
                data={"token": token},
                headers={"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.9"},
            )
        assert login.status_code == 303
        cookie = login.headers["set-cookie"]
        assert ("; secure" in cookie.lower()) is secure
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 20)


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[str]:
    proc, base = await start_server(tmp_path)
    try:
        yield base
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 20)


class TestServe:
    async def test_healthz_and_chat_page(self, served: str) -> None:
        async with httpx.AsyncClient() as client:
            health = (await client.get(f"{served}/healthz")).json()
            page = await client.get(f"{served}/")
        assert health == {
            "status": "ok",
            "database": "ok",
            "active_runs": 0,
            "channels": {"web": "up", "cli": "up"},
            "inbox": {"depth": 0, "queued": 0, "running": 0},
        }
        assert page.status_code == 200 and "<title>Loopgate" in page.text
        assert "new WebSocket" in page.text

    async def test_web_chat_streams_events_and_the_reply(self, served: str) -> None:
        url = served.replace("http://", "ws://") + "/ws?user=tester"
        async with websockets.connect(url) as ws:
            hello = json.loads(await ws.recv())
            assert hello["type"] == "hello"
            assert hello["session_key"] == "agent:main:web:direct:tester"
            await ws.send(json.dumps({"type": "message", "text": "hello"}))
            seen: list[dict[str, object]] = []
            while True:
                frame = json.loads(await asyncio.wait_for(ws.recv(), 20))
                seen.append(frame)
                if frame["type"] == "outbound" and frame["kind"] == "message":
                    break
        events = [f["event"]["type"] for f in seen if f["type"] == "event"]  # type: ignore[index]
        assert "run.started" in events and "chunk" in events and "run.completed" in events
        assert OFFLINE_MARKER in str(seen[-1]["text"])

    async def test_bad_frames_get_a_clear_error(self, served: str) -> None:
        url = served.replace("http://", "ws://") + "/ws?user=t2"
        async with websockets.connect(url) as ws:
            await ws.recv()
            await ws.send("not json")
            frame = json.loads(await ws.recv())
            assert frame["type"] == "error" and "expected" in frame["error"]


class TestServeStartup:
    async def test_a_refused_token_is_one_clear_line_and_exit_1(self, tmp_path: Path) -> None:
        async with FakeTelegram() as tg:
            tg.fail_next("getMe", 401, "Unauthorized")
            (tmp_path / "config.yaml").write_text(
                "channels:\n  telegram:\n"
                f"    {{enabled: true, token: '{tg.token}', api_base_url: '{tg.base_url}'}}\n"
            )
            code, out, err = await run_cli(tmp_path, "serve", "--port", str(free_port()))
        assert code == 1
        assert "loopgate: cannot start: telegram rejected the bot token" in err
        assert "Traceback" not in err and tg.token not in err + out

    async def test_sigterm_closes_everything_before_exit(self, tmp_path: Path) -> None:
        proc, _ = await start_server(tmp_path)
        proc.terminate()
        _, err = await asyncio.wait_for(proc.communicate(), 20)
        # uvicorn re-raises SIGTERM after its shutdown: -15 is the normal end of a PaaS stop.
        assert proc.returncode in (0, -signal.SIGTERM)
        assert "loopgate.stopped" in err.decode()

    @pytest.mark.parametrize("ignored", [False, True], ids=["foreground", "started-ignoring"])
    async def test_ctrl_c_drains_closes_and_exits_130_without_a_traceback(
        self, tmp_path: Path, ignored: bool
    ) -> None:
        # A shell starts a background command with SIGINT ignored; uvicorn still takes it (a
        # `kill -INT` drains and stops), and the exit must still say "interrupted".
        proc, _ = await start_server(tmp_path, sigint_ignored=ignored)
        proc.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(proc.communicate(), 20)
        text = err.decode()
        assert proc.returncode == 130, text[-2000:]  # the shell's status for Ctrl-C
        assert "loopgate.stopped" in text
        assert "Traceback" not in text and "KeyboardInterrupt" not in text

    @pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
    async def test_a_signal_during_the_start_stops_it_closes_and_exits_without_a_traceback(
        self, tmp_path: Path, sig: signal.Signals
    ) -> None:
        # The start waits on Telegram's getMe (held): the signal lands in Loopgate.start,
        # before uvicorn takes the signals (bot/cli/start_signals.py). A SIGTERM used to kill
        # the process there without closing anything.
        async with FakeTelegram() as tg:
            tg.hold("getMe")
            (tmp_path / "config.yaml").write_text(
                "channels:\n  telegram:\n"
                f"    {{enabled: true, token: '{tg.token}', api_base_url: '{tg.base_url}'}}\n"
            )
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bot", "serve", "--port", str(free_port()),
                cwd=tmp_path, env=clean_env(tmp_path), stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
            )  # fmt: skip
            await until(lambda: tg.held, lambda: "getMe never came")
            proc.send_signal(sig)
            _, err = await asyncio.wait_for(proc.communicate(), 20)
        text = err.decode()
        assert proc.returncode == 128 + sig, text[-2000:]  # what a shell reports: 130, 143
        assert "loopgate.stopped" in text  # what the start had opened is closed
        assert "Traceback" not in text and "KeyboardInterrupt" not in text
        assert "Loopgate listening" not in text


class TestInteractiveChat:
    async def test_piped_conversation_is_answered_before_exit(self, tmp_path: Path) -> None:
        async with FakeLLM() as llm:
            llm.script(text("first answer"), text("second answer"))
            config = tmp_path / "c.yaml"
            config.write_text(f"providers:\n  openai:\n    base_url: {llm.base_url}\n")
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bot", "chat", "--config", str(config),
                cwd=tmp_path, env=clean_env(tmp_path), stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            out, err = await asyncio.wait_for(proc.communicate(b"hello\nagain\n"), 60)
            assert proc.returncode == 0, err.decode()
            assert "bot> first answer" in out.decode()
            assert "bot> second answer" in out.decode()
            sent = [r.json["messages"][-1]["content"] for r in llm.chat_requests]
            assert sent == ["hello", "again"]


@pytest.mark.parametrize(
    "command", [["pairing", "list"], ["inbox"], ["traces"], ["agents", "list"]]
)
async def test_one_shot_commands_say_clearly_when_the_database_is_unreachable(
    tmp_path: Path, command: list[str]
) -> None:
    (tmp_path / "config.yaml").write_text(
        'database: {url: "postgresql+asyncpg://bob:hunter2@127.0.0.1:1/nope"}\n'
    )
    code, _, err = await run_cli(tmp_path, *command)
    assert code == 2
    assert err.startswith("loopgate: cannot open database") and "Traceback" not in err
    assert "hunter2" not in err
