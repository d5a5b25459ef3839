"""RunRequest in, RunResult out: the contract between the bot and the agent loop."""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_core.messages import ImagePart, Usage

NO_REPLY = "NO_REPLY"
"""A final answer of exactly this token (after sanitizing) means: deliver nothing."""


class RunStatus(enum.StrEnum):
    COMPLETED = "completed"
    MAX_ITERATIONS = "max_iterations"  # capped; content explains it to the user
    BUDGET_EXCEEDED = "budget_exceeded"  # context still too big; content explains it
    USAGE_LIMIT = "usage_limit"  # a usage limit or budget refused a model call; content says so
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
    chat_id: str = ""  # "<channel>:<chat>": scopes isolated team workspaces
    # Orchestration (agent_core/orchestration): set on child, delegated and dispatched runs.
    depth: int = 0  # 0: a user's run; 1: its child; …
    parent_run_id: str | None = None
    parent_trace_id: str | None = None
    parent_span_id: str | None = None
    minimal_prompt: bool = False  # the spec's Minimal prompt (children)
    extra_context: str = ""  # added inside <extra_context> (the parent's brief)
    workspace: Path | None = None  # replaces the default workspace (team task, delegation)
    extra_roots: tuple[Path, ...] = ()  # also reachable by absolute path
    team_task_id: str | None = None  # the team task this run was dispatched for
    cron_job_id: str | None = None
    """A scheduled job's run (``agent_core/tools/cron.py``): its trace is marked with the id."""
    history_turns: int | None = None
    """Past user turns the model sees, replacing the agent's ``history_limit`` (0: none, so a
    repeating job's context does not grow without end)."""
    images: tuple[ImagePart, ...] = field(default=(), repr=False)
    """Images the user sent with ``message`` (saved in the workspace by the caller)."""
    origin: Any = field(default=None, compare=False)
    """Opaque to the agent core: where the run came from (the bot's chat). Background results
    are announced back with it."""


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
