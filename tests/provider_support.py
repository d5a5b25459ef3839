"""What the provider tests share (OpenAI-compatible and Anthropic): the request they send and
a recorder of the streamed deltas."""

from __future__ import annotations

from agent_core.messages import Message
from agent_core.providers import Delta, ModelRequest

__all__ = ["API_KEY", "Collector", "ask"]

API_KEY = "sk-test-0123456789abcdef"


def ask(
    content: str = "hi", *, model: str = "gpt-test", stream: bool = True, **kwargs: object
) -> ModelRequest:
    return ModelRequest(
        model=model,
        messages=[Message.system("be brief"), Message.user(content)],
        stream=stream,
        **kwargs,  # type: ignore[arg-type]
    )


class Collector:
    def __init__(self) -> None:
        self.deltas: list[Delta] = []

    async def __call__(self, delta: Delta) -> None:
        self.deltas.append(delta)

    def of(self, kind: str) -> list[str]:
        return [d.content for d in self.deltas if d.kind == kind]
