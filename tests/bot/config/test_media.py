"""``media``: the attachment limits and the reply naming what was skipped."""

from __future__ import annotations

import pytest

from bot.config import ConfigFileError, parse_config


def test_defaults() -> None:
    media = parse_config({}, {}).media
    assert media.max_bytes == 20 << 20 and media.max_attachments == 10
    assert media.skipped_reply.format(items="a.jpg (too big)") == "Skipped: a.jpg (too big)."


def test_sizes_take_units() -> None:
    assert parse_config({"media": {"max_bytes": "5MiB"}}, {}).media.max_bytes == 5 << 20


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"media": {"max_bytes": 0}}, r"media\.max_bytes"),
        ({"media": {"max_attachments": -1}}, r"media\.max_attachments"),
        ({"media": {"max_files": 3}}, r"media\.max_files"),
        ({"agents": {"main": {"vision": "sometimes"}}}, r"agents\.list\.0\.vision"),
    ],
)
def test_bad_values_name_the_key(data: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigFileError, match=key):
        parse_config(data, {})
