"""Scheduled jobs across restarts of ``loopgate serve`` (a real subprocess) on one database,
against the fake Telegram and the fake model, which outlive the processes.

- SIGTERM before a job is due: the next process fires it (caught up, within ``cron.catch_up``);
- SIGKILL while the job's answer is being written: the next process replays it, one answer;
- down past ``cron.catch_up``: the run is recorded as missed and the user is told once.
"""

from __future__ import annotations

import json
import signal
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.test_restart import EXITED, service
from tests.fakes.llm_server import FakeLLM, call, delay, text, tool_calls
from tests.fakes.telegram_server import FakeTelegram
from tests.service_support import run_cli, until
from tests.waiting import wait_until

CRON_RUN = "[Cron Job]"
NEVER_SENT = "a half-written reminder that must never reach anyone"


def write_config(tmp_path: Path, llm: FakeLLM, tg: FakeTelegram, **cron: Any) -> Path:
    data = {
        "database": {"url": f"sqlite+aiosqlite:///{tmp_path / 'loopgate.db'}"},
        "agents": {"defaults": {"workspace": str(tmp_path / "workspaces")}},
        "providers": {"openai": {"base_url": llm.base_url, "model": "fake-model"}},
        "channels": {
            "telegram": {
                "enabled": True,
                "token": tg.token,
                "api_base_url": tg.base_url,
                "polling_timeout": 1,
                "rate_limit": "off",
                "streaming": "off",
            }
        },
        "bot": {"shutdown_grace": 2},
        "cron": cron,
        "logging": {"level": "info"},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def add(schedule: str, message: str) -> Any:
    return tool_calls(call("cron", {"action": "add", "schedule": schedule, "message": message}))


def cron_runs(llm: FakeLLM) -> int:
    return sum(CRON_RUN in str(r.json["messages"][0]["content"]) for r in llm.chat_requests)


async def jobs(tmp_path: Path, config: Path) -> list[dict[str, Any]]:
    code, out, err = await run_cli(tmp_path, "cron", "list", "--json", "--config", str(config))
    assert code == 0, err
    listed: list[dict[str, Any]] = json.loads(out)
    return listed


async def schedule_reminder(tg: FakeTelegram, schedule: str) -> None:
    tg.push(tg.private_message(f"remind me {schedule} to call Anna", user_id=42))
    await tg.wait_for(lambda: tg.texts(42) == ["Will remind you."], timeout=15)


async def passed(due: str, extra: float = 0.0) -> None:
    """Until the wall clock is past ``due`` (ISO) plus ``extra`` seconds: the job came due
    (and, with ``extra``, grew that late) while no process was running."""
    at = datetime.fromisoformat(due).timestamp() + extra
    await wait_until(lambda: datetime.now(UTC).timestamp() > at, timeout=30, interval=0.05)


async def test_a_job_due_while_stopped_fires_at_the_next_start(tmp_path: Path) -> None:
    async with FakeLLM() as llm, FakeTelegram() as tg:
        llm.script(add("in 3s", "Remind the user to call Anna."), text("Will remind you."))
        llm.route(CRON_RUN, text("Time to call Anna!"))
        config = write_config(tmp_path, llm, tg)
        async with service(tmp_path, config) as svc:
            await svc.start({"telegram"})
            await schedule_reminder(tg, "in 3s")
            svc.signal(signal.SIGTERM)
            assert await svc.exited() in EXITED, svc.log()
            [job] = await jobs(tmp_path, config)
            assert job["last_run"] is None and cron_runs(llm) == 0
            await passed(job["next_run"])  # due while nothing runs

            await svc.start({"telegram"})
            await tg.wait_for(lambda: len(tg.texts(42)) == 2, timeout=15)
            await until(lambda: "cron.fired" in svc.log(), svc.log)
            await svc.stop()
            [after] = await jobs(tmp_path, config)

    assert tg.texts(42) == ["Will remind you.", "Time to call Anna!"]
    assert cron_runs(llm) == 1
    assert after["next_run"] is None and after["last_run"] == job["next_run"]
    assert after["last_outcome"] == "fired: answered"


async def test_sigkill_while_the_job_answers_is_replayed_once(tmp_path: Path) -> None:
    async with FakeLLM() as llm, FakeTelegram() as tg:
        llm.script(add("in 1s", "Remind the user to call Anna."), text("Will remind you."))
        llm.route(CRON_RUN, delay(30, text(NEVER_SENT)))
        config = write_config(tmp_path, llm, tg)
        async with service(tmp_path, config) as svc:
            await svc.start({"telegram"})
            await schedule_reminder(tg, "in 1s")
            await until(lambda: cron_runs(llm) == 1, svc.log)  # the job's answer is being written
            svc.signal(signal.SIGKILL)
            assert await svc.exited() == -signal.SIGKILL
            [job] = await jobs(tmp_path, config)
            assert job["next_run"] is None  # fired: it is an inbox entry now
            assert job["last_outcome"] == "fired: running"

            llm.route(CRON_RUN, text("Time to call Anna!"))
            await svc.start({"telegram"})
            await tg.wait_for(lambda: len(tg.texts(42)) == 2, timeout=15)
            await svc.stop()
            [after] = await jobs(tmp_path, config)

    assert tg.texts(42) == ["Will remind you.", "Time to call Anna!"]
    assert NEVER_SENT not in tg.texts(42)
    assert cron_runs(llm) == 2  # the killed run, and its replay: no third (no second firing)
    assert "replayed=1" in svc.log(), svc.log()
    assert after["last_outcome"] == "fired: answered"


async def test_down_past_catch_up_is_missed_and_told_once(tmp_path: Path) -> None:
    async with FakeLLM() as llm, FakeTelegram() as tg:
        llm.script(add("in 2s", "Remind the user to call Anna."), text("Will remind you."))
        config = write_config(tmp_path, llm, tg, catch_up="1s")
        async with service(tmp_path, config) as svc:
            await svc.start({"telegram"})
            await schedule_reminder(tg, "in 2s")
            await svc.stop()
            [job] = await jobs(tmp_path, config)
            await passed(job["next_run"], extra=2.5)  # more than cron.catch_up late

            await svc.start({"telegram"})
            await tg.wait_for(lambda: len(tg.texts(42)) == 2, timeout=15)
            await svc.stop()
            assert "cron.missed" in svc.log(), svc.log()
            # Started again: the start-up pass tells nobody this time.
            await svc.start({"telegram"})
            await until(lambda: "cron.started" in svc.log(), svc.log)
            await svc.stop()
            [after] = await jobs(tmp_path, config)

    first, notice = tg.texts(42)
    assert first == "Will remind you."
    assert notice.startswith("I missed a scheduled run due ")
    assert f"of job {job['id']} (in 2s)" in notice
    assert "Remind the user to call Anna." in notice
    assert cron_runs(llm) == 0  # told without a model run
    assert after["next_run"] is None
    assert after["last_outcome"].startswith("missed")
    assert after["last_outcome"].endswith("answered")
