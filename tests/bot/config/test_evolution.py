"""``evolution:`` (the schedule and the window) and ``evolution_guardrails``
(``bot/config/evolution.py``)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.config import ConfigFileError, parse_config
from bot.config.evolution import EvolutionGuardrails, schedule_kind
from bot.evolution.schedule import next_fire


class TestConfig:
    def test_defaults(self) -> None:
        evolution = parse_config({}, {}).evolution
        assert (evolution.enabled, evolution.schedule, evolution.window) == (
            True,
            "daily",
            7 * 86_400,
        )
        guardrails = parse_config({}, {}).agents.defaults.evolution_guardrails
        assert guardrails.model_dump() == {
            "max_delta_per_cycle": 0.1,
            "min_data_points": 100,
            "rollback_on_drop_pct": 20.0,
            "locked_params": [],
        }

    @pytest.mark.parametrize("schedule", ["daily", "hourly", "0 3 * * *", "*/15 * * * 1-5", "6h"])
    def test_schedules_accepted(self, schedule: str) -> None:
        config = parse_config({"evolution": {"schedule": schedule, "window": "36h"}}, {})
        assert config.evolution.window == 36 * 3600
        now = datetime.now(UTC)
        assert next_fire(schedule, now) > now  # the scheduler can run it too

    @pytest.mark.parametrize("schedule", ["every day", "0 3 * *", "soon"])
    def test_bad_schedule_names_the_key(self, schedule: str) -> None:
        with pytest.raises(ConfigFileError, match=r"evolution\.schedule"):
            parse_config({"evolution": {"schedule": schedule}}, {})

    def test_agent_guardrails_both_forms(self) -> None:
        listed = {"list": [{"id": "a", "evolution_guardrails": {"locked_params": ["soul"]}}]}
        keyed = {"a": {"evolution_guardrails": {"locked_params": ["soul"]}}}
        for agents in (listed, keyed):
            config = parse_config({"agents": agents}, {})
            [agent] = config.agents.list
            assert agent.evolution_guardrails is not None
            assert agent.evolution_guardrails.soul_locked
        with pytest.raises(ConfigFileError, match="max_delta_per_cycle"):
            parse_config(
                {"agents": {"a": {"evolution_guardrails": {"max_delta_per_cycle": 2}}}}, {}
            )


class TestScheduleKind:
    def test_named_schedules_are_cron_at_a_fixed_time(self) -> None:
        assert schedule_kind("daily") == ("cron", "0 3 * * *")
        assert schedule_kind(" hourly ") == ("cron", "0 * * * *")

    def test_intervals_keep_their_text(self) -> None:
        assert schedule_kind("6h") == ("interval", "6h")
        assert schedule_kind(" 1.5 m ") == ("interval", "1.5 m")
        assert schedule_kind("250ms") == ("interval", "250ms")

    def test_cron_expressions_are_five_fields(self) -> None:
        assert schedule_kind("  */15 * * * MON-FRI ") == ("cron", "*/15 * * * MON-FRI")
        for bad in ("6", "0 3 * * * *", "0 3 * * ?", "", "6x"):
            with pytest.raises(ValueError, match="is not a schedule"):
                schedule_kind(bad)

    def test_the_window_reads_durations(self) -> None:
        assert parse_config({"evolution": {"window": "90m"}}, {}).evolution.window == 5400
        with pytest.raises(ConfigFileError, match=r"evolution\.window"):
            parse_config({"evolution": {"window": 0}}, {})


class TestGuardrails:
    @pytest.mark.parametrize(("locked", "soul"), [
        ([], False), (["max_iterations"], False), (["soul"], True), (["SOUL.md"], True),
        (["system_prompt", "SOUL.md"], True), (["Soul"], False),
    ])  # fmt: skip
    def test_soul_locked(self, locked: list[str], soul: bool) -> None:
        assert EvolutionGuardrails(locked_params=locked).soul_locked is soul

    @pytest.mark.parametrize(
        "bad",
        [
            {"max_delta_per_cycle": 0},
            {"min_data_points": 0},
            {"rollback_on_drop_pct": 101},
            {"rollback_on_drop_pct": 0},
            {"locked": ["soul"]},
        ],
    )
    def test_out_of_range_or_unknown(self, bad: dict[str, object]) -> None:
        key = next(iter(bad))
        with pytest.raises(ConfigFileError, match=rf"evolution_guardrails\.{key}"):
            parse_config({"agents": {"defaults": {"evolution_guardrails": bad}}}, {})
