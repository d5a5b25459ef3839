"""Structured logging: an event name plus fields, to stderr, console or JSON lines."""

from __future__ import annotations

import logging
import sys

import structlog

from bot.redaction import RedactingFilter, redact_rendered


class _CurrentStderr:
    """Writes to whatever ``sys.stderr`` is now, not the stream at configuration time.

    Test runners and daemonizers swap ``sys.stderr``; a logger holding the old, closed stream
    would fail with "I/O operation on closed file".
    """

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure_logging(level: str = "info", fmt: str = "console") -> None:
    numeric = logging.getLevelNamesMapping()[level.upper()]
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
            redact_rendered,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=_CurrentStderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )
    # Libraries (uvicorn, httpx, sqlalchemy) log through stdlib logging.
    logging.basicConfig(level=max(numeric, logging.INFO), stream=sys.stderr, force=True)
    for handler in logging.getLogger().handlers:
        handler.addFilter(RedactingFilter())
    logging.getLogger("httpx").setLevel(logging.WARNING)
