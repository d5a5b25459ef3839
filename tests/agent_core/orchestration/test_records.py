"""agent_core/orchestration/records.py: who a link lets delegate, a team's agents, which task
states are final."""

from __future__ import annotations

import pytest

from agent_core.orchestration.records import (
    AgentLink,
    LinkDirection,
    TaskStatus,
    Team,
)

IN, OUT, BOTH = LinkDirection.INBOUND, LinkDirection.OUTBOUND, LinkDirection.BIDIRECTIONAL


@pytest.mark.parametrize(
    ("direction", "from_source", "from_target"),
    [(OUT, "b", None), (IN, None, "a"), (BOTH, "b", "a")],
)
def test_a_link_delegates_along_its_direction(
    direction: LinkDirection, from_source: str | None, from_target: str | None
) -> None:
    link = AgentLink("a", "b", direction)
    assert link.delegates_from("a") == from_source
    assert link.delegates_from("b") == from_target


def test_a_link_gives_nothing_to_an_agent_outside_it() -> None:
    for direction in LinkDirection:
        assert AgentLink("a", "b", direction).delegates_from("c") is None


def test_links_default_to_outbound_and_directions_parse_from_their_stored_text() -> None:
    assert AgentLink("a", "b").direction is OUT
    assert LinkDirection("bidirectional") is BOTH
    with pytest.raises(ValueError, match="sideways"):
        LinkDirection("sideways")


def test_a_team_lists_its_lead_first_and_once() -> None:
    team = Team("crew", lead="main", members=("helper", "main", "coder"))
    assert team.agents == ("main", "helper", "coder")
    assert team.has("main") and team.has("coder")
    assert not team.has("stranger")


def test_a_team_of_one_is_its_lead() -> None:
    assert Team("solo", lead="main").agents == ("main",)


def test_only_completed_failed_and_cancelled_tasks_are_finished() -> None:
    finished = {s for s in TaskStatus if s.finished}
    assert finished == {TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED}
