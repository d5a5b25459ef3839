"""LLM providers behind one protocol."""

from agent_core.providers.anthropic import AnthropicProvider
from agent_core.providers.base import (
    Delta,
    DeltaHandler,
    ModelRequest,
    ModelResponse,
    Provider,
    ToolSpec,
)
from agent_core.providers.offline import OfflineProvider
from agent_core.providers.openai_compat import OpenAICompatProvider

__all__ = [
    "AnthropicProvider",
    "Delta",
    "DeltaHandler",
    "ModelRequest",
    "ModelResponse",
    "OfflineProvider",
    "OpenAICompatProvider",
    "Provider",
    "ToolSpec",
]
