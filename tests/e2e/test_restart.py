"""Nothing lost in a deploy (issue 11): ``loopgate serve`` stopped or killed mid-answer, then
started again on the same database, against the fake Telegram, Slack and Zalo servers.

The service is a real subprocess (``python -m bot serve``), signalled as a PaaS does: SIGTERM
(graceful drain for ``bot.shutdown_grace`` seconds, then what still runs goes back to the inbox)
or SIGKILL (no drain at all). The fakes run in the test's event loop and outlive the processes,
so what a user sees is what the fakes recorded over both lives of the service.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.fakes.llm_server import FakeLLM, delay, text
from tests.fakes.slack_events import message_event
from tests.fakes.slack_server import FakeSlack
from tests.fakes.telegram_server import FakeTelegram
from tests.fakes.zalo_server import FakeZalo, text_event
from tests.service_support import run_cli, start_server, until
from tests.slack_support import slack_section
from tests.telegram_support import reactions
from tests.waiting import wait_until

NEVER_SENT = "a half-written answer that must never reach anyone"
CUT_OFF = delay(30, text(NEVER_SENT))  # far longer than the grace: cut off by the stop
EXITED = (0, -signal.SIGTERM)  # uvicorn re-raises SIGTERM once it has shut down


def write_config(
    tmp_path: Path,
    llm: FakeLLM,
    *,
    tg: FakeTelegram | None = None,
    slack: FakeSlack | None = None,
    zalo: FakeZalo | None = None,
    bot: dict[str, Any] | None = None,
) -> Path:
    channels: dict[str, Any] = {}
    if tg is not None:
        channels["telegram"] = {
            "enabled": True,
            "token": tg.token,
            "api_base_url": tg.base_url,
            "polling_timeout": 1,
            "rate_limit": "off",
        }
    if slack is not None:
        channels["slack"] = slack_section(slack, "socket", rate_limit="off")
    if zalo is not None:
        channels["zalo"] = {
            "enabled": True,
            "token": zalo.token,
            "api_base_url": zalo.base_url,
            "mode": "polling",
            "polling_timeout": 1,
            "backoff_initial": 0.02,
            "backoff_max": 0.5,
        }
    data = {
        "database": {"url": f"sqlite+aiosqlite:///{tmp_path / 'loopgate.db'}"},
        "agents": {"defaults": {"workspace": str(tmp_path / "workspaces")}},
        "providers": {"openai": {"base_url": llm.base_url, "model": "fake-model"}},
        "channels": channels,
        "bot": bot or {},
        "logging": {"level": "info"},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    return path


@dataclass
class Service:
    """``loopgate serve`` started again and again on one config (and so one database)."""

    tmp_path: Path
    config: Path
    proc: asyncio.subprocess.Process | None = None
    base: str = ""
    lives: list[Path] = field(default_factory=list)
    """One log file (stderr) per process started."""

    async def start(self, channels: set[str]) -> None:
        """Start a process and wait until each of ``channels`` is up."""
        assert self.proc is None or self.proc.returncode is not None, "already running"
        log = self.tmp_path / f"serve-{len(self.lives) + 1}.log"
        self.lives.append(log)
        with log.open("wb") as stderr:
            self.proc, self.base = await start_server(
                self.tmp_path, "--config", str(self.config), stderr=stderr
            )
        up: dict[str, str] = {}

        async def all_up() -> bool:
            nonlocal up
            up = (await self.health()).json()["channels"]
            return all(up.get(name) == "up" for name in channels)

        await wait_until(
            all_up, 15, interval=0.05, what=lambda: f"channels not up: {up}\n{self.log()}"
        )

    async def health(self) -> httpx.Response:
        async with httpx.AsyncClient() as client:
            return await client.get(f"{self.base}/healthz", timeout=5)

    async def poll_health(
        self, predicate: Callable[[httpx.Response], bool], timeout: float = 5
    ) -> httpx.Response:
        """``/healthz`` polled until ``predicate`` holds for its answer."""
        seen: list[httpx.Response] = []

        async def poll() -> None:
            while not (seen and predicate(seen[-1])):
                if seen:
                    await asyncio.sleep(0.05)
                seen.append(await self.health())

        try:
            await asyncio.wait_for(poll(), timeout)
        except TimeoutError:
            last = seen[-1].text if seen else None
            raise AssertionError(f"/healthz not as expected: {last}\n{self.log()}") from None
        return seen[-1]

    def signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None and self.proc.returncode is None
        self.proc.send_signal(sig)

    async def exited(self, timeout: float = 20) -> int:
        assert self.proc is not None
        try:
            return await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            raise AssertionError(f"still running after {timeout}s\n{self.log()}") from None

    async def stop(self) -> None:
        """SIGTERM and wait: once it returns, nothing more reaches the fakes."""
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            assert await self.exited() in EXITED, self.log()

    def log(self, life: int = -1) -> str:
        return self.lives[life].read_text(errors="replace") if self.lives else ""

    async def inbox(self) -> str:
        code, out, err = await run_cli(self.tmp_path, "inbox", "--config", str(self.config))
        assert code == 0, err
        return out


@asynccontextmanager
async def service(tmp_path: Path, config: Path) -> AsyncIterator[Service]:
    svc = Service(tmp_path, config)
    try:
        yield svc
    finally:
        if svc.proc is not None and svc.proc.returncode is None:
            svc.proc.kill()
            await svc.proc.wait()


def inbox_rows(listing: str) -> list[list[str]]:
    """``loopgate inbox`` rows as [id, age, state, session, ...] (header skipped)."""
    lines = listing.strip().splitlines()
    assert lines and lines[0].split()[:3] == ["ID", "AGE", "STATE"], listing
    return [line.split() for line in lines[1:]]


def age_seconds(age: str) -> int:
    unit = {"s": 1, "m": 60, "h": 3600, "d": 86400}[age[-1]]
    return int(age[:-1]) * unit


@dataclass
class ThreeUsers:
    """One user per platform, each with a question whose answer is being written."""

    tg: FakeTelegram
    slack: FakeSlack
    zalo: FakeZalo
    tg_message: int = 0
    slack_ts: str = ""

    QUESTIONS = ("question from slack", "question from telegram", "question from zalo")

    async def ask(self) -> None:
        update = self.tg.private_message("question from telegram", user_id=42)
        self.tg_message = update["message"]["message_id"]
        self.tg.push(update)
        event = message_event("question from slack", channel="D1")
        self.slack_ts = event["ts"]
        await self.slack.push_event(event)
        # Dated now (the fake's default is 2024): replay_max_age counts from the platform date.
        now_ms = int(time.time() * 1000)
        self.zalo.push(text_event("question from zalo", chat_id="zalo-user", date=now_ms))

    def tg_reactions(self) -> list[str]:
        return reactions(self.tg, self.tg_message)

    def slack_reactions(self) -> set[str]:
        return self.slack.reactions.get(("D1", self.slack_ts), set())

    def answers(self) -> dict[str, list[str]]:
        return {
            "telegram": self.tg.texts(42),
            "slack": [p.text for p in self.slack.posts if p.channel == "D1"],
            "zalo": self.zalo.texts("zalo-user"),
        }

    def answered(self) -> bool:
        return all(self.answers().values())

    def clean(self) -> bool:
        """No in-progress reaction visible (Telegram shows the last one set; Zalo has none)."""
        last = self.tg_reactions()[-1:] or [""]
        return last == [""] and not self.slack_reactions()


PLATFORMS = {"telegram", "slack", "zalo"}


async def three_answers_being_written(svc: Service, users: ThreeUsers, llm: FakeLLM) -> None:
    await svc.start(PLATFORMS)
    await users.ask()
    await until(
        lambda: len(llm.chat_requests) == 3,
        lambda: f"three answers started: {llm.chat_requests}\n{svc.log()}",
    )
    assert sorted(str(r.messages[-1]["content"]) for r in llm.chat_requests) == list(
        users.QUESTIONS
    )
    # In progress and showing it: the thinking reaction is on the Telegram message.
    await until(lambda: users.tg_reactions()[-1:] == ["🤔"], lambda: str(users.tg_reactions()))


async def restart_answers_each_once(svc: Service, users: ThreeUsers, llm: FakeLLM) -> None:
    """Start again on the same database: each user gets exactly one complete answer."""
    before = len(llm.chat_requests)
    await svc.start(PLATFORMS)
    await until(users.answered, lambda: f"every user answered: {users.answers()}\n{svc.log()}")
    await until(users.clean, lambda: f"clean: {users.tg_reactions()}, {users.slack_reactions()}")
    # A reply is visible a moment before its delivery is recorded: wait for the records.

    async def recorded() -> dict[str, Any] | None:
        health = (await svc.health()).json()
        return None if health["inbox"]["depth"] else health

    health = await wait_until(recorded, 15, interval=0.05)
    await svc.stop()  # whatever this process would still send, it has sent now
    assert users.answers() == {
        "telegram": ["echo: question from telegram"],
        "slack": ["echo: question from slack"],
        "zalo": ["echo: question from zalo"],
    }
    # One new run per message, each asked the question once; the cut-off text never went out.
    replayed = llm.chat_requests[before:]
    assert sorted(str(r.messages[-1]["content"]) for r in replayed) == list(users.QUESTIONS)
    for request in replayed:
        questions = [m for m in request.messages if m["role"] == "user"]
        assert len(questions) == 1, request.messages
    assert health["inbox"] == {"depth": 0, "queued": 0, "running": 0}, health
    assert "replayed=3" in svc.log(), svc.log()
    assert users.clean()


@asynccontextmanager
async def three_answers_cut_short(
    tmp_path: Path, **bot: Any
) -> AsyncIterator[tuple[Service, ThreeUsers, FakeLLM]]:
    """A service on the three fake platforms, each user's answer being written (LLM delayed)."""
    async with (
        FakeLLM() as llm,
        FakeTelegram() as tg,
        FakeSlack() as slack,
        FakeZalo() as zalo,
    ):
        llm.script(CUT_OFF, CUT_OFF, CUT_OFF)
        config = write_config(tmp_path, llm, tg=tg, slack=slack, zalo=zalo, bot=bot or None)
        users = ThreeUsers(tg, slack, zalo)
        async with service(tmp_path, config) as svc:
            await three_answers_being_written(svc, users, llm)
            yield svc, users, llm


class TestDeployMidAnswer:
    async def test_sigterm_cuts_three_answers_and_the_next_process_gives_each_once(
        self, tmp_path: Path
    ) -> None:
        async with three_answers_cut_short(tmp_path, shutdown_grace=1.5) as (svc, users, llm):
            svc.signal(signal.SIGTERM)
            # Draining: a load balancer is told to stop sending here.
            health = await svc.poll_health(lambda r: r.status_code == 503)
            assert health.json()["status"] == "draining"
            assert health.json()["inbox"]["running"] == 3, health.json()
            assert await svc.exited() in EXITED, svc.log()

            # A clean stop: the cut-off runs are back in the inbox, nothing half sent, and
            # the progress reactions were removed while the channels could still talk.
            log = svc.log()
            assert log.count("run.interrupted") == 3, log
            assert "reaction.failed" not in log and "not initialized" not in log, log
            assert "Traceback" not in log, log
            assert not any(users.answers().values()), users.answers()
            assert users.clean(), (users.tg_reactions(), users.slack_reactions())
            rows = inbox_rows(await svc.inbox())
            assert [row[2] for row in rows] == ["queued"] * 3, rows
            assert all("interrupted by shutdown" in " ".join(row) for row in rows), rows

            await restart_answers_each_once(svc, users, llm)

    async def test_sigkill_mid_answer_and_the_next_process_gives_each_once(
        self, tmp_path: Path
    ) -> None:
        async with three_answers_cut_short(tmp_path) as (svc, users, llm):
            svc.signal(signal.SIGKILL)  # a crash or an OOM kill: no drain, no cleanup
            assert await svc.exited() == -signal.SIGKILL
            assert not any(users.answers().values()), users.answers()
            assert not users.clean()  # the dead process left its thinking reaction
            # The operator sees what the dead process was doing, and since when.
            rows = inbox_rows(await svc.inbox())
            assert [row[2] for row in rows] == ["running"] * 3, rows
            assert all(age_seconds(row[1]) < 60 for row in rows), rows
            sessions = sorted(row[3].split(":")[2] for row in rows)
            assert sessions == ["slack", "telegram", "zalo"], rows

            await restart_answers_each_once(svc, users, llm)


class TestGracefulStop:
    async def test_a_short_answer_finishes_before_exit_and_one_arriving_waits(
        self, tmp_path: Path
    ) -> None:
        async with FakeLLM() as llm, FakeTelegram() as tg:
            llm.script(delay(2.5, text("short answer")))
            config = write_config(tmp_path, llm, tg=tg, bot={"shutdown_grace": 20})
            async with service(tmp_path, config) as svc:
                await svc.start({"telegram"})
                tg.push(tg.private_message("quick one", user_id=7))
                await until(lambda: llm.chat_requests, svc.log)

                svc.signal(signal.SIGTERM)
                stopped_at = time.monotonic()
                await svc.poll_health(lambda r: r.status_code == 503)
                # Stored during the drain and left to the next process, not lost.
                tg.push(tg.private_message("arrived during the drain", user_id=8))
                assert await svc.exited() in EXITED, svc.log()
                # Finished, not cut off: exit came with the answer, long before the grace.
                assert tg.texts(7) == ["short answer"]
                assert time.monotonic() - stopped_at < 10
                assert tg.texts(8) == [] and len(llm.chat_requests) == 1
                assert "still_running=0" in svc.log(), svc.log()

                await svc.start({"telegram"})
                await tg.wait_for(lambda: tg.texts(8), timeout=15)
                await svc.stop()
                assert tg.texts(7) == ["short answer"]
                assert tg.texts(8) == ["echo: arrived during the drain"]
                assert len(llm.chat_requests) == 2

    async def test_a_stop_sent_during_the_drain_ends_the_answer_at_once(
        self, tmp_path: Path
    ) -> None:
        async with FakeLLM() as llm, FakeTelegram() as tg:
            llm.script(delay(600, text("never sent")))
            # A grace far beyond the wait for the exit below: only the /stop can end the drain.
            config = write_config(tmp_path, llm, tg=tg, bot={"shutdown_grace": 600})
            async with service(tmp_path, config) as svc:
                await svc.start({"telegram"})
                tg.push(tg.private_message("a long job", user_id=7))
                await until(lambda: llm.chat_requests, svc.log)

                svc.signal(signal.SIGTERM)
                await svc.poll_health(lambda r: r.status_code == 503)
                tg.push(tg.private_message("/stop", user_id=7))
                assert await svc.exited(timeout=20) in EXITED, svc.log()
                assert tg.texts(7) == ["Stopped."]
                assert "still_running=0" in svc.log(), svc.log()

                await svc.start({"telegram"})  # the stopped question is not asked again
                await svc.stop()
                assert len(llm.chat_requests) == 1 and tg.texts(7) == ["Stopped."]


class TestKillMidStream:
    """Issue 27: a process killed while it streamed left its half answer ("pause-1 pau") in the
    chat next to the survivor's full one."""

    async def test_the_next_process_removes_the_half_answer(self, tmp_path: Path) -> None:
        async with FakeLLM() as llm, FakeTelegram() as tg, FakeSlack() as slack:
            # One word a second for ten minutes: the answer is still being written when killed.
            half = text(*(f"pause-{n} " for n in range(1, 600)), pace=1.0)
            llm.script(half, half)
            path = write_config(tmp_path, llm, tg=tg, slack=slack)
            data = yaml.safe_load(path.read_text())
            # Previews posted as messages: Telegram by send + edit (no drafts), Slack with its
            # native stream.
            data["channels"]["telegram"].update(streaming="partial", drafts=False)
            data["channels"]["slack"].update(streaming="partial")
            path.write_text(yaml.safe_dump(data))
            async with service(tmp_path, path) as svc:
                await svc.start({"telegram", "slack"})
                tg.push(tg.private_message("question from telegram", user_id=42))
                await slack.push_event(message_event("question from slack", channel="D1"))

                def previews() -> tuple[list[int], list[str]]:
                    tg_ids = [k[1] for k, m in tg.messages.items() if k[0] == 42 and m.text]
                    slack_ts = [k[1] for k in slack.messages if k[0] == "D1"]
                    return tg_ids, slack_ts

                await until(lambda: all(previews()), lambda: f"{previews()}\n{svc.log()}")
                (tg_preview,), (slack_preview,) = previews()

                def recorded() -> list[str]:
                    # What the inbox holds (read as an operator's SQL would): the killed
                    # process recorded each preview as soon as it was posted.
                    with sqlite3.connect(tmp_path / "loopgate.db") as db:
                        rows = db.execute("SELECT previews FROM inbox").fetchall()
                    return [str(row[0]) for row in rows if row[0] and row[0] != "[]"]

                assert len(await wait_until(lambda: len(recorded()) == 2 and recorded(), 15)) == 2
                svc.signal(signal.SIGKILL)
                assert await svc.exited() == -signal.SIGKILL
                assert (tg.visible(42, tg_preview) or "").startswith("pause-1")
                assert (slack.text_of("D1", slack_preview) or "").startswith("pause-1")

                await svc.start({"telegram", "slack"})  # the script is empty now: it echoes

                def visible() -> tuple[list[str], list[str]]:
                    tg_shown = [
                        m.text
                        for (chat, _), m in tg.messages.items()
                        if chat == 42 and not m.deleted
                    ]
                    slack_shown = [
                        str(m.get("text")) for (ch, _), m in slack.messages.items() if ch == "D1"
                    ]
                    return tg_shown, slack_shown

                await until(
                    lambda: (
                        visible()
                        == (["echo: question from telegram"], ["echo: question from slack"])
                    ),
                    lambda: f"{visible()}\n{svc.log()}",
                )
                assert "stream.stale_preview" in svc.log()
                await svc.stop()


def long_answer() -> list[str]:
    """Three paragraphs that Telegram gets as three messages (~3.4k of its 4k each)."""
    words = ["alpha", "beta", "gamma", "delta", "epsilon"] * 95
    return [f"Part {n}: " + " ".join(f"{w}{n}" for w in words) for n in (1, 2, 3)]


class TestCrashBetweenChunks:
    async def test_delivery_resumes_at_the_chunk_it_died_on(self, tmp_path: Path) -> None:
        parts = long_answer()
        async with FakeLLM() as llm, FakeTelegram() as tg:
            llm.script(text("\n\n".join(parts)))
            config = write_config(tmp_path, llm, tg=tg)
            async with service(tmp_path, config) as svc:
                await svc.start({"telegram"})
                tg.hold("sendMessage", after=2)  # chunk 3 never gets an answer
                update = tg.private_message("tell me everything", user_id=9)
                tg.push(update)
                await tg.wait_for(lambda: tg.held, timeout=15)
                assert tg.texts(9) == parts[:2]

                svc.signal(signal.SIGKILL)
                assert await svc.exited() == -signal.SIGKILL
                rows = inbox_rows(await svc.inbox())
                assert len(rows) == 1 and rows[0][2] == "running", rows
                assert "2 part(s) delivered" in " ".join(rows[0]), rows

                await svc.start({"telegram"})
                await tg.wait_for(lambda: tg.texts(9)[-1] == parts[2], timeout=15)
                await svc.stop()
                # Chunks 1 and 2 once each, chunk 3 once, in order; the saved answer was sent,
                # so the model was not asked again.
                assert tg.texts(9) == parts
                assert len(llm.chat_requests) == 1
                assert "resume_at_part=2" in svc.log(), svc.log()
                # The reaction the dead process left was replaced, then cleared at the end.
                assert reactions(tg, update["message"]["message_id"])[-1] == ""
