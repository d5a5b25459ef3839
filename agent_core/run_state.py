"""What one run of the loop carries from step to step (``agent_core/loop.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from agent_core.messages import Message, Usage
from agent_core.orchestration.workspaces import RunWorkspace
from agent_core.run import RunRequest, RunStatus
from agent_core.skills import Skill
from agent_core.tool_exec import ToolBudget
from agent_core.tracing import Trace


@dataclass
class RunState:
    request: RunRequest
    trace: Trace
    messages: list[Message]
    buffer: list[Message] = field(default_factory=list)  # written to the session at the end
    usage: Usage = field(default_factory=Usage)
    iterations: int = 0
    budget: ToolBudget | None = None  # the run's tool calls; set on the first tool batch
    discovered: set[str] = field(default_factory=set)  # deferred tools found by a search tool
    stored: list[Message] = field(default_factory=list)  # the session before this run
    summary: str | None = None  # the session's summary before this run
    place: RunWorkspace | None = None  # the run's default workspace and extra roots
    skills: tuple[Skill, ...] = ()  # found once per run: in the prompt and for the tools
    compacted: bool = False  # mid-loop compaction happens at most once per run
    stop_reason: str | None = None  # set when the run stopped early (trace marked error)
    metered: bool = False  # a model call of this run has been charged (the run is counted)


@dataclass(frozen=True, slots=True)
class Finish:
    """The run's answer is known: stop iterating."""

    content: str
    status: RunStatus = RunStatus.COMPLETED
