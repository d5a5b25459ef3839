"""Failures in words: exceptions described, unavailability explained, secrets masked."""

from __future__ import annotations

import asyncio

import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

from agent_core.mcp._failures import MASK, Redactor, describe, unavailable
from agent_core.mcp._servers import ServerSpec, ServerState


def test_redaction_hides_headers_env_and_url_credentials() -> None:
    spec = ServerSpec(
        "a",
        url="https://user:pa55word@h.example/mcp?key=SECRETKEY",
        headers={"Authorization": "Bearer tok-123456"},
    )
    redact = Redactor(spec)
    text = redact(
        "401 for https://user:pa55word@h.example/mcp?key=SECRETKEY with Bearer tok-123456"
    )
    assert "pa55word" not in text and "SECRETKEY" not in text and "tok-123456" not in text
    env_spec = ServerSpec("b", command="x", env={"TOKEN": "s3cr3t-value", "N": "1"})
    assert Redactor(env_spec)("got s3cr3t-value, N=1") == "got ***, N=1"


def test_describe_reads_through_exception_groups() -> None:
    group = ExceptionGroup("tg", [ExceptionGroup("inner", [ConnectionError("refused")])])
    assert describe(group) == "ConnectionError: refused"
    assert describe(MCPError(CONNECTION_CLOSED, "Connection closed")) == "connection closed"
    assert describe(MCPError(-32602, "bad params")) == "MCP error -32602: bad params"


def test_describe_names_a_timeout_by_its_own_words_or_its_kind() -> None:
    assert describe(MCPError(REQUEST_TIMEOUT, "Timed out")) == "request timed out"
    assert describe(TimeoutError("no answer within 3s")) == "no answer within 3s"
    assert describe(TimeoutError()) == "TimeoutError"
    assert describe(ConnectionResetError()) == "ConnectionResetError"


def test_describe_skips_cancellations_in_a_group_for_the_real_error() -> None:
    group = BaseExceptionGroup("tg", [asyncio.CancelledError(), OSError("broken pipe")])
    assert describe(group) == "OSError: broken pipe"
    # A group of only cancellations still says something.
    assert describe(BaseExceptionGroup("tg", [asyncio.CancelledError()])) == "CancelledError"


def test_describe_folds_whitespace_and_bounds_the_length() -> None:
    assert describe(RuntimeError("line one\n\n   line\ttwo ")) == "RuntimeError: line one line two"
    long = describe(RuntimeError("x" * 2000))
    assert len(long) == 500 and long.startswith("RuntimeError: xxx")
    assert len(describe(TimeoutError("y" * 2000))) == 500


@pytest.mark.parametrize(
    ("state", "error", "expected"),
    [
        (ServerState.READY, None, "MCP server 'fs' lost the connection during the call; try again"),
        (
            ServerState.RESTARTING,
            "the server process exited",
            "MCP server 'fs' is restarting (the server process exited); try again shortly",
        ),
        (ServerState.FAILED, "ENOENT", "MCP server 'fs' is unavailable: ENOENT"),
        (ServerState.DISABLED, None, "MCP server 'fs' is disabled"),
        (ServerState.STARTING, None, "MCP server 'fs' is not ready yet"),
        (ServerState.STOPPED, None, "MCP server 'fs' is not ready yet"),
    ],
)
def test_unavailable_says_why_for_each_state(
    state: ServerState, error: str | None, expected: str
) -> None:
    assert unavailable("fs", state, error, stopping=False) == expected


def test_unavailable_while_stopping_says_shut_down_whatever_the_state() -> None:
    for state in ServerState:
        assert unavailable("fs", state, "x", stopping=True) == "MCP server 'fs' was shut down"


def test_redaction_masks_a_longer_secret_whole_before_a_shorter_one_inside_it() -> None:
    spec = ServerSpec("a", command="x", env={"A": "abcd", "B": "abcdefgh"})
    assert Redactor(spec)("key=abcdefgh, other=abcd") == f"key={MASK}, other={MASK}"


def test_redaction_leaves_short_values_and_urls_without_credentials_alone() -> None:
    spec = ServerSpec("a", url="http://127.0.0.1:8080/mcp", headers={"X-N": "1", "X-Id": "abc"})
    text = "GET http://127.0.0.1:8080/mcp gave 1 abc"
    assert Redactor(spec)(text) == text
