"""Multi-agent orchestration: spawn, delegate and team tasks (agent-loop spec).

The names the bot uses are importable from here: the orchestrator and its child runs
(children.py), the mode tools (mode_tools.py), mode profiles (modes.py) and the records the
stores keep (records.py).

The orchestrator and the mode tools load on first use (``__getattr__``): they import
``agent_core.settings``, which imports this package (for ``modes``), so importing them here
would be circular.
"""

from typing import TYPE_CHECKING

from agent_core.lazy_exports import lazy_exports
from agent_core.orchestration.modes import OrchestrationProfile, resolve_profile
from agent_core.orchestration.records import (
    AgentLink,
    LinkDirection,
    OrchestrationStore,
    TaskComment,
    TaskConflict,
    TaskStatus,
    TaskStore,
    Team,
    TeamSettings,
    TeamTask,
    WorkspaceScope,
)

if TYPE_CHECKING:
    from agent_core.orchestration.children import Announcement, ChildRun, Orchestrator
    from agent_core.orchestration.mode_tools import add_mode_tools

__all__ = [
    "AgentLink",
    "Announcement",
    "ChildRun",
    "LinkDirection",
    "OrchestrationProfile",
    "OrchestrationStore",
    "Orchestrator",
    "TaskComment",
    "TaskConflict",
    "TaskStatus",
    "TaskStore",
    "Team",
    "TeamSettings",
    "TeamTask",
    "WorkspaceScope",
    "add_mode_tools",
    "resolve_profile",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "Announcement": "agent_core.orchestration.children",
        "ChildRun": "agent_core.orchestration.children",
        "Orchestrator": "agent_core.orchestration.children",
        "add_mode_tools": "agent_core.orchestration.mode_tools",
    },
)
