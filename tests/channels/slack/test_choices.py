"""Buttons on Slack (``ChoicePoster``): the message with its buttons, and a click coming back,
over HTTP and Socket Mode, as the command its button carries from the user who clicked."""

from __future__ import annotations

from typing import Any

from channels import ChatRef, ChatType, ChoicePoster
from channels.slack._choices import click_message
from tests.fakes.slack_events import block_actions
from tests.slack_support import Bot

CHOICES = [("Approve", "/approve"), ("Deny", "/deny")]


async def click(bot: Bot, payload: dict[str, Any]) -> None:
    if bot.mode == "http":
        response = await bot.sender.send_interaction(payload)
        assert response.status_code == 200, response.text
    else:
        envelope = await bot.slack.push(payload, kind="interactive")
        await bot.slack.wait_for(lambda: envelope in bot.slack.acks)


async def test_buttons_are_posted_in_the_thread(bot: Bot) -> None:
    assert isinstance(bot.channel, ChoicePoster)
    chat = ChatRef("slack", "C1", ChatType.GROUP, "1700000000.000100")
    await bot.channel.send_choices(chat, "Run `ls`?", CHOICES)
    (call,) = bot.slack.calls_of("chat.postMessage")
    assert call.args["thread_ts"] == "1700000000.000100" and call.args["text"] == "Run `ls`?"
    section, actions = call.args["blocks"]
    assert section["text"]["text"] == "Run `ls`?"
    assert [(b["text"]["text"], b["value"]) for b in actions["elements"]] == CHOICES


async def test_a_long_text_goes_out_whole_before_the_buttons(bot: Bot) -> None:
    text = "x" * 3500
    await bot.channel.send_choices(ChatRef("slack", "D1"), text, CHOICES)
    first, second = bot.slack.calls_of("chat.postMessage")
    assert first.args["text"] == text and "blocks" not in first.args
    assert second.args["blocks"][1]["type"] == "actions"


async def test_a_click_is_the_command_from_the_clicker(bot: Bot) -> None:
    thread = "1700000000.000200"
    await click(bot, block_actions("/approve", user="UOWNER", thread_ts=thread))
    await bot.slack.wait_for(lambda: bool(bot.slack.thread_texts("C1", thread)))
    # The gateway took it as /approve typed in that thread: nothing is waiting there.
    assert bot.slack.thread_texts("C1", thread) == ["No command is waiting for approval here."]


def test_clicks_on_other_buttons_or_commands_are_ignored() -> None:
    assert click_message("slack", block_actions("/approve", action_id="someone_else")) is None
    assert click_message("slack", block_actions("/reset")) is None
    msg = click_message("slack", block_actions("/deny", user="U9", channel="D4"))
    assert msg is not None and msg.text == "/deny" and msg.sender.id == "U9"
    assert msg.chat == ChatRef("slack", "D4", ChatType.DIRECT, None)
