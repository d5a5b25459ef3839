"""The agent core: knows LLMs, nothing of platforms."""

from agent_core.errors import (
    AgentError,
    ConfigError,
    MaxIterationsExceeded,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
    ToolError,
)
from agent_core.events import Event, EventBus, EventType
from agent_core.loop import Loop
from agent_core.messages import Message, SessionHistory, ToolCall, Usage
from agent_core.providers import ModelRequest, ModelResponse, OfflineProvider, Provider
from agent_core.run import NO_REPLY, RunRequest, RunResult, RunStatus
from agent_core.settings import AgentSettings
from agent_core.skills import Skill, discover_skills
from agent_core.store import MemoryStore, SessionStore, TraceStore
from agent_core.tools import FILE_TOOLS, SKILL_TOOLS, Tool, ToolContext, ToolRegistry
from agent_core.tracing import Span, SpanKind, Trace

__all__ = [
    "FILE_TOOLS",
    "NO_REPLY",
    "SKILL_TOOLS",
    "AgentError",
    "AgentSettings",
    "ConfigError",
    "Event",
    "EventBus",
    "EventType",
    "Loop",
    "MaxIterationsExceeded",
    "MemoryStore",
    "Message",
    "ModelRequest",
    "ModelResponse",
    "OfflineProvider",
    "Provider",
    "ProviderError",
    "ProviderTimeout",
    "ProviderUnavailable",
    "RateLimited",
    "RunRequest",
    "RunResult",
    "RunStatus",
    "SessionHistory",
    "SessionStore",
    "Skill",
    "Span",
    "SpanKind",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "ToolRegistry",
    "Trace",
    "TraceStore",
    "Usage",
    "discover_skills",
]
