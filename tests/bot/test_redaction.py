"""``bot.redaction``: configured secrets and ``token=`` query values masked in what is logged
or stored."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator

import pytest

from bot import redaction
from bot.config import parse_config
from bot.redaction import (
    MASK,
    MIN_SECRET_CHARS,
    RedactingFilter,
    redact,
    redact_rendered,
    redact_tree,
    register_secrets,
    secrets_of,
)

SECRET = "s3cr3t-value-1"


@pytest.fixture(autouse=True)
def fresh_secrets(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Registration only ever adds, process-wide: each test starts from none and leaves none."""
    monkeypatch.setattr(redaction, "_SECRETS", redaction._Secrets())
    yield


def test_text_without_secrets_is_unchanged() -> None:
    assert redact("nothing to hide here") == "nothing to hide here"
    register_secrets([SECRET])
    assert redact("nothing to hide here") == "nothing to hide here"


def test_a_registered_secret_is_masked_wherever_it_appears() -> None:
    register_secrets([SECRET])
    assert redact(f"key={SECRET}") == f"key={MASK}"
    assert redact(f"{SECRET} and again {SECRET}!") == f"{MASK} and again {MASK}!"
    assert redact(f"https://api.example/bot{SECRET}/getUpdates") == (
        f"https://api.example/bot{MASK}/getUpdates"
    )


def test_a_secret_is_only_masked_once_registered() -> None:
    assert SECRET in redact(f"x {SECRET}")
    register_secrets([SECRET])
    assert SECRET not in redact(f"x {SECRET}")


def test_registrations_add_up() -> None:
    register_secrets(["first-secret"])
    register_secrets(["second-secret"])
    assert redact("first-secret second-secret") == f"{MASK} {MASK}"


def test_secrets_are_matched_literally_not_as_patterns() -> None:
    register_secrets(["a.b*c+d"])
    assert redact("a.b*c+d") == MASK
    assert redact("aXbbbcdd axbccd") == "aXbbbcdd axbccd"


def test_a_secret_containing_another_is_masked_whole() -> None:
    register_secrets(["abcdef", "abcdef-longer-secret"])
    assert redact("abcdef-longer-secret") == MASK
    register_secrets(["zz-abcdef-longer-secret-zz"])
    assert redact("zz-abcdef-longer-secret-zz") == MASK


def test_short_values_are_not_registered() -> None:
    short = "x" * (MIN_SECRET_CHARS - 1)
    register_secrets([short, ""])
    assert redact(f"a {short} b") == f"a {short} b"
    exact = "y" * MIN_SECRET_CHARS
    register_secrets([exact])
    assert redact(exact) == MASK


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("GET /ws?token=abc123 HTTP/1.1", f"GET /ws?token={MASK} HTTP/1.1"),
        ("/x?a=1&token=abc&b=2", f"/x?a=1&token={MASK}&b=2"),
        ("/x?access_token=abc.def", f"/x?access_token={MASK}"),
        ("/x?TOKEN=abc", f"/x?TOKEN={MASK}"),
        ("url='/x?token=abc'", f"url='/x?token={MASK}'"),
        ('"/x?token=abc"', f'"/x?token={MASK}"'),
        ("/v1/models?api_key=sk-live-1", f"/v1/models?api_key={MASK}"),
        ("/search?q=cats&key=AIzaXYZ", f"/search?q=cats&key={MASK}"),
        ("/hook?secret=s3cret&x=1", f"/hook?secret={MASK}&x=1"),
        ("/db?user=a&password=pw", f"/db?user=a&password={MASK}"),
        # the shortest texts that can carry one (redact skips shorter ones without scanning)
        ("?sig=x", f"?sig={MASK}"),
        ("&key=1", f"&key={MASK}"),
    ],
)
def test_token_query_values_are_masked_without_registration(text: str, masked: str) -> None:
    assert redact(text) == masked


@pytest.mark.parametrize(
    "text", ["/x?mytoken=abc", "/x?tokens=abc", "token=abc", "/x?token=", "/x?monkey=banana"]
)
def test_other_query_parameters_are_left_alone(text: str) -> None:
    assert redact(text) == text


def test_redact_tree_masks_every_string_and_keeps_keys() -> None:
    register_secrets([SECRET])
    tree = {
        "error": f"401 for key {SECRET}",
        SECRET: "the key itself is left alone",
        "attempts": 3,
        "ok": None,
        "nested": {"urls": ["/a?token=t1", ("x", f"bearer {SECRET}")]},
    }
    assert redact_tree(tree) == {
        "error": f"401 for key {MASK}",
        SECRET: "the key itself is left alone",
        "attempts": 3,
        "ok": None,
        "nested": {"urls": [f"/a?token={MASK}", ["x", f"bearer {MASK}"]]},
    }


def test_redact_tree_does_not_change_its_input() -> None:
    register_secrets([SECRET])
    tree = {"a": [SECRET]}
    redact_tree(tree)
    assert tree == {"a": [SECRET]}


def test_redact_tree_on_scalars() -> None:
    register_secrets([SECRET])
    assert redact_tree(SECRET) == MASK
    assert redact_tree(42) == 42
    assert redact_tree(None) is None


def test_the_structlog_processor_masks_text_and_bytes_lines() -> None:
    register_secrets([SECRET])
    assert redact_rendered(None, "info", f"event key={SECRET}") == f"event key={MASK}"
    assert redact_rendered(None, "info", f"k={SECRET}".encode()) == f"k={MASK}".encode()
    other = {"event": SECRET}
    assert redact_rendered(None, "info", other) is other


def record(msg: str, *args: object, exc_info: object = None) -> logging.LogRecord:
    return logging.LogRecord("t", logging.INFO, __file__, 1, msg, args or None, exc_info)  # type: ignore[arg-type]


def test_the_logging_filter_masks_the_formatted_message() -> None:
    register_secrets([SECRET])
    rec = record("calling %s with %s", "https://api", SECRET)
    assert RedactingFilter().filter(rec) is True
    assert rec.getMessage() == f"calling https://api with {MASK}"
    assert rec.args is None


def test_the_logging_filter_leaves_clean_records_untouched() -> None:
    register_secrets([SECRET])
    rec = record("count %d", 3)
    assert RedactingFilter().filter(rec) is True
    assert rec.msg == "count %d"
    assert rec.args == (3,)


def test_the_logging_filter_masks_the_exception_text() -> None:
    register_secrets([SECRET])
    try:
        raise RuntimeError(f"bad key {SECRET}")
    except RuntimeError:
        rec = record("failed", exc_info=sys.exc_info())
    RedactingFilter().filter(rec)
    assert rec.exc_text is not None
    assert "RuntimeError: bad key" in rec.exc_text
    assert SECRET not in rec.exc_text
    # What a handler would print uses the masked text.
    assert SECRET not in logging.Formatter().format(rec)


def test_the_logging_filter_masks_an_already_formatted_exception_text() -> None:
    register_secrets([SECRET])
    rec = record("failed")
    rec.exc_text = f"Traceback: {SECRET}"
    RedactingFilter().filter(rec)
    assert rec.exc_text == f"Traceback: {MASK}"


def test_secrets_of_lists_every_configured_secret() -> None:
    config = parse_config(
        {
            "channels": {
                "telegram": {"token": "tg-token-123456", "webhook_secret": "tg-webhook-1"},
                "slack": {
                    "bot_token": "xoxb-slack-1",
                    "app_token": "xapp-slack-1",
                    "signing_secret": "slack-signing-1",
                },
                "zalo": {"token": "zalo-token-1", "webhook_secret": "zalo-webhook-1"},
            },
            "web": {"token": "web-token-1"},
            "admin": {"token": "admin-token-0123456789"},
            "providers": {
                "openai": {"api_key": "sk-openai-1"},
                "other": {"api_key": "sk-other-1", "base_url": "http://other.test"},
            },
            "database": {"url": "postgresql+asyncpg://user:db-pass-1@db.test/loopgate"},
            "redis": {"url": "redis://:redis-pass-1@redis.test:6379/0"},
            "mcp": {
                "servers": {"s": {"command": "x", "env": {"API_KEY": "mcp-env-1", "PORT": "80"}}}
            },
            "tools": {
                "web": {
                    "search": {
                        "provider": "brave",
                        "brave": {"api_key": "brave-key-1"},
                        "tavily": {"api_key": "tvly-key-1"},
                    }
                }
            },
        },
        {},
    )
    assert set(secrets_of(config)) == {
        "tg-token-123456",
        "tg-webhook-1",
        "xoxb-slack-1",
        "xapp-slack-1",
        "slack-signing-1",
        "zalo-token-1",
        "zalo-webhook-1",
        "web-token-1",
        "admin-token-0123456789",
        "sk-openai-1",
        "sk-other-1",
        "mcp-env-1",
        "brave-key-1",
        "tvly-key-1",
        "db-pass-1",
        "redis-pass-1",
    }


def test_secrets_of_an_empty_config_is_empty() -> None:
    assert secrets_of(parse_config({}, {})) == []


def test_registered_config_secrets_are_masked_in_a_log_line() -> None:
    config = parse_config({"channels": {"telegram": {"token": "123456:ABCdefGHI"}}}, {})
    register_secrets(secrets_of(config))
    line = "POST https://api.telegram.org/bot123456:ABCdefGHI/getUpdates"
    assert redact(line) == f"POST https://api.telegram.org/bot{MASK}/getUpdates"


def test_a_url_escaped_password_is_masked_as_it_appears_in_a_url() -> None:
    db_url = "postgresql+asyncpg://u:p%40ss-word@db.test/loopgate"
    redis_url = "redis://:r%2Fpass-word@redis.test:6379/0"
    config = parse_config({"database": {"url": db_url}, "redis": {"url": redis_url}}, {})
    register_secrets(secrets_of(config))
    assert "p%40ss-word" not in redact(f"cannot connect to {db_url}")
    assert "r%2Fpass-word" not in redact(f"redis down: {redis_url}")
    assert "p@ss-word" not in redact("password p@ss-word")  # the decoded form too
