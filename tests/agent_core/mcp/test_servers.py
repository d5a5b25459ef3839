"""ServerSpec: the transport it derives and the configurations it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_core.mcp._servers import ServerSpec, ServerState


def test_spec_derives_the_transport_and_checks_itself() -> None:
    assert ServerSpec("a", command="npx").transport == "stdio"
    assert ServerSpec("a", url="http://h/mcp").transport == "streamable_http"
    assert ServerSpec("a", url="http://h/sse", transport="sse").transport == "sse"
    with pytest.raises(ValueError, match="either command"):
        ServerSpec("a")
    with pytest.raises(ValueError, match="either command"):
        ServerSpec("a", command="x", url="http://h")
    with pytest.raises(ValueError, match="does not fit"):
        ServerSpec("a", command="x", transport="sse")
    with pytest.raises(ValueError, match="only letters"):
        ServerSpec("a.b", command="x")


def test_kind_is_the_derived_transport() -> None:
    assert ServerSpec("a", command="npx").kind == "stdio"
    assert ServerSpec("a", url="http://h/mcp").kind == "streamable_http"
    assert ServerSpec("a", url="http://h/sse", transport="sse").kind == "sse"
    assert ServerSpec("a", url="http://h/mcp", transport="streamable_http").kind == (
        "streamable_http"
    )


def test_an_http_transport_needs_a_url() -> None:
    with pytest.raises(ValueError, match="does not fit"):
        ServerSpec("a", command="x", transport="streamable_http")
    with pytest.raises(ValueError, match="does not fit"):
        ServerSpec("a", url="http://h", transport="stdio")


@pytest.mark.parametrize(
    ("timeout", "startup_timeout"), [(0, 30.0), (-1, 30.0), (60.0, 0), (60.0, -0.5)]
)
def test_timeouts_must_be_positive(timeout: float, startup_timeout: float) -> None:
    with pytest.raises(ValueError, match="timeouts must be positive"):
        ServerSpec("a", command="x", timeout=timeout, startup_timeout=startup_timeout)


@pytest.mark.parametrize("name", ["", "a b", "a/b", "ä", "a__b!"])
def test_names_outside_letters_digits_underscore_dash_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="only letters"):
        ServerSpec(name, command="x")


def test_a_valid_spec_keeps_what_it_was_given() -> None:
    spec = ServerSpec(
        "My_srv-2",
        command="npx",
        args=("-y", "pkg"),
        env={"K": "v"},
        cwd=Path("/tmp"),
        tools=("a",),
        exclude_tools=("b",),
        protocol="legacy",
    )
    assert (spec.name, spec.args, dict(spec.env), spec.cwd) == (
        "My_srv-2",
        ("-y", "pkg"),
        {"K": "v"},
        Path("/tmp"),
    )
    assert (spec.tools, spec.exclude_tools, spec.protocol) == (("a",), ("b",), "legacy")
    assert spec.enabled and spec.timeout == 60.0 and spec.startup_timeout == 30.0


def test_states_read_as_their_status_words() -> None:
    assert [str(state) for state in ServerState] == [
        "disabled",
        "stopped",
        "starting",
        "ready",
        "failed",
        "restarting",
    ]
