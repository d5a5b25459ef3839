"""The ``admin`` section: the token's minimum length and its masking in logs."""

from __future__ import annotations

import pytest

from bot.config import ConfigFileError, parse_config
from bot.redaction import secrets_of
from tests.admin_support import TOKEN


def test_short_token_is_a_config_error() -> None:
    with pytest.raises(ConfigFileError, match=r"admin\.token: .*at least 16 characters"):
        parse_config({"admin": {"token": "secret"}}, {})


def test_token_from_the_environment_is_masked_in_logs() -> None:
    config = parse_config({"admin": {"token": "${ADMIN_TOKEN}"}}, {"ADMIN_TOKEN": TOKEN})
    assert config.admin.token == TOKEN
    assert TOKEN in secrets_of(config)
