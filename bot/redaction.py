"""No secret in any log line: configured secrets are masked in everything logged.

Libraries log what they see: python-telegram-bot and httpx put the bot token in the URLs they
log, uvicorn logs request lines with ``?token=``. Instead of trusting each of them, every
rendered structlog line and every stdlib log record goes through :func:`redact`, which masks
each secret the configuration holds (tokens, signing and webhook secrets, API keys,
``web.token``, the database password) and any credential-named query value (``token=``,
``api_key=``, ``key=``, ``secret=``, ``password=``...).

Stored traces and inbox reasons are masked the same way when written, and the run events the
web chat relays when sent: an error text quoting a secret (a provider echoing its key, an
exception naming a URL) would otherwise reach the database, ``loopgate traces`` and a browser.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

from sqlalchemy.engine import make_url

from bot.config import Config
from bot.config.cluster import redis_password

MASK = "***"
MIN_SECRET_CHARS = 6  # shorter values would mask ordinary words
# Query parameters that carry a credential, whoever's URL it is (a provider's key in a URL the
# configuration does not know, a webhook secret in a request line).
_QUERY_TOKEN = re.compile(
    r"(?i)([?&](?:token|access_token|api_key|apikey|key|secret|password|signature|sig)=)"
    r"[^&\s\"']+"
)


class _Secrets:
    def __init__(self) -> None:
        self.values: set[str] = set()
        self.pattern: re.Pattern[str] | None = None

    def add(self, values: Iterable[str]) -> None:
        fresh = {v for v in values if len(v) >= MIN_SECRET_CHARS} - self.values
        if not fresh:
            return
        self.values |= fresh
        # Longest first, so a secret containing another is masked whole.
        alternatives = sorted(self.values, key=len, reverse=True)
        self.pattern = re.compile("|".join(re.escape(v) for v in alternatives))


_SECRETS = _Secrets()


def redact(text: str) -> str:
    # Most texts are short names and ids, or carry no query string: the two scans are skipped
    # when they can't match (a secret is at least MIN_SECRET_CHARS long, and so is "?key=x").
    if len(text) < MIN_SECRET_CHARS:
        return text
    if _SECRETS.pattern is not None:
        text = _SECRETS.pattern.sub(MASK, text)
    if "=" in text:
        text = _QUERY_TOKEN.sub(rf"\g<1>{MASK}", text)
    return text


def redact_tree(value: Any) -> Any:
    """``value`` with :func:`redact` applied to every string in it (JSON-like data: trace span
    attributes, run events), keys left alone."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: redact_tree(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact_tree(item) for item in value]
    return value


def register_secrets(values: Iterable[str]) -> None:
    """Mask these values from now on, in this process (registration only ever adds)."""
    _SECRETS.add(values)


def secrets_of(config: Config) -> list[str]:
    channels = config.channels
    values = [
        channels.telegram.token,
        channels.telegram.webhook_secret,
        channels.slack.bot_token,
        channels.slack.app_token,
        channels.slack.signing_secret,
        channels.zalo.token,
        channels.zalo.webhook_secret,
        config.web.token,
        config.admin.token,
        *(provider.api_key for provider in config.providers.all().values()),
        *config.mcp.secrets(),
        *config.tools.exec.secrets(),
        *config.tools.web.search.secrets(),
        *config.tracing.otlp.headers.values(),
    ]
    try:
        password = make_url(config.database.url).password
    except Exception:  # an unparsable URL fails at open, with its own redacted message
        password = None
    if password:
        values.append(str(password))
    values.append(redis_password(config.redis.url))
    # A URL in a log line or an error carries a password as escaped (``p%40ss``), not decoded.
    escaped = [quote(str(v), safe="") for v in (password, redis_password(config.redis.url)) if v]
    return [v for v in [*values, *escaped] if v]


def redact_rendered(_: Any, __: str, rendered: Any) -> Any:
    """The last structlog processor: masks the rendered line."""
    if isinstance(rendered, str):
        return redact(rendered)
    if isinstance(rendered, bytes):
        return redact(rendered.decode("utf-8", errors="replace")).encode()
    return rendered


class RedactingFilter(logging.Filter):
    """For stdlib handlers: the record's final message, masked."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = redact(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and record.exc_text is None and record.exc_info[1] is not None:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True
