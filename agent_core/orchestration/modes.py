"""Orchestration modes (agent-loop spec, "Orchestration Modes"): which inter-agent tools an agent
gets, resolved from its team membership and its links. Team > Delegate > Spawn."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from agent_core.orchestration.records import AgentLink, Team

SPAWN = "spawn"
DELEGATE = "delegate"
TEAM_TASKS = "team_tasks"
ORCHESTRATION_TOOLS = (SPAWN, DELEGATE, TEAM_TASKS)


class OrchestrationMode(enum.StrEnum):
    SPAWN = "spawn"
    DELEGATE = "delegate"
    TEAM = "team"


_VISIBLE = {
    OrchestrationMode.SPAWN: (SPAWN,),
    OrchestrationMode.DELEGATE: (SPAWN, DELEGATE),
    OrchestrationMode.TEAM: (SPAWN, DELEGATE, TEAM_TASKS),
}


@dataclass(frozen=True, slots=True)
class DelegateTarget:
    agent_id: str
    description: str = ""  # when to delegate to it (from the link)


@dataclass(frozen=True, slots=True)
class OrchestrationProfile:
    """An agent's mode and what it may reach; part of its resolved settings."""

    mode: OrchestrationMode = OrchestrationMode.SPAWN
    team: Team | None = None
    targets: tuple[DelegateTarget, ...] = ()  # agents this one may delegate to

    @property
    def visible_tools(self) -> tuple[str, ...]:
        return _VISIBLE[self.mode]

    def hidden_reason(self, tool: str) -> str | None:
        """Why an orchestration tool is not offered in this mode, or None when it is."""
        if tool not in ORCHESTRATION_TOOLS or tool in self.visible_tools:
            return None
        if tool == TEAM_TASKS:
            return f"team_tasks is only for team agents (this agent is in {self.mode} mode)"
        return "delegate needs an agent link from this agent (loopgate links add); none exists"

    def is_lead(self, agent_id: str) -> bool:
        return self.team is not None and self.team.lead == agent_id

    def may_delegate_to(self, agent_id: str) -> bool:
        return any(t.agent_id == agent_id for t in self.targets)


def resolve_profile(
    agent_id: str, team: Team | None, links: Sequence[AgentLink]
) -> OrchestrationProfile:
    """Team > Delegate > Spawn. Team agents may also delegate to their team mates."""
    targets: dict[str, DelegateTarget] = {}
    for link in links:
        target = link.delegates_from(agent_id)
        if target is not None and target != agent_id and target not in targets:
            targets[target] = DelegateTarget(target, link.description)
    if team is not None and team.has(agent_id):
        for mate in team.agents:
            if mate != agent_id and mate not in targets:
                targets[mate] = DelegateTarget(mate, f"member of team {team.id}")
        return OrchestrationProfile(OrchestrationMode.TEAM, team, tuple(targets.values()))
    if targets:
        return OrchestrationProfile(OrchestrationMode.DELEGATE, None, tuple(targets.values()))
    return OrchestrationProfile()
