"""``tracing``: the OTLP endpoint, its URL and the errors that name the key."""

from __future__ import annotations

import pytest

from bot.config import ConfigFileError, parse_config
from bot.redaction import secrets_of


def test_off_by_default() -> None:
    tracing = parse_config({}, {}).tracing
    assert tracing.otlp.endpoint == "" and tracing.service_name == "loopgate"
    assert tracing.otlp.timeout == 10.0


@pytest.mark.parametrize(
    ("endpoint", "url"),
    [
        ("http://collector:4318", "http://collector:4318/v1/traces"),
        ("http://collector:4318/", "http://collector:4318/v1/traces"),
        ("https://otlp.example.com/v1/traces", "https://otlp.example.com/v1/traces"),
        ("https://example.com/otlp", "https://example.com/otlp/v1/traces"),
    ],
)
def test_the_traces_path_is_added_once(endpoint: str, url: str) -> None:
    config = parse_config({"tracing": {"otlp": {"endpoint": endpoint}}}, {})
    assert config.tracing.otlp.traces_url == url


def test_an_empty_environment_variable_leaves_it_off() -> None:
    data = {"tracing": {"otlp": {"endpoint": "${OTLP_ENDPOINT:-}", "timeout": "5s"}}}
    otlp = parse_config(data, {}).tracing.otlp
    assert otlp.endpoint == "" and otlp.timeout == 5.0


def test_header_values_are_secrets() -> None:
    data = {"tracing": {"otlp": {"endpoint": "http://c:4318", "headers": {"x-key": "k-123456"}}}}
    assert "k-123456" in secrets_of(parse_config(data, {}))


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"tracing": {"otlp": {"endpoint": "collector:4318"}}}, r"tracing\.otlp\.endpoint"),
        ({"tracing": {"otlp": {"endpoint": "grpc://c:4317"}}}, r"tracing\.otlp\.endpoint"),
        ({"tracing": {"otlp": {"timeout": 0}}}, r"tracing\.otlp\.timeout"),
        (
            {"tracing": {"otlp": {"endpoint": "http://c", "protocol": "grpc"}}},
            r"tracing\.otlp\.protocol",
        ),
        ({"tracing": {"service_name": ""}}, r"tracing\.service_name"),
    ],
)
def test_bad_values_name_the_key(data: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigFileError, match=key):
        parse_config(data, {})
