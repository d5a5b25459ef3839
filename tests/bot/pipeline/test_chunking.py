"""Splitting markdown answers to platform length limits, before and after rendering."""

from __future__ import annotations

import random
import re
from html.parser import HTMLParser

import pytest

from bot.pipeline.chunking import render_chunks, split_markdown
from channels.types import Formatting

_FENCE_LINE = re.compile(r"^ *(?:`{3,}|~{3,}).*$", re.MULTILINE)


def _content(text: str) -> str:
    """Non-whitespace content with fence lines removed (the splitter adds some)."""
    return "".join(_FENCE_LINE.sub("", text).split())


def _check_chunks(text: str, chunks: list[str], limit: int) -> None:
    for chunk in chunks:
        assert 0 < len(chunk) <= limit, (limit, chunk)
        assert chunk.strip(), chunks
        assert not chunk.startswith("\n") and not chunk.endswith("\n"), chunk
    assert _content("\n".join(chunks)) == _content(text)


@pytest.mark.parametrize("text", ["", "   ", "\n\n \t\n", " \n \n "])
def test_whitespace_only_gives_no_chunks(text: str) -> None:
    assert split_markdown(text, 100) == []


def test_short_text_is_one_chunk_with_blank_edges_stripped() -> None:
    assert split_markdown("\n\n  indented first line\nsecond  \n\n \n", 100) == [
        "  indented first line\nsecond  "
    ]


def test_non_positive_limit_is_rejected() -> None:
    with pytest.raises(ValueError, match="positive"):
        split_markdown("text", 0)


def test_paragraph_boundary_preferred_over_line() -> None:
    text = "p1 line1\np1 line2\n\np2 line1\np2 line2"
    # A line break at offset 27 would also fit in 30; the paragraph break wins.
    assert split_markdown(text, 30) == ["p1 line1\np1 line2", "p2 line1\np2 line2"]


def test_line_boundary_preferred_over_sentence() -> None:
    text = "One. Two three\nfour five six"
    assert split_markdown(text, 20) == ["One. Two three", "four five six"]


def test_sentence_boundary_preferred_over_word() -> None:
    assert split_markdown("One two. Three four five", 20) == ["One two.", "Three four five"]


def test_word_boundary_preferred_over_hard_cut() -> None:
    assert split_markdown("alpha beta gamma", 12) == ["alpha beta", "gamma"]


def test_hard_cut_when_no_boundary() -> None:
    assert split_markdown("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]


def test_code_block_is_moved_whole_rather_than_split() -> None:
    text = "intro line\n\n```py\na = 1\nb = 2\n```\n\nafter"
    # With limit 25 a cut inside the fence (after "a = 1") would fit; the fence start wins.
    assert split_markdown(text, 25) == ["intro line", "```py\na = 1\nb = 2\n```", "after"]


def test_long_code_block_is_closed_and_reopened_with_its_language() -> None:
    code = "\n".join(f"x{i} = {i}" for i in range(6))
    text = f"```python\n{code}\n```\ntail"
    chunks = split_markdown(text, 41)  # exactly room for 4 code lines plus both fence lines
    assert chunks == [
        "```python\nx0 = 0\nx1 = 1\nx2 = 2\nx3 = 3\n```",
        "```python\nx4 = 4\nx5 = 5\n```\ntail",
    ]
    _check_chunks(text, chunks, 41)


def test_reopening_uses_the_same_fence_marker() -> None:
    text = "~~~~ sh\n" + "\n".join(["echo hello"] * 6) + "\n~~~~"
    chunks = split_markdown(text, 45)
    assert chunks == ["~~~~ sh\n" + "\n".join(["echo hello"] * 3) + "\n~~~~"] * 2


def test_long_code_line_is_hard_split_inside_the_fence() -> None:
    chunks = split_markdown("```\n" + "y" * 30 + "\n```", 20)
    assert chunks == [
        "```\n" + "y" * 12 + "\n```",
        "```\n" + "y" * 12 + "\n```",
        "```\n" + "y" * 6 + "\n```",
    ]


def test_unclosed_fence_is_still_split_as_code() -> None:
    chunks = split_markdown("```js\n" + "let a;\n" * 10, 30)
    assert all(chunk.startswith("```js\n") for chunk in chunks)
    assert all(chunk.endswith("\n```") for chunk in chunks[:-1])
    assert not chunks[-1].endswith("```")  # the input never closed it either


def test_fence_lines_longer_than_limit_fall_back_to_plain_cuts() -> None:
    text = "```" + "a" * 30 + "\ncode\n```"
    chunks = split_markdown(text, 10)
    assert all(len(chunk) <= 10 for chunk in chunks)
    assert "".join("".join(chunks).split()) == "".join(text.split())


def test_sentence_and_word_cuts_drop_the_space_at_the_cut() -> None:
    # Leading spaces on the next chunk could turn it into an indented code block.
    assert split_markdown("aaaa.     bbbb", 8) == ["aaaa.", "bbbb"]


_WORDS = ["alpha", "beta", "gamma", "a<b", "x&y", "<i>", "**bold**", "`code`", "Xin chào", "😀"]


def _random_answer(rng: random.Random) -> str:
    blocks: list[str] = []
    for _ in range(rng.randint(1, 25)):
        roll = rng.random()
        if roll < 0.15:
            language = rng.choice(["", "python", "js", "c++"])
            lines = [
                " " * rng.randint(0, 8) + "".join(rng.choices("abc=+();<>& ", k=rng.randint(0, 90)))
                for _ in range(rng.randint(1, 40))
            ]
            blocks.append(f"```{language}\n" + "\n".join(lines) + "\n```")
        elif roll < 0.3:
            blocks.append(
                "\n".join(f"- {rng.choice(_WORDS)} item" for _ in range(rng.randint(1, 8)))
            )
        elif roll < 0.35:
            blocks.append("z" * rng.randint(50, 700))  # a "word" longer than small limits
        else:
            sentences = [
                " ".join(rng.choices(_WORDS, k=rng.randint(1, 15)))
                + rng.choice([".", "!", "?", ""])
                for _ in range(rng.randint(1, 10))
            ]
            blocks.append(rng.choice([" ", "\n"]).join(sentences))
    return rng.choice(["\n\n", "\n", "\n\n\n"]).join(blocks)


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("limit", [20, 57, 300, 2000, 4000, 4096])
def test_random_answers_fit_and_keep_their_content(seed: int, limit: int) -> None:
    text = _random_answer(random.Random(seed))
    chunks = split_markdown(text, limit)
    _check_chunks(text, chunks, limit)
    # Every fence the splitter opened it also closed (the generator closes all of its fences).
    for chunk in chunks:
        assert len(_FENCE_LINE.findall(chunk)) % 2 == 0, chunk


class _BalancedTags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.ok = True

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        self.ok = self.ok and bool(self.stack) and self.stack.pop() == tag


def _balanced(html: str) -> bool:
    parser = _BalancedTags()
    parser.feed(html)
    parser.close()
    return parser.ok and not parser.stack


def test_render_chunks_absorbs_html_escape_growth() -> None:
    text = "a<b && c>d **bold <x>** " * 1000  # rendering roughly doubles the length
    chunks = render_chunks(text, "html", 4096)
    assert all(len(chunk) <= 4096 for chunk in chunks)
    assert all(_balanced(chunk) for chunk in chunks)
    assert len(chunks) <= 2 * (sum(map(len, chunks)) // 4096 + 1)  # no pathological splitting
    assert "".join(chunks).count("&lt;x&gt;") == 1000


@pytest.mark.parametrize(
    ("flavour", "limit"),
    [("plain", 2000), ("mrkdwn", 4000), ("html", 4096), ("markdown", 8000), ("html", 100)],
)
@pytest.mark.parametrize("seed", range(10))
def test_render_chunks_fit_platform_limits(flavour: Formatting, limit: int, seed: int) -> None:
    text = _random_answer(random.Random(seed)) * 3
    chunks = render_chunks(text, flavour, limit)
    assert chunks
    assert all(0 < len(chunk) <= limit and chunk.strip() for chunk in chunks)
    if flavour == "html":
        assert all(_balanced(chunk) for chunk in chunks)


def test_render_chunks_code_block_split_renders_as_code_in_every_chunk() -> None:
    text = "```python\n" + "\n".join(f"print({i} < {i + 1})" for i in range(400)) + "\n```"
    chunks = render_chunks(text, "html", 4096)
    assert len(chunks) > 1
    for chunk in chunks:
        assert chunk.startswith('<pre><code class="language-python">'), chunk[:80]
        assert chunk.endswith("</code></pre>")
        assert len(chunk) <= 4096


def test_render_chunks_markdown_flavour_is_the_plain_split() -> None:
    text = _random_answer(random.Random(3))
    assert render_chunks(text, "markdown", 500) == split_markdown(text, 500)


def test_render_chunks_terminates_with_tiny_limits() -> None:
    # Nothing can fit a 3-char budget once "<" becomes "&lt;": it must still end and fit.
    chunks = render_chunks("<<<<< &&& **b**", "html", 3)
    assert chunks and all(len(chunk) <= 3 for chunk in chunks)


def test_render_chunks_whitespace_only() -> None:
    assert render_chunks("\n \n", "html", 4096) == []
