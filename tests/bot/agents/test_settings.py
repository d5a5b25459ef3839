"""An agent's resolved settings (``bot/agents/settings.py``): its definition over
``agents.defaults``, its providers (a removed one falls back to the default with a warning),
and the per-key merge of pruning, compaction and its memory flush."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from agent_core import MemoryFlushSettings
from agent_core.orchestration import OrchestrationProfile
from bot.agents.settings import agent_settings
from bot.config import AgentConfig, Config, parse_config

PROVIDERS = {
    "default": "openai",
    "openai": {"model": "gpt-small", "max_tokens": 500},
    "local": {"base_url": "http://127.0.0.1:9/v1", "model": "llama", "max_tokens": 900},
}


def config(**sections: Any) -> Config:
    return parse_config({"providers": PROVIDERS, **sections}, {})


class TestProviders:
    def test_defaults_only(self) -> None:
        settings = agent_settings(config(), "main", None)
        assert (settings.id, settings.provider, settings.model) == ("main", "openai", "gpt-small")
        assert settings.max_tokens == 500
        assert (settings.fallback_provider, settings.fallback_model) == (None, None)
        assert settings.max_iterations == 20 and settings.workspace == Path("data/workspaces")
        assert settings.orchestration == OrchestrationProfile()

    def test_the_agent_over_the_defaults(self) -> None:
        agent = AgentConfig(
            id="coder", provider="local", max_iterations=7, system_prompt="Code.",
            fallback_provider="openai", workspace=Path("/w"),
        )  # fmt: skip
        settings = agent_settings(config(), "coder", agent)
        assert (settings.provider, settings.model, settings.max_tokens) == ("local", "llama", 900)
        assert (settings.max_iterations, settings.system_prompt) == (7, "Code.")
        assert settings.workspace == Path("/w")
        # the fallback provider's own model unless the agent names one
        assert (settings.fallback_provider, settings.fallback_model) == ("openai", "gpt-small")
        named = agent.model_copy(update={"fallback_model": "gpt-big"})
        assert agent_settings(config(), "coder", named).fallback_model == "gpt-big"

    def test_a_removed_provider_falls_back_to_the_default_and_its_model(self) -> None:
        agent = AgentConfig(id="old", provider="gone", model="gone-model", max_iterations=9)
        with capture_logs() as logs:
            settings = agent_settings(config(), "old", agent)
        assert (settings.provider, settings.model) == ("openai", "gpt-small")
        assert settings.max_iterations == 9  # the rest of the definition still applies
        [warning] = [e for e in logs if e["event"] == "agent.unknown_provider"]
        assert (warning["provider"], warning["using"], warning["log_level"]) == (
            "gone", "openai", "warning"
        )  # fmt: skip

    def test_a_removed_fallback_provider_means_no_fallback(self) -> None:
        agent = AgentConfig(id="a", fallback_provider="gone", fallback_model="x")
        with capture_logs() as logs:
            settings = agent_settings(config(), "a", agent)
        assert settings.fallback_provider is None
        assert settings.fallback_model == "x"
        assert [e["provider"] for e in logs if e["event"] == "agent.unknown_provider"] == ["gone"]

    def test_profile_and_skill_paths(self, tmp_path: Path) -> None:
        profile = OrchestrationProfile(mode="delegate")
        c = config(skills={"paths": [str(tmp_path)]})
        settings = agent_settings(c, "main", None, profile)
        assert settings.orchestration is profile
        assert settings.skill_paths == (tmp_path,)


class TestContext:
    def test_pruning_and_compaction_merge_key_by_key(self) -> None:
        c = config(
            agents={
                "defaults": {
                    "context_pruning": {"keep_last_assistants": 5, "soft_trim_ratio": 0.4},
                    "compaction": {"threshold": 0.6, "memory_flush": {"window": 20}},
                }
            }
        )
        agent = AgentConfig.model_validate(
            {
                "id": "a",
                "context_pruning": {"keep_last_assistants": 1},
                "compaction": {"min_messages": 10, "memory_flush": {"enabled": False}},
            }
        )
        settings = agent_settings(c, "a", agent)
        assert (settings.pruning.keep_last_assistants, settings.pruning.soft_trim_ratio) == (
            1, 0.4
        )  # fmt: skip
        compaction = settings.compaction
        assert (compaction.threshold, compaction.min_messages) == (0.6, 10)
        flush = compaction.memory_flush
        assert (flush.enabled, flush.window) == (False, 20)
        assert flush.prompt == MemoryFlushSettings().prompt  # unset: agent_core's own

    def test_an_agent_without_its_own_keeps_the_defaults(self) -> None:
        c = config(agents={"defaults": {"compaction": {"memory_flush": {"prompt": "Save it."}}}})
        settings = agent_settings(c, "a", AgentConfig(id="a", compaction=None))
        assert settings.compaction.memory_flush.prompt == "Save it."
        assert settings.pruning.keep_last_assistants == 3

    def test_owners_guard_and_soul(self) -> None:
        c = config(agents={"defaults": {"owner_ids": ["u1"], "input_guard": "warn"}})
        plain = agent_settings(c, "a", None)
        assert (plain.owner_ids, plain.input_guard, plain.soul_locked) == (("u1",), "warn", False)
        agent = AgentConfig.model_validate(
            {
                "id": "a",
                "owner_ids": ["u2", "u3"],
                "input_guard": "block",
                "evolution_guardrails": {"locked_params": ["SOUL.md"], "max_delta_per_cycle": 0.5},
            }
        )
        own = agent_settings(c, "a", agent)
        assert (own.owner_ids, own.input_guard) == (("u2", "u3"), "block")
        assert (own.soul_locked, own.soul_max_delta) == (True, 0.5)


class TestVision:
    def test_on_by_default_off_for_the_defaults_and_back_on_for_one_agent(self) -> None:
        assert agent_settings(config(), "main", None).vision is True
        off = config(agents={"defaults": {"vision": False}})
        assert agent_settings(off, "main", None).vision is False
        seeing = AgentConfig(id="eyes", vision=True)
        assert agent_settings(off, "eyes", seeing).vision is True
