"""agent_core/orchestration/modes.py: resolving an agent's orchestration mode and tools."""

from __future__ import annotations

import pytest

from agent_core.orchestration.modes import OrchestrationMode, resolve_profile
from agent_core.orchestration.records import AgentLink, LinkDirection, Team


class TestModes:
    def test_spawn_is_the_default(self) -> None:
        profile = resolve_profile("a", None, [])
        assert profile.mode is OrchestrationMode.SPAWN
        assert profile.visible_tools == ("spawn",)

    @pytest.mark.parametrize(
        ("link", "delegates"),
        [
            (AgentLink("a", "b"), True),
            (AgentLink("b", "a"), False),
            (AgentLink("b", "a", LinkDirection.INBOUND), True),
            (AgentLink("a", "b", LinkDirection.INBOUND), False),
            (AgentLink("b", "a", LinkDirection.BIDIRECTIONAL), True),
        ],
    )
    def test_delegate_needs_an_outbound_edge(self, link: AgentLink, delegates: bool) -> None:
        profile = resolve_profile("a", None, [link])
        assert (profile.mode is OrchestrationMode.DELEGATE) is delegates
        assert profile.may_delegate_to("b") is delegates

    def test_team_wins_over_links_and_reaches_team_mates(self) -> None:
        team = Team("t", "lead", ("a", "c"))
        profile = resolve_profile("a", team, [AgentLink("a", "b")])
        assert profile.mode is OrchestrationMode.TEAM
        assert profile.visible_tools == ("spawn", "delegate", "team_tasks")
        assert {t.agent_id for t in profile.targets} == {"b", "lead", "c"}
        assert not profile.is_lead("a") and profile.is_lead("lead")

    def test_hidden_reasons_name_the_mode(self) -> None:
        profile = resolve_profile("a", None, [])
        assert "agent link" in (profile.hidden_reason("delegate") or "")
        assert "team" in (profile.hidden_reason("team_tasks") or "")
        assert profile.hidden_reason("spawn") is None
