"""Failures of an MCP server in words for a status line, a log field or the model.

Error texts can quote what the server was configured with (an HTTP error names the URL, a
crashing program may echo its environment), so everything said goes through ``Redactor``:
header and env values and the URL's credentials and query never reach a log or the model.
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

from agent_core.mcp._servers import ServerSpec, ServerState

MASK = "***"
_MIN_SECRET = 4  # shorter values (a port, "1") would mask ordinary words
_MAX_CHARS = 500


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups, as anyio raises them."""
    while isinstance(exc, BaseExceptionGroup):
        real = [e for e in exc.exceptions if not isinstance(e, asyncio.CancelledError)]
        exc = (real or list(exc.exceptions))[0]
    return exc


def describe(exc: BaseException) -> str:
    leaf = _leaf(exc)
    if isinstance(leaf, MCPError):
        if leaf.code == CONNECTION_CLOSED:
            return "connection closed"
        if leaf.code == REQUEST_TIMEOUT:
            return "request timed out"
        return f"MCP error {leaf.code}: {leaf.message}"
    text = " ".join(str(leaf).split())
    if isinstance(leaf, TimeoutError) and text:
        return text[:_MAX_CHARS]
    kind = type(leaf).__name__
    return f"{kind}: {text}"[:_MAX_CHARS] if text else kind


def unavailable(name: str, state: ServerState, error: str | None, *, stopping: bool) -> str:
    """Why a call cannot go to the server now."""
    if stopping:
        return f"MCP server '{name}' was shut down"
    match state:
        case ServerState.READY:  # it was, again, by the time the call came back
            return f"MCP server '{name}' lost the connection during the call; try again"
        case ServerState.RESTARTING:
            return f"MCP server '{name}' is restarting ({error}); try again shortly"
        case ServerState.FAILED:
            return f"MCP server '{name}' is unavailable: {error}"
        case ServerState.DISABLED:
            return f"MCP server '{name}' is disabled"
    return f"MCP server '{name}' is not ready yet"


class Redactor:
    def __init__(self, spec: ServerSpec) -> None:
        secrets = [*spec.headers.values(), *spec.env.values()]
        if spec.url:
            parts = urlsplit(spec.url)
            secrets += [parts.query, parts.password or "", parts.username or ""]
        # Longest first, so a secret containing another is masked whole.
        self._secrets = sorted({s for s in secrets if len(s) >= _MIN_SECRET}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, MASK)
        return text
