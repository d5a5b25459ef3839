"""``exec``: one shell command line, run with ``sh -c`` in the agent's sandbox.

``{"command": C}``, optionally ``"timeout"`` (seconds, at most the configured limit). The
working directory is the calling user's workspace (``/workspace`` inside a sandbox). The result
gives the exit code, stdout and stderr, each cut at ``max_output`` bytes with a note saying how
much was left out.

Credentialed CLIs (prompt section 5): a credential's variables are given only to a command
line whose first word is its command (``gh`` or ``/usr/bin/gh``), and every value of every
credential is masked in the output before the model, a log or a trace sees it. The sandbox
itself (:mod:`agent_core.sandbox`) holds the isolation and the limits; the tool never runs a
command anywhere else.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from agent_core.errors import ToolError
from agent_core.sandbox import BASE_ENV, Sandbox, Stream
from agent_core.tools.base import Tool, ToolContext, ToolKind

log = structlog.get_logger(__name__)

EXEC = "exec"
MAX_COMMAND_CHARS = 8000
MIN_SECRET_CHARS = 4  # shorter values would mask ordinary words


@dataclass(frozen=True, slots=True)
class Credential:
    """``tools.exec.credentials.<name>``: ``env`` for command lines starting with ``command``."""

    name: str
    command: str
    env: Mapping[str, str]


def first_word(command: str) -> str:
    """The program a command line starts with, as the shell would read it ("" if none)."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:  # an unbalanced quote: the shell will refuse it anyway
        words = command.split()
    return words[0] if words else ""


def credential_env(command: str, credentials: Sequence[Credential]) -> dict[str, str]:
    """The variables this command line gets: those of credentials whose command it starts with."""
    word = first_word(command)
    program = posixpath.basename(word)
    env: dict[str, str] = {}
    for cred in credentials:
        if word == cred.command or (program == cred.command and "/" in word):
            env.update(cred.env)
    return env


class Scrubber:
    """Masks every credential value in a text, longest first so a value containing another is
    masked whole."""

    def __init__(self, credentials: Sequence[Credential]) -> None:
        pairs = {
            value: f"[{var} hidden]"
            for cred in credentials
            for var, value in cred.env.items()
            if len(value) >= MIN_SECRET_CHARS
        }
        self._pairs = sorted(pairs.items(), key=lambda p: -len(p[0]))
        self.longest = max((len(v.encode()) for v, _ in self._pairs), default=0)

    def __call__(self, text: str) -> str:
        for value, mask in self._pairs:
            text = text.replace(value, mask)
        return text


def _show(label: str, stream: Stream, scrub: Scrubber, max_output: int) -> str:
    # Kept bytes go past max_output by the longest secret, so a secret across the cut is
    # masked whole before the cut is made.
    text = scrub(stream.data.decode("utf-8", errors="replace"))
    shown = text.encode()[:max_output].decode("utf-8", errors="ignore")
    left = stream.total - len(shown.encode()) if stream.total > max_output else 0
    body = shown if shown else "(empty)"
    note = f"\n[{label} cut: {left} more bytes not shown]" if left > 0 else ""
    return f"{label}:\n{body}{note}"


_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "a shell command line (run with sh -c)"},
        "timeout": {"type": "number", "description": "seconds (optional; capped by the limit)"},
    },
    "required": ["command"],
}


def exec_tool(
    sandbox: Sandbox, credentials: Sequence[Credential] = (), *, name: str = EXEC
) -> Tool:
    """The ``exec`` tool running in ``sandbox``."""
    limits = sandbox.limits
    scrub = Scrubber(credentials)
    where = (
        "on the host, without a sandbox"
        if sandbox.backend == "none"
        else f"in a sandbox ({sandbox.backend})"
    )
    description = (
        f"Run a shell command line with sh -c {where}, in your workspace ({sandbox.workdir}). "
        f"Returns the exit code, stdout and stderr. Limits: {limits.timeout:g} s, network "
        f"{'on' if sandbox.network else 'off'}."
    )

    async def handler(args: dict[str, Any], ctx: ToolContext) -> str:
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ToolError(name, "'command' must be a non-empty shell command line")
        if len(command) > MAX_COMMAND_CHARS:
            raise ToolError(name, f"the command is longer than {MAX_COMMAND_CHARS} characters")
        timeout = _timeout(args.get("timeout"), limits.timeout, name)
        extra = credential_env(command, credentials)
        ctx.workspace.mkdir(parents=True, exist_ok=True)
        result = await sandbox.run(
            command,
            ctx.workspace,
            {**BASE_ENV, **extra},
            wall_time=timeout,
            keep=limits.max_output + scrub.longest,
        )
        log.info(
            "exec.ran",
            agent_id=ctx.agent_id,
            run_id=ctx.run_id,
            backend=sandbox.backend,
            command=scrub(command)[:500],
            credentials=sorted(extra),
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            duration_ms=round(result.duration * 1000, 1),
        )
        if result.timed_out:
            head = (
                f"timed out after {timeout:g} s: the command and every process it started "
                "were killed"
            )
        elif result.exit_code is not None and result.exit_code < 0:
            head = f"killed by signal {-result.exit_code}"
        else:
            head = f"exit code: {result.exit_code}"
        parts = [
            head,
            _show("stdout", result.stdout, scrub, limits.max_output),
            _show("stderr", result.stderr, scrub, limits.max_output),
        ]
        return "\n".join(parts)

    return Tool(
        name=name,
        description=description,
        parameters=_PARAMETERS,
        handler=handler,
        kind=ToolKind.EXEC,
    )


def _timeout(value: object, limit: float, name: str) -> float:
    if value is None:
        return limit
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ToolError(name, "'timeout' must be a positive number of seconds")
    return min(float(value), limit)
