"""Per-agent settings the loop runs with; the bot builds them from config.yaml."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

MAX_ITERATIONS = 20
CONTEXT_WINDOW = 200_000
MAX_MESSAGE_CHARS = 32_768
HISTORY_LIMIT_TURNS = 50


@dataclass(frozen=True, slots=True)
class AgentSettings:
    id: str
    model: str
    workspace: Path
    provider: str = "openai"
    max_iterations: int = MAX_ITERATIONS
    context_window: int = CONTEXT_WINDOW
    max_message_chars: int = MAX_MESSAGE_CHARS
    history_limit: int = HISTORY_LIMIT_TURNS
    system_prompt: str = ""  # operator's extra instructions, appended to the built prompt
    temperature: float | None = None
    max_tokens: int | None = None
    stream: bool = True
