"""The evolution schedule (due times, fires cycles, stops cleanly), the
Loopgate app's ``evolution`` service, and prompt section 7 (Self-Evolution)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent_core import FILE_TOOLS, AgentSettings, RunRequest, ToolRegistry
from agent_core.bootstrap import PromptMode, Workspaces
from agent_core.prompt import PromptContext
from agent_core.self_evolution import add_self_evolution_tools, self_evolution
from bot.agents.settings import agent_settings
from bot.app import Loopgate
from bot.config import parse_config
from bot.evolution.schedule import MISFIRE_GRACE, CycleScheduler, next_fire
from bot.evolution.service import EvolutionService
from bot.storage import Database
from tests.conftest import make_config
from tests.evolution_support import evolution_config, seed_runs
from tests.fakes.llm_server import FakeLLM
from tests.waiting import wait_until


class TestDueTimes:
    THURSDAY = datetime(2026, 12, 3, tzinfo=UTC)

    def test_cron_weekdays_mean_what_crontab_means(self) -> None:
        sunday = datetime(2026, 12, 6, 3, 0, tzinfo=UTC)
        assert next_fire("0 3 * * 0", self.THURSDAY) == sunday
        assert next_fire("0 3 * * 7", self.THURSDAY) == sunday
        assert next_fire("0 3 * * 1-5", self.THURSDAY) == datetime(2026, 12, 3, 3, 0, tzinfo=UTC)
        assert next_fire("0 3 * * 6", self.THURSDAY) == datetime(2026, 12, 5, 3, 0, tzinfo=UTC)

    def test_named_schedules_and_strictly_after(self) -> None:
        assert next_fire("daily", self.THURSDAY) == datetime(2026, 12, 3, 3, 0, tzinfo=UTC)
        at_three = datetime(2026, 12, 3, 3, 0, tzinfo=UTC)
        assert next_fire("daily", at_three) == datetime(2026, 12, 4, 3, 0, tzinfo=UTC)
        assert next_fire("hourly", at_three) == datetime(2026, 12, 3, 4, 0, tzinfo=UTC)

    def test_named_schedules_fire_when_their_cron_expressions_do(self) -> None:
        # "daily" and "hourly" are worked out without croniter: the same instants as theirs.
        from croniter import croniter

        from bot.config.evolution import NAMED_SCHEDULES

        instants = [self.THURSDAY + timedelta(minutes=m) for m in range(0, 3 * 1440, 37)]
        instants += [datetime(2027, 3, 28, 2, 59, 59, 999_999, tzinfo=UTC)]
        for name, expression in NAMED_SCHEDULES.items():
            for at in instants:
                expected = croniter(expression, at).get_next(datetime)
                assert next_fire(name, at) == expected, (name, at)

    def test_an_interval_stays_on_the_grid_of_its_start(self) -> None:
        start = self.THURSDAY
        assert next_fire("6h", start, start=start) == datetime(2026, 12, 3, 6, tzinfo=UTC)
        late = datetime(2026, 12, 3, 13, 30, tzinfo=UTC)  # missed 06:00 and 12:00
        assert next_fire("6h", late, start=start) == datetime(2026, 12, 3, 18, tzinfo=UTC)
        assert next_fire("6h", late) == datetime(2026, 12, 3, 19, 30, tzinfo=UTC)


class TestScheduler:
    async def test_fires_cycles_and_stops_cleanly(self, db: Database, tmp_path: Path) -> None:
        config = evolution_config(tmp_path)
        config.evolution.schedule = "0.1s"
        service = EvolutionService(db, config)
        await seed_runs(db, 3)
        service.start()
        assert service.scheduler is not None and service.scheduler.started
        await wait_until(lambda: service.scheduler is not None and service.scheduler.fired >= 2)

        # A cycle stored the agent's metrics: the job ran the real cycle.
        async def snapshotted() -> bool:
            return bool(await service.snapshots("main"))

        await wait_until(snapshotted, 4)
        assert await snapshotted()
        await service.aclose()
        assert service.scheduler is None
        await asyncio.sleep(0.3)  # kept (negative check): no job fires after aclose
        leftovers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert not [
            t for t in leftovers if "evolution" in t.get_name() or "run_coroutine_job" in repr(t)
        ]

    async def test_a_slow_cycle_is_not_run_twice_at_once(self) -> None:
        from structlog.testing import capture_logs

        started = asyncio.Event()
        runs, cancelled = 0, False

        async def slow() -> None:
            nonlocal runs, cancelled
            runs += 1
            started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled = True
                raise

        scheduler = CycleScheduler("0.05s", slow)
        with capture_logs() as logs:
            scheduler.start()
            await asyncio.wait_for(started.wait(), 5)
            # Several due times pass while the first cycle runs.
            await wait_until(
                lambda: sum(e["event"] == "evolution.cycle_skipped" for e in logs) >= 3, 5
            )
        assert runs == 1
        assert any(e["event"] == "evolution.cycle_skipped" for e in logs)
        await scheduler.aclose()  # cancels the running cycle and waits for it
        assert cancelled

    async def test_a_cycle_missed_by_more_than_the_grace_is_skipped(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A machine suspended past a due time: the wall clock jumps, asyncio's does not."""
        from structlog.testing import capture_logs

        import bot.evolution.schedule as schedule

        now = [datetime(2026, 12, 3, 2, 59, 59, tzinfo=UTC)]

        class Clock(datetime):
            @classmethod
            def now(cls, tz: object = None) -> datetime:  # type: ignore[override]
                return now[0]

        monkeypatch.setattr(schedule, "datetime", Clock)
        monkeypatch.setattr(schedule, "RECHECK", 0.01)
        runs = 0

        async def cycle() -> None:
            nonlocal runs
            runs += 1

        scheduler = CycleScheduler("daily", cycle)
        with capture_logs() as logs:
            scheduler.start()
            # Woken 2 h after 03:00: too late for that cycle; the next is tomorrow's.
            now[0] = datetime(2026, 12, 3, 3, 0, tzinfo=UTC) + timedelta(seconds=MISFIRE_GRACE * 2)
            await wait_until(lambda: any(e["event"] == "evolution.cycle_missed" for e in logs), 5)
            assert runs == 0 and scheduler.fired == 0
            # Woken 30 min after the next one: within the grace, it runs, once.
            now[0] = datetime(2026, 12, 4, 3, 30, tzinfo=UTC)
            await wait_until(lambda: runs == 1, 5)
        await scheduler.aclose()
        assert scheduler.fired == 1 and not scheduler.started

    async def test_disabled_means_no_schedule(self, db: Database, tmp_path: Path) -> None:
        config = evolution_config(tmp_path)
        config.evolution.enabled = False
        service = EvolutionService(db, config)
        service.start()
        assert service.scheduler is None
        report = await service.run_cycle()  # a cycle on demand still works
        assert report.errors == ()


class TestApp:
    async def test_app_exposes_the_service_and_runs_its_schedule(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        config = make_config(tmp_path, llm, evolution={"schedule": "0.1s"})
        app = Loopgate(config)
        with pytest.raises(RuntimeError, match="not started"):
            _ = app.evolution
        async with app:
            assert isinstance(app.evolution, EvolutionService)
            assert app.evolution.router is not None
            scheduler = app.evolution.scheduler
            assert scheduler is not None
            await wait_until(lambda: scheduler.fired >= 1)
            assert await app.evolution.list() == []
        assert app.evolution.scheduler is None

    async def test_disabled_in_config(self, tmp_path: Path, llm: FakeLLM) -> None:
        async with Loopgate(make_config(tmp_path, llm, evolution={"enabled": False})) as app:
            assert app.evolution.scheduler is None


def _ctx(
    tmp_path: Path, settings: AgentSettings, tools: ToolRegistry | None = None
) -> PromptContext:
    spaces = Workspaces(tmp_path, settings.id, settings.agent_type)
    spaces.ensure_user_files("u1")
    files = tuple(spaces.context_files("u1", PromptMode.FULL))
    request = RunRequest("agent:main:x", "hi", "u1", channel="telegram", chat_type="direct")
    return PromptContext(
        settings,
        request,
        tools if tools is not None else ToolRegistry.of(FILE_TOOLS),
        spaces.user_dir("u1"),
        datetime(2026, 12, 3, tzinfo=UTC),
        files=files,
    )


class TestSelfEvolutionSection:
    def test_predefined_agents_get_it(self, tmp_path: Path) -> None:
        settings = AgentSettings(id="main", model="m", workspace=tmp_path, agent_type="predefined")
        tools = ToolRegistry.of(FILE_TOOLS)
        add_self_evolution_tools(tools, settings)
        text = self_evolution(_ctx(tmp_path, settings, tools))
        assert text is not None and text.startswith("## Self-Evolution")
        assert "SOUL.md" in text and "explicit feedback" in text
        assert "Never change your identity" in text
        assert "soul_update" in text

    def test_not_for_open_agents_locked_soul_or_without_the_tool(self, tmp_path: Path) -> None:
        open_agent = AgentSettings(id="main", model="m", workspace=tmp_path)
        assert self_evolution(_ctx(tmp_path, open_agent)) is None
        locked = AgentSettings(
            id="main", model="m", workspace=tmp_path, agent_type="predefined", soul_locked=True
        )
        assert self_evolution(_ctx(tmp_path, locked)) is None
        predefined = AgentSettings(
            id="main", model="m", workspace=tmp_path, agent_type="predefined"
        )
        assert self_evolution(_ctx(tmp_path, predefined, ToolRegistry())) is None

    @pytest.mark.parametrize(
        ("locked", "expected"),
        [([], False), (["soul"], True), (["SOUL.md"], True), (["max_iterations"], False)],
    )
    def test_soul_locked_comes_from_the_guardrails(self, locked: list[str], expected: bool) -> None:
        config = parse_config(
            {"agents": {"main": {"evolution_guardrails": {"locked_params": locked}}}}, {}
        )
        [agent] = config.agents.list
        assert agent_settings(config, "main", agent).soul_locked is expected

    def test_defaults_lock_every_agent(self) -> None:
        config = parse_config(
            {"agents": {"defaults": {"evolution_guardrails": {"locked_params": ["soul"]}}}}, {}
        )
        assert agent_settings(config, "main", None).soul_locked
