"""Errors of the agent core.

AgentError
├── ConfigError            the agent or provider is misconfigured (a user error, not retried)
├── ProviderError          the LLM call failed
│   ├── RateLimited        429; carries retry_after when the server sent one
│   ├── ProviderTimeout    connect/read timeout
│   └── ProviderUnavailable  5xx or connection failure
├── ToolError              a tool failed; becomes an error tool result, never a crash
├── MaxIterationsExceeded  the loop hit its iteration cap
├── NotCompacted           compaction found nothing to do (agent_core.compaction)
├── TaskConflict           a team task is not in a state that allows the change
│                          (agent_core.orchestration.records)
├── DeltaHandlerFailed     carries a stream callback's own failure past the provider's error
│                          translation (agent_core.providers._transport)
├── ScheduleError          a schedule a job can't have; also a ValueError (agent_core.schedules)
├── UsageLimitReached      a usage limit or budget refuses the next model call (agent_core.usage)
└── WorkspaceEscape        a path outside the workspace; also a ValueError (agent_core.workspace)

Outside it on purpose: ``agent_core.testing.UnexpectedModelCall``, a test double's
AssertionError that must not be handled like an agent failure.
"""

from __future__ import annotations


class AgentError(Exception):
    pass


class ConfigError(AgentError):
    pass


class ProviderError(AgentError):
    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code

    @property
    def transient(self) -> bool:
        return False


class RateLimited(ProviderError):
    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message, status_code=429)
        self.retry_after = retry_after

    @property
    def transient(self) -> bool:
        return True


class ProviderTimeout(ProviderError):
    @property
    def transient(self) -> bool:
        return True


class ProviderUnavailable(ProviderError):
    @property
    def transient(self) -> bool:
        return True


class ToolError(AgentError):
    def __init__(self, tool_name: str, message: str) -> None:
        super().__init__(message)
        self.tool_name = tool_name


class MaxIterationsExceeded(AgentError):
    def __init__(self, max_iterations: int) -> None:
        super().__init__(f"stopped after {max_iterations} iterations without a final answer")
        self.max_iterations = max_iterations
