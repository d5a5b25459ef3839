"""``tools.web``: the web tools' limits, the guard's openings and the search provider."""

from __future__ import annotations

from typing import Any

import pytest

from bot.config import ConfigFileError, parse_config
from bot.config.web_tools import WebToolsConfig


def web(data: dict[str, Any], environ: dict[str, str] | None = None) -> WebToolsConfig:
    return parse_config({"tools": {"web": data}}, environ or {}).tools.web


def test_defaults() -> None:
    config = parse_config({}, {}).tools.web
    assert config.fetch is True
    assert config.max_bytes == 2 << 20 and config.timeout == 15.0 and config.max_chars == 20_000
    assert config.max_fetches_per_run == 10 and config.max_redirects == 5
    assert config.allow_hosts == [] and not config.allow_list()
    assert config.search.active == "none"


def test_units() -> None:
    config = web({"max_bytes": "512KiB", "timeout": "1m"})
    assert config.max_bytes == 512 << 10 and config.timeout == 60.0


def test_allow_hosts_takes_names_addresses_and_networks() -> None:
    allow = web({"allow_hosts": ["searx.lan", "192.168.1.20", "10.0.0.0/8", "fd00::/8"]})
    parsed = allow.allow_list()
    assert parsed.names == {"searx.lan"} and len(parsed.networks) == 3


class TestSearchProvider:
    def test_the_one_configured_provider_is_the_default(self) -> None:
        search = web({"search": {"brave": {"api_key": "${BRAVE_KEY}"}}}, {"BRAVE_KEY": "b"}).search
        assert search.active == "brave" and search.base_url() == "https://api.search.brave.com"

    def test_an_empty_key_from_the_environment_means_none(self) -> None:
        data = {"search": {"tavily": {"api_key": "${TAVILY_KEY:-}"}}}
        assert web(data).search.active == "none"

    def test_searxng_by_its_base_url(self) -> None:
        search = web({"search": {"searxng": {"base_url": "http://searx.lan:8888"}}}).search
        assert search.active == "searxng" and search.base_url() == "http://searx.lan:8888"

    def test_an_explicit_provider_wins_and_none_switches_search_off(self) -> None:
        both = {"brave": {"api_key": "b"}, "tavily": {"api_key": "t"}}
        assert web({"search": {"provider": "tavily", **both}}).search.active == "tavily"
        assert web({"search": {"provider": "none", **both}}).search.active == "none"

    def test_secrets_are_listed_for_redaction(self) -> None:
        search = web({"search": {"brave": {"api_key": "b-secret"}}}).search
        assert search.secrets() == ["b-secret"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"allow_hosts": ["http://searx.lan"]}, r"tools\.web\.allow_hosts: .*entry 0"),
        ({"allow_hosts": ["10.0.0.0/40"]}, r"tools\.web\.allow_hosts: .*entry 0"),
        ({"max_bytes": 0}, r"tools\.web\.max_bytes"),
        ({"timeout": 0}, r"tools\.web\.timeout"),
        ({"max_fetches_per_run": 0}, r"tools\.web\.max_fetches_per_run"),
        ({"fetch": "maybe"}, r"tools\.web\.fetch"),
        ({"search": {"provider": "google"}}, r"tools\.web\.search\.provider"),
        ({"search": {"provider": "brave"}}, r"tools\.web\.search: brave\.api_key: required"),
        ({"search": {"provider": "searxng"}}, r"tools\.web\.search: searxng\.base_url: required"),
        (
            {"search": {"brave": {"api_key": "b"}, "tavily": {"api_key": "t"}}},
            r"tools\.web\.search: provider: brave, tavily are all configured",
        ),
        ({"search": {"brave": {"base_url": "ftp://x"}}}, r"tools\.web\.search\.brave\.base_url"),
        ({"search": {"bing": {}}}, r"tools\.web\.search\.bing: unknown key"),
    ],
)
def test_bad_values_name_the_key(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigFileError, match=message):
        web(data)
