"""Translating python-telegram-bot errors into :mod:`channels.errors`.

ChannelError (channels.errors)
├── RetryAfter             429: Telegram told us how long to wait
├── Forbidden              403: blocked by the user, kicked from the group, invalid token
│   └── UnknownTokenOrMethod 401/404: a bad token, or (the token works) a method the server lacks
├── BadRequest             400: malformed request ("can't parse entities", "message is too long")
│   └── ChatMigrated       the group became a supergroup; carries the new chat id
└── TelegramUnavailable    5xx and network failures: worth retrying with backoff
    └── TelegramTimedOut   the request may have reached Telegram: a send is *not* retried
"""

from __future__ import annotations

import datetime as dt
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from telegram import error as tg

from channels.errors import BadRequest, ChannelError, Forbidden, RetryAfter


class ChatMigrated(BadRequest):
    def __init__(self, new_chat_id: int) -> None:
        super().__init__(f"group migrated to supergroup {new_chat_id}")
        self.new_chat_id = new_chat_id


class UnknownTokenOrMethod(Forbidden):
    """401/404: Telegram does not know the token, or, with a token that works, the method (a
    Bot API server older than the method, e.g. ``sendMessageDraft``)."""


class TelegramUnavailable(ChannelError):
    """A 5xx answer or a connection failure: Telegram did not take the request."""


class TelegramTimedOut(TelegramUnavailable):
    """No answer in time: Telegram may or may not have acted on the request."""


def retry_after_seconds(exc: tg.RetryAfter) -> float:
    # PTB 22 warns on reading ``retry_after`` unless PTB_TIMEDELTA is set; both types are handled.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = exc.retry_after
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    return float(value)


@contextmanager
def translate_telegram_errors() -> Iterator[None]:
    """Re-raise PTB's errors as channel errors, keeping the original as ``__cause__``."""
    try:
        yield
    except tg.RetryAfter as exc:
        raise RetryAfter(retry_after_seconds(exc), exc.message) from exc
    except tg.ChatMigrated as exc:
        raise ChatMigrated(int(exc.new_chat_id)) from exc
    except tg.InvalidToken as exc:
        raise UnknownTokenOrMethod(exc.message) from exc
    except tg.Forbidden as exc:
        raise Forbidden(exc.message) from exc
    except tg.BadRequest as exc:  # before NetworkError: PTB derives BadRequest from it
        raise BadRequest(exc.message) from exc
    except tg.TimedOut as exc:
        raise TelegramTimedOut(exc.message) from exc
    except tg.NetworkError as exc:
        raise TelegramUnavailable(exc.message) from exc
    except tg.TelegramError as exc:
        raise ChannelError(exc.message) from exc
