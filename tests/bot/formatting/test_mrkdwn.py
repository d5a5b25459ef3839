"""bot/formatting/mrkdwn.py: Slack's mrkdwn flavour: `&`, `<`, `>` escaped everywhere but in
Slack's own tokens (mentions, channels, dates…), which the model copies verbatim and which must
survive parsing untouched. The constructs of every flavour side by side are in
test_formatting.py."""

from __future__ import annotations

import pytest

from bot.formatting import render
from bot.formatting.mrkdwn import MrkdwnRenderer, escape, escape_keeping_tokens


def mrkdwn(markdown: str) -> str:
    return MrkdwnRenderer().render(markdown)


SLACK_TOKENS = [
    "<@U123ABC>",
    "<@W123>",
    "<#C123>",
    "<#C123|general>",
    "<!here>",
    "<!channel>",
    "<!everyone>",
    "<!subteam^S123>",
    "<!subteam^S123|@team>",
    "<!date^1392734382^{date_num} {time_secs}|Feb 18, 2014>",
]


@pytest.mark.parametrize("token", SLACK_TOKENS)
def test_slack_tokens_survive(token: str) -> None:
    assert render(f"hi {token} & <b>", "mrkdwn") == f"hi {token} &amp; &lt;b&gt;"
    assert render(f"**{token}**", "mrkdwn") == f"*{token}*"
    assert render(f"- item {token}", "mrkdwn") == f"• item {token}"


def test_slack_token_inside_link_label_is_escaped() -> None:
    # A raw <@U1> inside <url|label> would end the link early.
    assert render("[ping <@U1>](https://e.com)", "mrkdwn") == "<https://e.com|ping &lt;@U1&gt;>"


def test_slack_lookalikes_are_escaped() -> None:
    assert render("<@lower> <!nope> <#>", "mrkdwn") == "&lt;@lower&gt; &lt;!nope&gt; &lt;#&gt;"


def test_private_use_sentinels_in_input_round_trip() -> None:
    text = "a \ue000 0 \ue001 b \ue0000\ue001 <@U1>"
    assert render(text, "mrkdwn") == text.replace("<@U1>", "<@U1>")


def test_escape_keeping_tokens_escapes_only_around_them() -> None:
    assert escape_keeping_tokens("a<b <@U1|ann> & <!here> > c") == (
        "a&lt;b <@U1|ann> &amp; <!here> &gt; c"
    )
    assert escape_keeping_tokens("") == ""
    assert escape_keeping_tokens("<@lower>") == "&lt;@lower&gt;"


def test_restore_puts_tokens_back_raw_or_escaped() -> None:
    renderer = MrkdwnRenderer()
    renderer.tokens.append("<@U1>")
    assert renderer.restore("hi \ue0000\ue001!", escaped=False) == "hi <@U1>!"
    assert renderer.restore("hi \ue0000\ue001!", escaped=True) == "hi &lt;@U1&gt;!"
    # A placeholder we never made (its index unknown) stays as it is.
    assert renderer.restore("\ue0007\ue001", escaped=False) == "\ue0007\ue001"


def test_a_renderer_used_twice_keeps_each_texts_tokens() -> None:
    renderer = MrkdwnRenderer()
    assert renderer.render("a <@U1>") == "a <@U1>"
    assert renderer.render("b <#C2>") == "b <#C2>"


def test_a_link_url_cannot_end_early() -> None:
    out = MrkdwnRenderer().link("docs", "https://e.com/a|b>c&d", "docs")
    assert out == "<https://e.com/a%7Cb&gt;c&amp;d|docs>"


def test_a_link_whose_label_is_its_url_is_shown_once() -> None:
    renderer = MrkdwnRenderer()
    assert renderer.link("https://e.com", "https://e.com", "https://e.com") == "<https://e.com>"
    assert renderer.link("", "https://e.com", "") == "<https://e.com>"


@pytest.mark.parametrize("href", ["javascript:alert(1)", "/relative"])
def test_a_scheme_slack_would_not_open_is_shown_not_linked(href: str) -> None:
    assert MrkdwnRenderer().link("x", href, "x") == f"x ({escape(href)})"


def test_code_drops_the_language_and_escapes() -> None:
    assert mrkdwn("```python\nif a < b & c:\n```") == "```\nif a &lt; b &amp; c:\n```"
    assert mrkdwn("`<@U1>`") == "`<@U1>`"  # a token is a token in code too


def test_a_heading_is_bold_once() -> None:
    assert mrkdwn("## Plan **now**") == "*Plan now*"


def test_empty_markup_emits_no_empty_markers() -> None:
    renderer = MrkdwnRenderer()
    parts = (renderer.strong(""), renderer.em(""), renderer.strike(""), renderer.heading(""))
    assert parts == ("", "", "", "")
    assert renderer.table("") == ""
