"""channels/slack/_splitting.py: where long markdown is cut into Slack messages, and the code
block a cut leaves open (closed at the end of one message, reopened in the next)."""

from __future__ import annotations

from channels.slack._splitting import (
    MAX_FENCE_LINE,
    MESSAGE_CHARS,
    RESERVE,
    fence_closer,
    fit,
    open_fence,
    split_for_messages,
)

PART = MESSAGE_CHARS - RESERVE


class TestOpenFence:
    def test_text_without_a_fence_is_not_in_a_block(self) -> None:
        assert open_fence("plain\ntext with `inline` code") is None

    def test_an_unclosed_block_gives_its_opening_line(self) -> None:
        assert open_fence("intro\n  ```python\nx = 1\n") == "```python"

    def test_a_closed_block_is_not_open(self) -> None:
        assert open_fence("```python\nx = 1\n```\nafter") is None

    def test_a_second_block_left_open_counts(self) -> None:
        assert open_fence("```\na\n```\n~~~sh\nls\n") == "~~~sh"

    def test_a_fence_of_the_other_kind_does_not_close(self) -> None:
        assert open_fence("```\ncode\n~~~\n") == "```"

    def test_a_shorter_run_does_not_close_a_longer_one(self) -> None:
        assert open_fence("````md\n```\nnested\n```\n") == "````md"
        assert open_fence("````md\n```\nnested\n```\n````\n") is None

    def test_a_run_followed_by_an_info_string_does_not_close(self) -> None:
        assert open_fence("```\ncode\n```python\n") == "```"

    def test_backticks_with_more_backticks_on_the_line_are_inline_code(self) -> None:
        assert open_fence("```inline``` here\nrest") is None

    def test_four_spaces_of_indent_is_not_a_fence(self) -> None:
        assert open_fence("    ```\ncode") is None


class TestFenceCloser:
    def test_repeats_the_opening_run(self) -> None:
        assert fence_closer("x\n", "````md") == "````"
        assert fence_closer("x\n", "~~~") == "~~~"

    def test_starts_a_new_line_when_the_body_does_not_end_with_one(self) -> None:
        assert fence_closer("x = 1", "```python") == "\n```"


class TestFit:
    def test_everything_when_it_fits(self) -> None:
        assert fit("short", 10, used=0) == 5

    def test_nothing_when_there_is_no_room(self) -> None:
        assert fit("text", 0, used=MESSAGE_CHARS) == 0

    def test_prefers_a_paragraph_break_to_a_later_line_break(self) -> None:
        rest = "a" * 6000 + "\n\n" + "b" * 1000 + "\n" + "c" * 5000
        assert fit(rest, 9000, used=0) == 6002

    def test_a_break_that_leaves_the_message_under_half_full_is_passed_over(self) -> None:
        rest = "a" * 100 + "\n\n" + "b" * 7000 + " " + "c" * 5000
        assert fit(rest, 9000, used=0) == 7103

    def test_what_the_message_holds_already_counts_towards_half(self) -> None:
        rest = "a" * 3000 + "\n" + "b" * 9000
        assert fit(rest, 9000, used=0) == 9000  # the break at 3001 is under half: hard cut
        assert fit(rest, 6000, used=2500) == 3001

    def test_without_a_break_fills_the_room(self) -> None:
        assert fit("x" * 20_000, 9000, used=0) == 9000

    def test_without_a_break_ends_a_half_full_message(self) -> None:
        assert fit("x" * 100, 50, used=MESSAGE_CHARS // 2) == 0

    def test_a_break_at_the_very_start_is_no_cut(self) -> None:
        assert fit(" " + "x" * 100, 50, used=0) == 50


class TestSplitForMessages:
    def test_short_text_is_one_message(self) -> None:
        assert split_for_messages("\n\nhello") == ["hello"]

    def test_empty_text_is_no_message(self) -> None:
        assert split_for_messages("") == []
        assert split_for_messages("\n\n") == []

    def test_words_are_cut_between_words_and_nothing_is_lost(self) -> None:
        text = " ".join(f"w{i}" for i in range(8000))
        parts = split_for_messages(text)
        assert len(parts) > 1
        assert all(len(p) <= PART for p in parts)
        assert "".join(parts) == text
        assert all(p.endswith(" ") for p in parts[:-1])

    def test_paragraphs_are_cut_at_their_breaks(self) -> None:
        paragraph = "x" * 3000
        text = "\n\n".join([paragraph] * 7)
        parts = split_for_messages(text)
        assert all(p.strip("\n") and set(p.strip("\n")) <= {"x", "\n"} for p in parts)
        assert all(len(p) <= PART for p in parts)
        assert [p.strip("\n").count(paragraph) for p in parts] == [3, 3, 1]
        assert "".join(parts) == text

    def test_text_without_breaks_is_cut_hard(self) -> None:
        parts = split_for_messages("x" * 25_000)
        assert [len(p) for p in parts] == [PART, PART, 25_000 - 2 * PART]

    def test_a_code_block_cut_is_closed_and_reopened(self) -> None:
        text = "intro\n```python\n" + "x = 1\n" * 3000 + "```\nafter"
        parts = split_for_messages(text)
        assert len(parts) >= 2
        assert parts[0].endswith("\n```")
        assert all(p.startswith("```python\n") for p in parts[1:])
        assert all(open_fence(p) is None for p in parts)
        assert all(len(p) <= MESSAGE_CHARS for p in parts)
        assert parts[-1].endswith("```\nafter")

    def test_an_overlong_opening_line_is_repeated_as_its_bare_fence(self) -> None:
        opener = "```" + "a" * MAX_FENCE_LINE
        parts = split_for_messages(opener + "\n" + "y = 2\n" * 3000)
        assert len(parts) >= 2
        assert parts[0].startswith(opener) and parts[0].endswith("\n```")
        assert all(p.startswith("```\ny = 2") for p in parts[1:])  # the code stays code
        # Each message closes the block it continues (the last as the answer does: open).
        assert all(open_fence(p) is None for p in parts[:-1])
        assert all(len(p) <= MESSAGE_CHARS for p in parts)
