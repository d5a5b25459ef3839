"""``tools.exec``: the ``exec`` tool, its sandbox, its limits, approvals and credentials.

Off by default. ``enabled: true`` offers it to every agent (``agents.<id>.disabled_tools:
[exec]`` takes it away again) whenever the chosen ``sandbox`` works on this machine; when it
doesn't, the tool is not offered and start-up and ``loopgate check-config`` say why. There is
never a fallback to the host: ``sandbox: none`` must be chosen, and logs a warning at every
start.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import ByteSize, Field, StringConstraints, field_validator

from bot.config.base import Duration, OffAllowed, StrictModel

ApprovalMode = Literal["off", "ask", "deny_patterns"]
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]

# Refused before they run whenever approvals are on (ask, deny_patterns). The sandbox already
# stops these from harming the host; refusing them keeps the workspace and the limits for work.
DEFAULT_DENY_PATTERNS = [
    r"\brm\s+(-[a-zA-Z]*[rf][a-zA-Z]*\s+)+(/|~|\$HOME|/\*)(\s|$)",  # rm -rf / and friends
    r":\s*\(\s*\)\s*\{.*\|.*&.*\}\s*;\s*:",  # the classic shell fork bomb
    r"\bmkfs(\.\w+)?\b",
    r"\bdd\b.*\bof=/dev/",
    r"\b(shutdown|reboot|halt|poweroff)\b",
]


class CredentialConfig(StrictModel):
    command: str = Field(pattern=r"^[A-Za-z0-9._+-]+$")
    """The program (first word of the command line) that gets ``env``, e.g. ``gh``."""
    env: dict[EnvName, str] = Field(default_factory=dict)
    """Variables for that program only; write values as ``${VAR}``."""


class ExecConfig(StrictModel):
    enabled: bool = False
    sandbox: Literal["bwrap", "docker", "none"] = "bwrap"
    """``bwrap`` (bubblewrap namespaces), ``docker`` (a container per command), or ``none``:
    on the host, for trusted single-user setups only."""
    image: str = "debian:bookworm-slim"
    """The Docker image (``sandbox: docker`` only)."""
    network: bool = False
    timeout: Duration = Field(30.0, gt=0, le=3600)
    """Wall time of one command; then its whole process tree is killed."""
    memory: ByteSize = Field(ByteSize(512 << 20), ge=16 << 20)
    """Address space per process (bwrap, none) or of the container (docker)."""
    max_processes: int = Field(64, ge=4, le=4096)
    max_output: ByteSize = Field(ByteSize(16 << 10), ge=256)
    """Bytes of stdout and of stderr given to the model; the rest is cut with a note."""
    approval: Annotated[ApprovalMode | None, OffAllowed] = None
    """``off``, ``ask`` or ``deny_patterns``; unset: ``off`` in owners' and admins' direct
    chats, ``ask`` elsewhere."""
    approval_timeout: Duration = Field(300.0, gt=0)
    deny_patterns: list[str] = Field(default_factory=lambda: list(DEFAULT_DENY_PATTERNS))
    """Regular expressions (searched in the command line) refused before anything runs."""
    credentials: dict[str, CredentialConfig] = Field(default_factory=dict)

    @field_validator("deny_patterns")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        for i, pattern in enumerate(patterns):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"deny_patterns.{i}: not a regular expression: {exc}") from None
        return patterns

    def secrets(self) -> list[str]:
        """Credential values, masked in logs like every other secret."""
        return [v for cred in self.credentials.values() for v in cred.env.values() if len(v) >= 8]
