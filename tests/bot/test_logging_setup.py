"""Logging (``logging_setup.py``): our events and the libraries' stdlib records come out in one
format on stderr, Alembic's steps only when debugging, and no secret in either."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from bot.logging_setup import configure_logging
from bot.redaction import register_secrets


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    alembic = logging.getLogger("alembic").level
    yield
    root.handlers[:], root.level = handlers, level
    logging.getLogger("alembic").setLevel(alembic)
    structlog.reset_defaults()


def library(name: str) -> logging.Logger:
    """A library's logger as a fresh process has it: other tests' servers may have configured
    (disabled, detached) loggers of this process."""
    logger = logging.getLogger(name)
    logger.disabled, logger.propagate = False, True
    logger.setLevel(logging.NOTSET)
    return logger


def lines(err: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in err.splitlines() if line.startswith("{")]


def test_a_librarys_record_is_rendered_like_our_events(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", "json")
    structlog.get_logger("bot.test").info("ours.event", answer=42)
    library("tests.a_library").info("Application startup %s.", "complete")
    ours, theirs = lines(capsys.readouterr().err)
    assert ours["event"] == "ours.event" and ours["answer"] == 42
    assert theirs["event"] == "Application startup complete."
    assert theirs["logger"] == "tests.a_library" and theirs["level"] == "info"
    assert "timestamp" in ours and "timestamp" in theirs


def test_alembic_steps_show_only_when_debugging(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", "json")
    library("alembic.runtime.migration").info("Running upgrade 0001 -> 0002")
    library("alembic.runtime.migration").warning("something odd")
    assert [line["event"] for line in lines(capsys.readouterr().err)] == ["something odd"]
    configure_logging("debug", "json")
    library("alembic.runtime.migration").info("Running upgrade 0001 -> 0002")
    assert [line["event"] for line in lines(capsys.readouterr().err)] == [
        "Running upgrade 0001 -> 0002"
    ]


def test_a_secret_in_a_librarys_record_is_masked(capsys: pytest.CaptureFixture[str]) -> None:
    register_secrets(["lib-secret-0123456789"])
    configure_logging("info", "console")
    library("tests.some_library").warning("token is %s", "lib-secret-0123456789")
    err = capsys.readouterr().err
    assert "token is" in err and "lib-secret-0123456789" not in err
