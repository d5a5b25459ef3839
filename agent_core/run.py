"""RunRequest in, RunResult out: the contract between the bot and the agent loop."""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field

from agent_core.messages import Usage

NO_REPLY = "NO_REPLY"
"""A final answer of exactly this token (after sanitizing) means: deliver nothing."""


class RunStatus(enum.StrEnum):
    COMPLETED = "completed"
    MAX_ITERATIONS = "max_iterations"  # capped; content explains it to the user
    BUDGET_EXCEEDED = "budget_exceeded"  # context still too big; content explains it
    CANCELLED = "cancelled"  # /stop or /stopall; nothing is delivered
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class RunRequest:
    session_key: str
    message: str
    user_id: str
    agent_id: str = "main"
    channel: str = "local"
    chat_type: str = "direct"
    sender_name: str = ""
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    max_iterations: int | None = None  # overrides the agent's cap for this run
    stream: bool = True


@dataclass(slots=True)
class RunResult:
    run_id: str
    status: RunStatus
    content: str = ""
    usage: Usage = field(default_factory=Usage)
    iterations: int = 0
    error: str | None = None

    @property
    def silent(self) -> bool:
        """Nothing to deliver: NO_REPLY, an empty answer, or a cancelled run."""
        if self.status is RunStatus.CANCELLED:
            return True
        return is_no_reply(self.content)


def is_no_reply(content: str) -> bool:
    text = content.strip()
    return not text or text == NO_REPLY
