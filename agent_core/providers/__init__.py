"""LLM providers behind one protocol."""

from agent_core.providers.base import (
    Delta,
    DeltaHandler,
    ModelRequest,
    ModelResponse,
    Provider,
    ToolSpec,
)
from agent_core.providers.offline import OfflineProvider

__all__ = [
    "Delta",
    "DeltaHandler",
    "ModelRequest",
    "ModelResponse",
    "OfflineProvider",
    "Provider",
    "ToolSpec",
]
