"""safe_preview: what of a streamed answer may be shown before it is complete."""

from __future__ import annotations

import pytest

from agent_core.sanitize import sanitize_output
from agent_core.stream_sanitize import could_become_no_reply, safe_preview


def test_plain_text_is_shown() -> None:
    assert safe_preview("Hello there") == "Hello there"


@pytest.mark.parametrize(
    "raw",
    ["Hello <", "Hello <thi", "Hello <think", "Hello <think>secret", "Hello </thin", "Hello <T"],
)
def test_a_tag_that_may_hide_text_is_held_back(raw: str) -> None:
    assert safe_preview(raw) == "Hello"


def test_an_open_hidden_tag_with_attributes_is_held_back() -> None:
    assert safe_preview('Hello <tool_call name="x"') == "Hello"


@pytest.mark.parametrize("raw", ["a < b", "x <b", "Hello <thinker>", "x <div class=a"])
def test_text_that_cannot_become_a_hidden_tag_is_shown(raw: str) -> None:
    assert safe_preview(raw) == raw


def test_a_closed_think_block_is_removed() -> None:
    shown = safe_preview("Hello <think>secret</think> world")
    assert "secret" not in shown
    assert shown.startswith("Hello") and shown.endswith("world")


@pytest.mark.parametrize("tail", ["[Tool Ca", "[Tool Call: read", "  [system", "[Historical"])
def test_an_unfinished_marker_line_is_held_back(tail: str) -> None:
    assert safe_preview(f"Hi\n{tail}") == "Hi"


def test_a_marker_word_inside_a_line_is_shown() -> None:
    assert safe_preview("Hi [Tool") == "Hi [Tool"


def test_a_paragraph_that_repeats_the_previous_one_is_held_back() -> None:
    assert safe_preview("Para one.\n\nPara") == "Para one."
    assert safe_preview("Para one.\n\nOther") == "Para one.\n\nOther"


@pytest.mark.parametrize("raw", ["", "  ", "N", "NO_", "NO_REPL", "NO_REPLY"])
def test_what_may_become_no_reply_shows_nothing(raw: str) -> None:
    assert safe_preview(raw) == ""


def test_more_than_no_reply_is_shown() -> None:
    assert safe_preview("NO_REPLY!") == "NO_REPLY!"
    assert safe_preview("Nope") == "Nope"


def test_could_become_no_reply() -> None:
    assert could_become_no_reply("") and could_become_no_reply("  NO")
    assert could_become_no_reply("NO_REPLY")
    assert not could_become_no_reply("No") and not could_become_no_reply("NO_REPLY.")


@pytest.mark.parametrize(
    "answer",
    [
        "Sure.<think>the secret plan</think> Here it is.",
        'Sure. <tool_call>{"name": "secret"}</tool_call>\n\nDone.',
        "Line one\n[Tool Call: secret(x)]\nLine two",
    ],
)
def test_no_prefix_shows_what_the_final_answer_hides(answer: str) -> None:
    final = sanitize_output(answer)
    assert "secret" not in final
    for end in range(len(answer) + 1):
        assert "secret" not in safe_preview(answer[:end]), answer[:end]
