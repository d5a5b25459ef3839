"""LLM providers behind one protocol.

``AnthropicProvider`` is imported on first use: a deployment on an OpenAI-compatible model
never loads it.
"""

from typing import TYPE_CHECKING, Any

from agent_core.providers._offline import OfflineProvider
from agent_core.providers._openai_compat import OpenAICompatProvider
from agent_core.providers._transcription import Transcriber
from agent_core.providers.base import (
    Delta,
    DeltaHandler,
    ModelRequest,
    ModelResponse,
    Provider,
    ToolSpec,
)

if TYPE_CHECKING:
    from agent_core.providers._anthropic import AnthropicProvider

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
    "Transcriber",
]


def __getattr__(name: str) -> Any:
    if name == "AnthropicProvider":
        from agent_core.providers._anthropic import AnthropicProvider

        return AnthropicProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
