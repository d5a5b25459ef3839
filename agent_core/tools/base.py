"""Tools: their definition, their run context, and the per-agent registry."""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_core.providers.base import ToolSpec
from agent_core.run import RunRequest
from agent_core.settings import MAX_FILE_BYTES, WORKSPACE_MAX_BYTES
from agent_core.skills import Skill


class ToolKind(enum.StrEnum):
    """How a tool runs; anything but ``SYNC`` keeps its batch sequential (tool_exec.py)."""

    SYNC = "sync"  # returns its result when done
    ASYNC = "async"  # starts background work (spawn, cron) and returns at once
    EXEC = "exec"  # runs a shell/program: side effects nobody can predict
    WAIT = "wait"  # sleeps or waits for something outside the run
    # Starts other agents' runs (spawn, delegate, team_tasks). A batch made only of these runs
    # concurrently, bounded by the children limit: the children don't share the parent's state.
    ORCHESTRATE = "orchestrate"


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a tool may know about the run that calls it."""

    workspace: Path
    session_key: str
    user_id: str
    agent_id: str
    run_id: str
    # Quotas of the agent's settings; write_file enforces them (tools/files.py).
    max_file_bytes: int = MAX_FILE_BYTES
    workspace_max_bytes: int = WORKSPACE_MAX_BYTES
    # Absolute paths inside these folders are allowed too (a team workspace, or the agent's
    # own workspace while it works in the team's); relative paths always mean ``workspace``.
    extra_roots: tuple[Path, ...] = ()
    request: RunRequest | None = None  # the calling run (orchestration tools read it)
    trace_id: str = ""  # the calling run's trace
    call_id: str = ""  # this call's id (set per call by tool_exec.run_tool)
    # Deferred tools a search tool found in this run (mcp_tool_search adds to it): the loop
    # offers them to the model from the next iteration on. Shared by every call of one run.
    discovered: set[str] = field(default_factory=set)
    # The run's skills (skill_search ranks them) and the folders of its shared ones: absolute
    # paths inside those may be read and listed, never written (tools/files.py).
    skills: tuple[Skill, ...] = ()
    read_roots: tuple[Path, ...] = ()


ToolHandler = Callable[[dict[str, Any], ToolContext], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    handler: ToolHandler
    # Read-only tools may run concurrently with each other; anything else runs alone.
    read_only: bool = False
    kind: ToolKind = ToolKind.SYNC
    # Where the tool comes from: "" for built-in ones, "mcp:<server>" for an MCP server's.
    source: str = ""

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.parameters)


@dataclass
class ToolRegistry:
    tools: dict[str, Tool] = field(default_factory=dict)
    # Tools this agent may not use in its current mode: never offered, and a call to one is
    # refused with the reason (name → reason).
    hidden: dict[str, str] = field(default_factory=dict)
    # Callable but not offered up front (too many to list: MCP search mode); a search tool
    # finds them and the loop offers the ones found (``ToolContext.discovered``).
    deferred: dict[str, Tool] = field(default_factory=dict)

    @classmethod
    def of(cls, tools: Iterable[Tool]) -> ToolRegistry:
        return cls({tool.name: tool for tool in tools})

    def register(self, tool: Tool) -> None:
        self.tools[tool.name] = tool

    def defer(self, tool: Tool) -> None:
        self.deferred[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name) or self.deferred.get(name)

    def clone(self) -> ToolRegistry:
        """A copy an agent can extend without touching the shared registry."""
        return ToolRegistry(dict(self.tools), dict(self.hidden), dict(self.deferred))

    def hide(self, name: str, reason: str) -> None:
        self.tools.pop(name, None)
        self.hidden[name] = reason

    def specs(self, discovered: Collection[str] = ()) -> list[ToolSpec]:
        """What the model is offered: every listed tool, plus the deferred ones found."""
        found = [self.deferred[n].spec for n in discovered if n in self.deferred]
        return [tool.spec for tool in self.tools.values()] + found

    def __contains__(self, name: object) -> bool:
        return name in self.tools

    def __len__(self) -> int:
        return len(self.tools)
