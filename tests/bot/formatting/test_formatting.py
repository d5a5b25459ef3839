"""Markdown → Telegram HTML / Slack mrkdwn / plain text."""

from __future__ import annotations

import random
import re
from html.parser import HTMLParser

import pytest

from bot.formatting import render
from channels.types import Formatting

TABLE = "| Name | Qty |\n|:--|--:|\n| apple | 3 |\n| banana | 12 |"
TABLE_TEXT = "Name   | Qty\n-------+----\napple  |   3\nbanana |  12"

# (markdown, telegram html, slack mrkdwn, plain)
CASES: list[tuple[str, str, str, str]] = [
    ("**bold**", "<b>bold</b>", "*bold*", "bold"),
    ("*it* _it_", "<i>it</i> <i>it</i>", "_it_ _it_", "it it"),
    ("~~gone~~", "<s>gone</s>", "~gone~", "gone"),
    ("***both***", "<i><b>both</b></i>", "_*both*_", "both"),
    ("`a<b`", "<code>a&lt;b</code>", "`a&lt;b`", "a<b"),
    (
        "```python\nif a < b:\n    pass\n```",
        '<pre><code class="language-python">if a &lt; b:\n    pass</code></pre>',
        "```\nif a &lt; b:\n    pass\n```",
        "if a < b:\n    pass",
    ),
    ("```\nx\n```", "<pre>x</pre>", "```\nx\n```", "x"),
    (
        "    indented\n    code",
        "<pre>indented\ncode</pre>",
        "```\nindented\ncode\n```",
        "indented\ncode",
    ),
    (
        "[site](https://e.com/?a=1&b=2)",
        '<a href="https://e.com/?a=1&amp;b=2">site</a>',
        "<https://e.com/?a=1&amp;b=2|site>",
        "site (https://e.com/?a=1&b=2)",
    ),
    ("<https://x.io>", '<a href="https://x.io">https://x.io</a>', "<https://x.io>", "https://x.io"),
    ("<me@x.io>", '<a href="mailto:me@x.io">me@x.io</a>', "<mailto:me@x.io|me@x.io>", "me@x.io"),
    (
        '[q](https://e.com/"q")',
        '<a href="https://e.com/%22q%22">q</a>',
        "<https://e.com/%22q%22|q>",
        "q (https://e.com/%22q%22)",
    ),
    # Relative links mean nothing in a chat: shown, never linked.
    ("[rel](/docs)", "rel (/docs)", "rel (/docs)", "rel (/docs)"),
    ("[x]()", "x", "x", "x"),
    ("# Title", "<b>Title</b>", "*Title*", "Title"),
    ("## Sub **b**", "<b>Sub b</b>", "*Sub b*", "Sub b"),
    (
        "- a\n- b\n  - c **d**",
        "• a\n• b\n  • c <b>d</b>",
        "• a\n• b\n  • c *d*",
        "• a\n• b\n  • c d",
    ),
    ("3. x\n4. y\n\n   more", "3. x\n4. y\n   more", "3. x\n4. y\n   more", "3. x\n4. y\n   more"),
    (
        "> quoted\n> text",
        "<blockquote>quoted\ntext</blockquote>",
        "> quoted\n> text",
        "> quoted\n> text",
    ),
    # Telegram rejects nested blockquotes.
    ("> a\n>\n> > b", "<blockquote>a\n\n&gt; b</blockquote>", "> a\n>\n> > b", "> a\n>\n> > b"),
    ("a\n\n---\n\nb", "a\n\n———\n\nb", "a\n\n———\n\nb", "a\n\n———\n\nb"),
    (TABLE, f"<pre>{TABLE_TEXT}</pre>", f"```\n{TABLE_TEXT}\n```", TABLE_TEXT),
    (
        "![cat](https://i.io/c.png)",
        '<a href="https://i.io/c.png">cat</a>',
        "<https://i.io/c.png|cat>",
        "cat (https://i.io/c.png)",
    ),
    (
        "![](https://i.io/c.png)",
        '<a href="https://i.io/c.png">https://i.io/c.png</a>',
        "<https://i.io/c.png>",
        "https://i.io/c.png",
    ),
    (
        "[![img](https://i.io/a.png)](https://e.com)",
        '<a href="https://e.com">img</a>',
        "<https://e.com|img>",
        "img (https://e.com)",
    ),
    # Telegram: no code entity inside a link; bold may contain code.
    (
        "[`code` link](https://e.com)",
        '<a href="https://e.com">code link</a>',
        "<https://e.com|`code` link>",
        "code link (https://e.com)",
    ),
    ("**`x`**", "<b><code>x</code></b>", "*`x`*", "x"),
    ("a\nb", "a\nb", "a\nb", "a\nb"),
    ("a  \nb", "a\nb", "a\nb", "a\nb"),
    ("a\\\nb", "a\nb", "a\nb", "a\nb"),
    (
        "<b>hi</b> & <script>x</script>",
        "&lt;b&gt;hi&lt;/b&gt; &amp; &lt;script&gt;x&lt;/script&gt;",
        "&lt;b&gt;hi&lt;/b&gt; &amp; &lt;script&gt;x&lt;/script&gt;",
        "<b>hi</b> & <script>x</script>",
    ),
    ("&amp; &copy; \\*not em\\*", "&amp; © *not em*", "&amp; © *not em*", "& © *not em*"),
    (
        "para one\n\npara two",
        "para one\n\npara two",
        "para one\n\npara two",
        "para one\n\npara two",
    ),
]


@pytest.mark.parametrize(("markdown", "html", "mrkdwn", "plain"), CASES)
def test_render_constructs(markdown: str, html: str, mrkdwn: str, plain: str) -> None:
    assert render(markdown, "html") == html
    assert render(markdown, "mrkdwn") == mrkdwn
    assert render(markdown, "plain") == plain


@pytest.mark.parametrize("markdown", ["**x** <b>", "", "```\nunclosed", "# h\n\n- a"])
def test_markdown_flavour_is_passthrough(markdown: str) -> None:
    assert render(markdown, "markdown") == markdown


def test_table_alignment_counts_wide_characters() -> None:
    out = render("| a | b |\n|---|:-:|\n| 🍌 | x |\n| long | y |", "plain")
    assert out == "a    | b\n-----+--\n🍌   | x\nlong | y"


def test_list_nesting_and_continuation_indent() -> None:
    markdown = "1. first\n   second line\n2. two\n   - sub\n     1. deep"
    assert render(markdown, "plain") == "1. first\n   second line\n2. two\n   • sub\n     1. deep"


def test_render_falls_back_to_escaped_text_on_renderer_bug(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bot.formatting import html as html_module
    from bot.formatting import mrkdwn as mrkdwn_module

    def boom(self: object, markdown: str) -> str:
        raise RuntimeError("bug")

    monkeypatch.setattr(html_module.HtmlRenderer, "render", boom)
    monkeypatch.setattr(mrkdwn_module.MrkdwnRenderer, "render", boom)
    assert render("**a** <b> & <@U1>", "html") == "**a** &lt;b&gt; &amp; &lt;@U1&gt;"
    assert render("**a** <b> & <@U1>", "mrkdwn") == "**a** &lt;b&gt; &amp; <@U1>"


# --- validity on hostile input -------------------------------------------------------------

ALLOWED_TAGS = {"b", "i", "u", "s", "code", "pre", "a", "blockquote", "tg-spoiler"}
# Telegram: code/pre contain nothing (but <pre><code class>), links contain no code,
# blockquotes don't nest.
FORBIDDEN_INSIDE = {"code": ALLOWED_TAGS, "a": {"a", "code", "pre"}, "blockquote": {"blockquote"}}


class TelegramHtmlValidator(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in ALLOWED_TAGS:
            self.errors.append(f"tag <{tag}>")
        names = [name for name, _ in attrs]
        if tag == "a" and names != ["href"]:
            self.errors.append(f"<a> attrs {names}")
        elif tag == "code" and names:
            cls = dict(attrs).get("class") or ""
            if names != ["class"] or not cls.startswith("language-") or self.stack[-1:] != ["pre"]:
                self.errors.append(f"<code> attrs {attrs}")
        elif tag != "a" and tag != "code" and names:
            self.errors.append(f"<{tag}> attrs {names}")
        for parent in self.stack:
            if parent == "pre" and not (tag == "code" and self.stack[-1] == "pre"):
                self.errors.append(f"<{tag}> inside <pre>")
            if tag in FORBIDDEN_INSIDE.get(parent, set()):
                self.errors.append(f"<{tag}> inside <{parent}>")
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unbalanced </{tag}> (open: {self.stack})")
            return
        self.stack.pop()

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.errors.append(f"self-closing <{tag}/>")

    def handle_decl(self, decl: str) -> None:
        self.errors.append(f"declaration {decl}")

    def handle_comment(self, data: str) -> None:
        self.errors.append(f"comment {data}")

    def handle_pi(self, data: str) -> None:
        self.errors.append(f"processing instruction {data}")


_ENTITY = re.compile(r"&(?!amp;|lt;|gt;|quot;|#x27;)")


def assert_valid_telegram_html(out: str) -> None:
    validator = TelegramHtmlValidator()
    validator.feed(out)
    validator.close()
    assert not validator.errors, (validator.errors, out[:500])
    assert not validator.stack, (validator.stack, out[:500])
    assert not _ENTITY.search(out), out[:500]  # every & starts an entity Telegram knows


_SLACK_ANGLE = re.compile(
    r"<(?:https?://|mailto:|tg://)[^<>|\s]*(?:\|[^<>]*)?>"
    r"|<(?:[@][UW][A-Z0-9]+|#[CG][A-Z0-9]+|!(?:here|channel|everyone)|!subteam\^[A-Z0-9]+)"
    r"(?:\|[^<>\n]*)?>|<!date\^[^<>\n]+>"
)


_LINE_MARKERS = re.compile(r"^(?:[ ]*(?:•|\d+\.|>)(?:[ ]|$))*", re.MULTILINE)


def assert_valid_mrkdwn(out: str) -> None:
    # Every angle bracket left must be a quote marker, or belong to a link or a Slack token;
    # every & must start an entity.
    leftover = _SLACK_ANGLE.sub("", _LINE_MARKERS.sub("", out))
    assert "<" not in leftover and ">" not in leftover, out[:500]
    assert not re.search(r"&(?!amp;|lt;|gt;)", out), out[:500]


def _random_markdown(rng: random.Random, size: int) -> str:
    pieces = [
        "**",
        "*",
        "_",
        "~~",
        "`",
        "```",
        "```py\n",
        "\n",
        "\n\n",
        "> ",
        "- ",
        "1. ",
        "# ",
        "<",
        ">",
        "&",
        '"',
        "<script>",
        "</b>",
        "<b>",
        "[",
        "](",
        ")",
        "](https://e.com/?a=1&b=2)",
        "![",
        "|",
        "|---|",
        "\\",
        "\x00",
        "😀",
        "שלום",
        "مرحبا",
        "Xin chào",
        "<@U1>",
        "<!here>",
        "&amp;",
        "&#0;",
        "    ",
        "\t",
        "---",
        "text",
        " ",
        "<https://x.io>",
        "\ue000",
        "\u202e",
    ]
    return "".join(rng.choice(pieces) for _ in range(size))


HOSTILE = [
    "```\nunclosed fence <b>",
    "**",
    "<script>alert('x')</script>",
    "a\x00b",
    "😀" * 50,
    "שלום עולם **bold** مرحبا",
    "> " * 200 + "deep",
    "- " * 200 + "deep",
    "[" * 500 + "x" + "]" * 500,
    "*" * 1000,
    "`" * 1000,
    "| a |\n|---|\n" + "| <b> |\n" * 50,
    "<!-- comment --> <?php ?> <!DOCTYPE html> <![CDATA[x]]>",
    '[x](javascript:alert(1)) [y](https://e.com/"><script>)',
    "&lt;already escaped&gt; & &amp;amp;",
]


@pytest.mark.parametrize("markdown", HOSTILE)
def test_hostile_input_renders_valid_output(markdown: str) -> None:
    assert_valid_telegram_html(render(markdown, "html"))
    assert_valid_mrkdwn(render(markdown, "mrkdwn"))
    assert isinstance(render(markdown, "plain"), str)


def test_script_is_escaped() -> None:
    assert render("<script>x</script>", "html") == "&lt;script&gt;x&lt;/script&gt;"
    assert render("<script>x</script>", "mrkdwn") == "&lt;script&gt;x&lt;/script&gt;"


@pytest.mark.parametrize("seed", range(40))
def test_random_input_never_raises_and_stays_valid(seed: int) -> None:
    rng = random.Random(seed)
    markdown = _random_markdown(rng, rng.randint(1, 300))
    flavours: tuple[Formatting, ...] = ("html", "mrkdwn", "plain", "markdown")
    outputs = {flavour: render(markdown, flavour) for flavour in flavours}
    assert_valid_telegram_html(outputs["html"])
    assert_valid_mrkdwn(outputs["mrkdwn"])


def test_large_input() -> None:
    rng = random.Random(7)
    markdown = _random_markdown(rng, 25_000)[:100_000]
    assert_valid_telegram_html(render(markdown, "html"))
    assert_valid_mrkdwn(render(markdown, "mrkdwn"))
    assert render(markdown, "plain")
