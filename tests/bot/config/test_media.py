"""``media``: the attachment limits and the reply naming what was skipped."""

from __future__ import annotations

import pytest

from bot.config import ConfigFileError, parse_config


def test_defaults() -> None:
    media = parse_config({}, {}).media
    assert media.max_bytes == 20 << 20 and media.max_attachments == 10
    assert media.skipped_reply.format(items="a.jpg (too big)") == "Skipped: a.jpg (too big)."
    assert media.document_max_chars == 8000
    assert media.transcription.provider is None
    assert media.transcription.model == "whisper-1"


def test_the_transcription_provider_must_be_defined() -> None:
    providers = {"default": "openai", "speech": {"base_url": "http://127.0.0.1:9/v1"}}
    media = parse_config(
        {"providers": providers, "media": {"transcription": {"provider": "speech"}}}, {}
    ).media
    assert media.transcription.provider == "speech"
    with pytest.raises(
        ConfigFileError, match=r"media\.transcription\.provider: unknown provider 'nope'"
    ):
        parse_config({"media": {"transcription": {"provider": "nope"}}}, {})


def test_sizes_take_units() -> None:
    assert parse_config({"media": {"max_bytes": "5MiB"}}, {}).media.max_bytes == 5 << 20


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"media": {"max_bytes": 0}}, r"media\.max_bytes"),
        ({"media": {"max_attachments": -1}}, r"media\.max_attachments"),
        ({"media": {"max_files": 3}}, r"media\.max_files"),
        ({"media": {"document_max_chars": 10}}, r"media\.document_max_chars"),
        ({"media": {"transcription": {"timeout": 0}}}, r"media\.transcription\.timeout"),
        ({"media": {"transcription": {"modle": "x"}}}, r"media\.transcription\.modle"),
        ({"agents": {"main": {"vision": "sometimes"}}}, r"agents\.list\.0\.vision"),
    ],
)
def test_bad_values_name_the_key(data: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigFileError, match=key):
        parse_config(data, {})
