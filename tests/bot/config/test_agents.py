"""The ``agents:`` section: the two ways of defining an agent, validation messages naming the
key, and ``resolve_guardrails`` merging an agent's guardrails over the defaults key by key."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from bot.config import parse_config
from bot.config.agents import (
    AgentConfig,
    AgentDefaults,
    AgentsConfig,
    ContextPruningConfig,
    resolve_guardrails,
)
from bot.config.evolution import EvolutionGuardrails
from tests.bot.config.test_root import problems


class TestAgentsById:
    def test_keyed_agents_follow_the_listed_ones(self) -> None:
        agents = AgentsConfig.model_validate(
            {
                "default": "b",
                "cache_ttl": 5,
                "list": [{"id": "a", "model": "m1"}],
                "b": {"model": "m2"},
                "c": {},
            }
        )
        assert [(a.id, a.model) for a in agents.list] == [("a", "m1"), ("b", "m2"), ("c", None)]
        assert agents.default == "b" and agents.cache_ttl == 5

    def test_no_keyed_agents_leaves_the_list_alone(self) -> None:
        agents = AgentsConfig.model_validate({"list": [{"id": "a"}]})
        assert [a.id for a in agents.list] == ["a"]
        assert AgentsConfig.model_validate({}).list == []

    def test_a_key_that_is_not_a_mapping_is_an_unknown_key(self) -> None:
        assert any(p.startswith("agents.main") for p in problems({"agents": {"main": "x"}}))

    def test_bad_agent_id_names_the_entry(self) -> None:
        msgs = problems({"agents": {"list": [{"id": "main"}, {"id": "no spaces"}]}})
        assert any(m.startswith("agents.list.1.id") for m in msgs), msgs


class TestValidation:
    @pytest.mark.parametrize(
        ("agents", "key"),
        [
            ({"defaults": {"max_iterations": 0}}, "agents.defaults.max_iterations"),
            ({"defaults": {"max_iterations": 201}}, "agents.defaults.max_iterations"),
            ({"defaults": {"context_window": 999}}, "agents.defaults.context_window"),
            ({"main": {"history_limit": 0}}, "agents.list.0.history_limit"),
            ({"main": {"input_guard": "shout"}}, "agents.list.0.input_guard"),
            (
                {"defaults": {"compaction": {"threshold": 1.5}}},
                "agents.defaults.compaction.threshold",
            ),
            (
                {"main": {"context_pruning": {"mode": "sometimes"}}},
                "agents.list.0.context_pruning.mode",
            ),
            ({"cache_ttl": -1}, "agents.cache_ttl"),
            ({"defaults": {"max_file_bytes": "lots"}}, "agents.defaults.max_file_bytes"),
        ],
    )
    def test_errors_name_the_key(self, agents: dict[str, object], key: str) -> None:
        msgs = problems({"agents": agents})
        assert any(m.startswith(f"{key}: ") for m in msgs), msgs

    def test_unknown_key_in_defaults(self) -> None:
        assert "agents.defaults.max_iteration: unknown key" in problems(
            {"agents": {"defaults": {"max_iteration": 3}}}
        )

    def test_byte_sizes_accept_units(self) -> None:
        config = parse_config(
            {
                "agents": {
                    "defaults": {"max_file_bytes": "512KiB"},
                    "a": {"workspace_max_bytes": "2MB"},
                }
            },
            {},
        )
        assert config.agents.defaults.max_file_bytes == 512 * 1024
        assert config.agents.list[0].workspace_max_bytes == 2_000_000

    def test_bare_off_turns_pruning_off(self) -> None:
        assert ContextPruningConfig.model_validate({"mode": False}).mode == "off"
        with pytest.raises(ValidationError):
            ContextPruningConfig.model_validate({"mode": True})


class TestResolveGuardrails:
    def defaults(self, **guardrails: object) -> AgentDefaults:
        return AgentDefaults.model_validate({"evolution_guardrails": guardrails})

    def test_without_an_agent_or_its_guardrails_the_defaults_hold(self) -> None:
        defaults = self.defaults(min_data_points=500)
        assert resolve_guardrails(defaults, None) == defaults.evolution_guardrails
        assert resolve_guardrails(defaults, AgentConfig(id="a")).min_data_points == 500

    def test_agent_overrides_only_the_keys_it_sets(self) -> None:
        defaults = self.defaults(min_data_points=500, locked_params=["soul"])
        agent = AgentConfig.model_validate(
            {"id": "a", "evolution_guardrails": {"max_delta_per_cycle": 0.25}}
        )
        assert resolve_guardrails(defaults, agent) == EvolutionGuardrails(
            max_delta_per_cycle=0.25,
            min_data_points=500,
            rollback_on_drop_pct=20.0,
            locked_params=["soul"],
        )

    def test_locked_params_are_replaced_not_merged(self) -> None:
        defaults = self.defaults(locked_params=["soul"])
        agent = AgentConfig.model_validate(
            {"id": "a", "evolution_guardrails": {"locked_params": ["max_iterations"]}}
        )
        assert resolve_guardrails(defaults, agent).locked_params == ["max_iterations"]
        unlocked = AgentConfig.model_validate(
            {"id": "a", "evolution_guardrails": {"locked_params": []}}
        )
        assert resolve_guardrails(defaults, unlocked).locked_params == []

    def test_defaults_are_not_changed_by_resolving(self) -> None:
        defaults = self.defaults(min_data_points=500)
        agent = AgentConfig.model_validate(
            {"id": "a", "evolution_guardrails": {"min_data_points": 7}}
        )
        assert resolve_guardrails(defaults, agent).min_data_points == 7
        assert defaults.evolution_guardrails.min_data_points == 500

    def test_from_a_parsed_config(self) -> None:
        config = parse_config(
            {
                "agents": {
                    "defaults": {"evolution_guardrails": {"rollback_on_drop_pct": 5}},
                    "main": {"evolution_guardrails": {"min_data_points": 10}},
                    "other": {},
                }
            },
            {},
        )
        by_id = {a.id: a for a in config.agents.list}
        main = resolve_guardrails(config.agents.defaults, by_id["main"])
        assert (main.min_data_points, main.rollback_on_drop_pct) == (10, 5)
        other = resolve_guardrails(config.agents.defaults, by_id["other"])
        assert (other.min_data_points, other.rollback_on_drop_pct) == (100, 5)
