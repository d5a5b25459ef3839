"""Where a shared file shows in Slack: the share's ts when Slack already gives it."""

from __future__ import annotations

from channels.slack._files import share_ts


def test_the_share_in_the_channel_names_the_message() -> None:
    file = {"id": "F1", "shares": {"private": {"D1": [{"ts": "1.2"}]}, "public": {}}}
    assert share_ts(file, "D1") == "1.2"
    assert share_ts(file, "C9") == ""


def test_no_share_yet() -> None:
    assert share_ts({"id": "F1"}, "D1") == ""
    assert share_ts({"id": "F1", "shares": {}}, "D1") == ""
