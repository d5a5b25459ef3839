"""The provider used when no LLM is configured: it says so, honestly, and how to fix it."""

from __future__ import annotations

from agent_core.messages import Usage
from agent_core.providers.base import Delta, DeltaHandler, ModelRequest, ModelResponse

OFFLINE_REPLY = (
    "No LLM is configured, so I can't answer yet (this is Loopgate's offline provider).\n\n"
    "To connect a model, either set the OPENAI_API_KEY environment variable, or point "
    "`providers.openai.base_url` in config.yaml at any OpenAI-compatible server "
    "(for example Ollama: `http://127.0.0.1:11434/v1`) and set `providers.openai.model`. "
    "Then restart Loopgate."
)


class OfflineProvider:
    name = "offline"

    async def complete(
        self, request: ModelRequest, on_delta: DeltaHandler | None = None
    ) -> ModelResponse:
        if on_delta is not None and request.stream:
            await on_delta(Delta("text", OFFLINE_REPLY))
        return ModelResponse(content=OFFLINE_REPLY, usage=Usage(), finish_reason="stop")

    async def aclose(self) -> None:
        return None
