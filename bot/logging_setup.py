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
    timestamper = structlog.processors.TimeStamper(fmt="iso", utc=True)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            timestamper,
            structlog.processors.format_exc_info,
            renderer,
            redact_rendered,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=_CurrentStderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )
    # Libraries (uvicorn, Alembic, SQLAlchemy) log through stdlib logging: their lines are
    # rendered like ours, one format on stderr, the logger's name as a field.
    handler = logging.StreamHandler(_CurrentStderr())
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[
                structlog.stdlib.add_log_level,
                structlog.stdlib.add_logger_name,
                timestamper,
            ],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                renderer,
                redact_rendered,
            ],
        )
    )
    handler.addFilter(RedactingFilter())
    logging.basicConfig(level=max(numeric, logging.INFO), handlers=[handler], force=True)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    # A migration's steps are news only when debugging; what was migrated is logged as
    # ``storage.migrated``.
    logging.getLogger("alembic").setLevel(
        logging.DEBUG if numeric <= logging.DEBUG else logging.WARNING
    )
