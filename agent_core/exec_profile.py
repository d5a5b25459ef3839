"""What an agent's ``exec`` is allowed to do, as the prompt and the approval hooks read it.

Kept apart from the tool and its sandbox so that :mod:`agent_core.settings` can hold it without
importing either.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from agent_core.run import RunRequest


class Approval(enum.StrEnum):
    OFF = "off"  # every command runs (the deny list does not apply either)
    ASK = "ask"  # an owner or admin answers /approve or /deny in the chat first
    DENY_PATTERNS = "deny_patterns"  # no question; commands matching the deny list are refused


@dataclass(frozen=True, slots=True)
class ExecProfile:
    """The offered ``exec`` of one agent: its sandbox and its policy."""

    backend: str  # bwrap | docker | none
    workdir: str  # as the command sees it
    network: bool
    timeout: float  # seconds
    memory: int  # bytes per process
    processes: int
    max_output: int  # bytes per stream
    approval: Approval | None = None  # None: off in owners' direct chats, ask elsewhere
    approval_timeout: float = 300.0
    credentials: tuple[str, ...] = ()  # commands that get credentials (never the values)
    trusted: frozenset[str] = field(default_factory=frozenset)
    """Who counts as an owner here: the agent's ``owner_ids`` and the channels' ``admins``, as
    ``channel:id`` or a bare id."""

    def is_trusted(self, user_id: str) -> bool:
        bare = user_id.split(":", 1)[-1]
        return user_id in self.trusted or bare in self.trusted

    def approval_for(self, request: RunRequest | None) -> Approval:
        """The mode of one run: the configured one, else off only in an owner's direct chat."""
        if self.approval is not None:
            return self.approval
        direct = request is not None and request.chat_type == "direct"
        if direct and request is not None and self.is_trusted(request.user_id):
            return Approval.OFF
        return Approval.ASK
