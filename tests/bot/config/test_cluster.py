"""``redis.url`` and ``cluster.*``: off by default, and checked against ``database.url``."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bot.cli import main as cli_main
from bot.config import ConfigFileError, parse_config
from bot.redaction import redact, register_secrets, secrets_of

PG = "postgresql+asyncpg://u:p@db/loopgate"


def test_off_by_default() -> None:
    config = parse_config({}, {})
    assert config.redis.url == ""
    assert config.cluster.lease_seconds == 15
    assert config.cluster.key_prefix == "loopgate"


def test_redis_with_postgres_and_env_substitution() -> None:
    config = parse_config(
        {
            "database": {"url": PG},
            "redis": {"url": "${REDIS_URL}"},
            "cluster": {"lease_seconds": 5},
        },
        {"REDIS_URL": "redis://localhost:6379/0"},
    )
    assert config.redis.url == "redis://localhost:6379/0"
    assert config.cluster.lease_seconds == 5


def test_redis_on_sqlite_is_an_error_naming_both_keys() -> None:
    with pytest.raises(ConfigFileError) as info:
        parse_config({"redis": {"url": "redis://localhost:6379/0"}}, {})
    [problem] = info.value.problems
    assert problem.startswith("redis.url:")
    assert "database.url" in problem and "SQLite" in problem


def test_bad_scheme_and_lease() -> None:
    with pytest.raises(ConfigFileError) as info:
        parse_config(
            {
                "database": {"url": PG},
                "redis": {"url": "localhost:6379"},
                "cluster": {"lease_seconds": 0, "leese": 1},
            },
            {},
        )
    text = str(info.value)
    assert "cluster.lease_seconds" in text and "cluster.leese" in text
    with pytest.raises(ConfigFileError, match=r"redis.url: must start with redis://"):
        parse_config({"database": {"url": PG}, "redis": {"url": "localhost:6379"}}, {})


def test_check_config_exits_non_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"redis": {"url": "redis://localhost:6379/0"}}))
    with pytest.raises(SystemExit) as exit_info:
        cli_main(["check-config", "--config", str(path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "redis.url" in err and "database.url" in err


def test_redis_password_is_masked() -> None:
    config = parse_config(
        {"database": {"url": PG}, "redis": {"url": "redis://:s3cr%40t-pw@cache:6379/0"}}, {}
    )
    assert "s3cr@t-pw" in secrets_of(config)
    register_secrets(secrets_of(config))
    assert "s3cr@t-pw" not in redact("connecting with s3cr@t-pw")
