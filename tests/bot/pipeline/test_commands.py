"""``parse_command``: which messages are one of the bot's chat commands."""

from __future__ import annotations

import pytest

from bot.pipeline.commands import HELP_TEXT, Command, parse_command


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("/stop", Command.STOP),
        ("/stopall", Command.STOPALL),
        ("/reset", Command.RESET),
        ("/help", Command.HELP),
    ],
)
def test_each_command_is_recognised(text: str, command: Command) -> None:
    assert parse_command(text) is command


def test_stopall_is_not_read_as_stop() -> None:
    assert parse_command("/stopall") is Command.STOPALL
    assert parse_command("/stopall") is not Command.STOP


@pytest.mark.parametrize("text", ["/STOP", "/Stop", "/sToPaLl", "/HELP"])
def test_the_command_name_ignores_case(text: str) -> None:
    assert parse_command(text) is Command(text[1:].lower())


@pytest.mark.parametrize("text", ["  /stop", "/stop  ", "\n/reset\t", " /help \n"])
def test_surrounding_whitespace_is_ignored(text: str) -> None:
    assert parse_command(text) is not None


@pytest.mark.parametrize(
    "text",
    [
        "/stop now please",
        "please /stop",
        "/stop\nand then something",
        "hello",
        "",
        "   ",
        "stop",
        "/",
        "//stop",
        "/ stop",
        "/unknown",
        "/stopp",
        "/stop2",
        "/stop@",
    ],
)
def test_anything_but_a_lone_known_command_is_not_a_command(text: str) -> None:
    assert parse_command(text, "thisbot") is None


def test_a_command_addressed_to_this_bot_is_ours() -> None:
    assert parse_command("/stop@thisbot", "thisbot") is Command.STOP
    assert parse_command("/reset@ThisBot", "thisbot") is Command.RESET
    assert parse_command("/help@thisbot", "THISBOT") is Command.HELP


def test_a_command_addressed_to_another_bot_is_not_ours() -> None:
    assert parse_command("/stop@otherbot", "thisbot") is None
    assert parse_command("/stopall@thisbot_2", "thisbot") is None


def test_an_addressed_command_is_accepted_when_our_name_is_unknown() -> None:
    # Without a bot username there is nothing to compare the target with.
    assert parse_command("/stop@otherbot") is Command.STOP
    assert parse_command("/stop@otherbot", None) is Command.STOP


def test_an_addressed_unknown_command_is_not_a_command() -> None:
    assert parse_command("/start@thisbot", "thisbot") is None


def test_the_help_text_lists_every_command() -> None:
    for command in Command:
        assert f"/{command.value} " in HELP_TEXT
