"""Tool names as the model sees them: ``<server>__<tool>``, valid for every provider.

OpenAI (and compatible servers) accept ``^[a-zA-Z0-9_-]{1,64}$``; MCP tool names may hold dots,
slashes, spaces or be longer. Anything else becomes "_", and a name that is too long or collides
after that keeps a prefix plus a short hash of the original name, so it stays stable across
restarts and distinct from its neighbours.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

MAX_NAME = 64
SEPARATOR = "__"
_INVALID = re.compile(r"[^a-zA-Z0-9_-]")
_HASH_CHARS = 8


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:_HASH_CHARS]


def namespaced_names(server: str, names: Iterable[str]) -> dict[str, str]:
    """Original tool name → the name offered to the model, unique within this server."""
    result: dict[str, str] = {}
    used: set[str] = set()
    for name in names:
        if name in result:
            continue
        full = _INVALID.sub("_", f"{server}{SEPARATOR}{name}")
        candidate = full
        salt = 0
        while len(candidate) > MAX_NAME or candidate in used:
            tag = _digest(name if salt == 0 else f"{name}\0{salt}")
            candidate = f"{full[: MAX_NAME - _HASH_CHARS - 1]}_{tag}"
            salt += 1
        used.add(candidate)
        result[name] = candidate
    return result
