"""bot/formatting/html.py: Telegram's HTML flavour: only the tags Telegram knows, every piece of
text escaped, and Telegram's nesting rules (no code in a link, no nested blockquote). The
constructs of every flavour side by side are in test_formatting.py."""

from __future__ import annotations

import pytest

from bot.formatting import render
from bot.formatting.html import HtmlRenderer, escape


def html(markdown: str) -> str:
    return HtmlRenderer().render(markdown)


def test_escape_leaves_quotes_alone() -> None:
    assert escape("""<a href="x"> & 'y'""") == """&lt;a href="x"&gt; &amp; 'y'"""


def test_unsafe_code_language_is_sanitised() -> None:
    out = render('```py"><script>\nx\n```', "html")
    assert out == '<pre><code class="language-pyscript">x</code></pre>'


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("```c++ extra words\nx\n```", '<pre><code class="language-c++">x</code></pre>'),
        ("```objective-c\nx\n```", '<pre><code class="language-objective-c">x</code></pre>'),
        ('```"<>"\nx\n```', "<pre>x</pre>"),  # nothing of the info string is left
    ],
)
def test_only_the_first_word_of_the_info_string_names_the_language(
    markdown: str, expected: str
) -> None:
    assert html(markdown) == expected


def test_code_blocks_and_tables_escape_their_text() -> None:
    assert html("```\na < b && c\n```") == "<pre>a &lt; b &amp;&amp; c</pre>"
    assert html("| a<b |\n|---|\n| x&y |") == "<pre>a&lt;b\n---\nx&amp;y</pre>"


def test_a_heading_is_bold_once() -> None:
    assert html("# Title with **bold** and *it*") == "<b>Title with bold and <i>it</i></b>"


def test_code_inside_a_link_loses_its_monospace_but_not_its_escaping() -> None:
    assert html("[`a<b` docs](https://e.com)") == '<a href="https://e.com">a&lt;b docs</a>'


def test_a_link_escapes_its_href_quotes_included() -> None:
    out = HtmlRenderer().link("x", 'https://e.com/?q="a"&b=<c>', "x")
    assert out == '<a href="https://e.com/?q=&quot;a&quot;&amp;b=&lt;c&gt;">x</a>'


def test_a_link_without_text_shows_its_href() -> None:
    assert HtmlRenderer().link("", "https://e.com/?a&b", "") == (
        '<a href="https://e.com/?a&amp;b">https://e.com/?a&amp;b</a>'
    )


@pytest.mark.parametrize("href", ["javascript:alert(1)", "/relative", "ftp://e.com/f"])
def test_a_scheme_telegram_may_reject_is_shown_not_linked(href: str) -> None:
    assert HtmlRenderer().link("x", href, "x") == f"x ({escape(href)})"


def test_empty_markup_emits_no_empty_tags() -> None:
    renderer = HtmlRenderer()
    parts = (renderer.strong(""), renderer.em(""), renderer.strike(""), renderer.heading(""))
    assert parts == ("", "", "", "")
    assert (renderer.blockquote(""), renderer.table("")) == ("", "")


def test_a_quote_inside_a_quote_keeps_visible_markers() -> None:
    renderer = HtmlRenderer()
    renderer.quote_depth = 1  # rendering inside one enclosing quote
    assert renderer.blockquote("a\n\nb") == "&gt; a\n&gt;\n&gt; b"
    assert html("> outer\n>\n> > inner\n> > more") == (
        "<blockquote>outer\n\n&gt; inner\n&gt; more</blockquote>"
    )


def test_raw_html_in_the_answer_is_text() -> None:
    assert html('<a href="https://evil">click</a> & <b>') == (
        '&lt;a href="https://evil"&gt;click&lt;/a&gt; &amp; &lt;b&gt;'
    )
