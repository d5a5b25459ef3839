"""What a prompt section reads from the prompt being built, as a protocol.

:class:`agent_core.prompt.PromptContext` satisfies it structurally. Sections defined outside
``agent_core.prompt`` (``agent_core.mcp.prompt``, ``agent_core.orchestration.prompt``,
``agent_core.self_evolution``) depend on this instead of on the prompt builder that imports
them, so the builder stays the only module that knows them all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from agent_core.bootstrap import ContextFile
from agent_core.run import RunRequest
from agent_core.settings import AgentSettings
from agent_core.tools.base import ToolRegistry

__all__ = ["PromptView"]


class PromptView(Protocol):
    """The parts of a :class:`~agent_core.prompt.PromptContext` that outside sections read."""

    @property
    def settings(self) -> AgentSettings: ...

    @property
    def tools(self) -> ToolRegistry: ...

    @property
    def request(self) -> RunRequest: ...

    @property
    def workspace(self) -> Path: ...

    @property
    def team_workspace(self) -> Path | None: ...

    @property
    def full(self) -> bool: ...

    def file(self, name: str) -> ContextFile | None: ...
