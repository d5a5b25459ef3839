"""Loopgate: wires the channels to the agent core."""

from __future__ import annotations

import importlib
import sys

_HIDDEN = ("rich", "pygments")
_IMPORTED_WITHOUT_THEM = ("structlog", "httpx")


def _import_without_terminal_pretties() -> None:
    """structlog's and httpx's first imports, with rich and Pygments hidden.

    Both import them whenever they are installed (import-linter brings them into a development
    environment): structlog to format tracebacks in its console renderer, which gets ours
    already as text (``format_exc_info`` comes first, ``bot/logging_setup.py``); httpx for its
    command-line client (``httpx._main``), which Loopgate never runs. Both treat them as
    optional, and together they keep ~4.5 MiB resident in every process (rich, Pygments'
    lexers, attrs). A ``None`` entry in ``sys.modules`` makes their import raise ImportError
    (the import system's documented way to block a module); they are visible again right
    after, as ``channels/telegram/_ptb.py`` does with cryptography. A no-op for whatever is
    already loaded."""
    if any(name in sys.modules for name in (*_HIDDEN, *_IMPORTED_WITHOUT_THEM)):
        return
    import_hiding(_IMPORTED_WITHOUT_THEM, _HIDDEN)


def import_hiding(modules: tuple[str, ...], hidden: tuple[str, ...]) -> None:
    """Import ``modules`` with the not-yet-loaded ones of ``hidden`` blocked (their import
    raises ImportError), then visible again: for libraries that load optional extras we never
    use. Shared with ``bot/cluster/_redis.py``."""
    blocked = [name for name in hidden if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        for name in modules:
            importlib.import_module(name)
    finally:
        for name in blocked:
            del sys.modules[name]


_import_without_terminal_pretties()
