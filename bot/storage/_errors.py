"""Errors of the storage layer.

BotError (bot.errors)
└── StorageError
    └── SessionNotFound    an operation needs a session row that does not exist

Errors while a statement runs after start-up (constraint violations, a dropped connection)
propagate as SQLAlchemy exceptions: callers either let them fail the request or log them, and
wrapping every statement would only hide the driver's detail.
"""

from __future__ import annotations

from bot.errors import BotError


class StorageError(BotError):
    """The database cannot be opened or used; the message never contains a password."""


class SessionNotFound(StorageError):
    def __init__(self, session_key: str) -> None:
        super().__init__(f"no session {session_key!r}")
        self.session_key = session_key
