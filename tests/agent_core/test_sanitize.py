"""The seven-step output sanitizer: each step alone, then the pipeline and its order."""

from __future__ import annotations

import pytest

from agent_core.run import RunResult, RunStatus
from agent_core.sanitize import (
    STEPS,
    collapse_duplicate_paragraphs,
    sanitize_output,
    strip_downgraded_tool_calls,
    strip_echoed_system_messages,
    strip_final_tags,
    strip_garbled_tool_xml,
    strip_leading_blank_lines,
    strip_thinking_tags,
)


class TestGarbledToolXml:
    @pytest.mark.parametrize(
        "garbage",
        [
            '<tool_call>{"name": "read_file", "arguments": {"path": "a"}}</tool_call>',
            '<minimax:tool_call>\n<invoke name="x">\n<parameter name="q">1</parameter>\n'
            "</invoke>\n</minimax:tool_call>",
            '<function_call name="f">{"a": 1}</function_call>',
            '<tool_use><parameter name="path">a.txt</parameter></tool_use>',
            '<tool_call>{"name": "cut off',  # never closed
        ],
    )
    def test_only_garbage_becomes_empty(self, garbage: str) -> None:
        assert strip_garbled_tool_xml(garbage) == ""

    def test_text_around_is_kept(self) -> None:
        text = 'Let me check.\n<tool_call>{"name": "x"}</tool_call>\nDone: 42.'
        assert strip_garbled_tool_xml(text) == "Let me check.\n\nDone: 42."

    def test_other_xml_is_untouched(self) -> None:
        assert (
            strip_garbled_tool_xml("<b>bold</b> and <div>x</div>") == "<b>bold</b> and <div>x</div>"
        )


class TestDowngradedToolCalls:
    def test_marker_line_with_inline_json(self) -> None:
        text = 'Sure.\n[Tool Call: read_file {"path": "a.txt"}]\nThe file says hi.'
        assert strip_downgraded_tool_calls(text) == "Sure.\nThe file says hi."

    def test_marker_then_multiline_json_arguments(self) -> None:
        text = '[Tool Call: write_file]\nArguments: {\n  "path": "a",\n  "content": "x"\n}\nSaved.'
        assert strip_downgraded_tool_calls(text) == "Saved."

    def test_result_and_historical_context_lines(self) -> None:
        text = "[Tool Result for call_1]\n[Historical context: earlier run]\nAnswer."
        assert strip_downgraded_tool_calls(text) == "Answer."

    def test_ordinary_brackets_are_kept(self) -> None:
        text = "[1] a citation\n{not json after a normal line}"
        assert strip_downgraded_tool_calls(text) == text


class TestThinkingTags:
    @pytest.mark.parametrize("tag", ["think", "thinking", "thought", "antThinking", "THINK"])
    def test_each_tag_case_insensitive(self, tag: str) -> None:
        assert strip_thinking_tags(f"<{tag}>secret plan</{tag}>Answer") == "Answer"

    def test_non_greedy(self) -> None:
        text = "<think>a</think>keep<think>b</think> this"
        assert strip_thinking_tags(text) == "keep this"

    def test_lone_closing_tag_drops_what_precedes(self) -> None:
        assert strip_thinking_tags("reasoning without opener</think>Answer") == "Answer"

    def test_unclosed_opener_drops_the_rest(self) -> None:
        assert strip_thinking_tags("Answer<thinking>and then it was cut") == "Answer"


class TestFinalTags:
    def test_unwraps_and_keeps_content(self) -> None:
        assert strip_final_tags("<final>The answer</final>") == "The answer"
        assert strip_final_tags("<FINAL >x</Final>") == "x"


class TestEchoedSystemMessages:
    def test_block_until_empty_line(self) -> None:
        text = "[System Message] run finished\nstatus: ok\n\nHere is your answer."
        assert strip_echoed_system_messages(text) == "Here is your answer."

    def test_block_in_the_middle(self) -> None:
        text = "Intro\n[System Message]\nnoise\n\nOutro"
        assert strip_echoed_system_messages(text) == "Intro\nOutro"


class TestDuplicateParagraphs:
    def test_consecutive_repeats_collapse(self) -> None:
        text = "Hello there.\n\nHello there.\n\nHello there.\n\nBye."
        assert collapse_duplicate_paragraphs(text) == "Hello there.\n\nBye."

    def test_non_consecutive_repeats_stay(self) -> None:
        text = "A\n\nB\n\nA"
        assert collapse_duplicate_paragraphs(text) == text


class TestLeadingBlankLines:
    def test_indentation_of_first_line_is_kept(self) -> None:
        assert strip_leading_blank_lines("\n   \n    code()\nmore") == "    code()\nmore"


class TestPipeline:
    def test_step_order_is_the_specs(self) -> None:
        assert [s.__name__ for s in STEPS] == [
            "strip_garbled_tool_xml",
            "strip_downgraded_tool_calls",
            "strip_thinking_tags",
            "strip_final_tags",
            "strip_echoed_system_messages",
            "collapse_duplicate_paragraphs",
            "strip_leading_blank_lines",
        ]

    def test_everything_at_once(self) -> None:
        raw = (
            "\n\n<think>plan</think>\n"
            '<tool_call>{"name": "x"}</tool_call>\n'
            '[Tool Call: read_file {"path": "a"}]\n'
            "<final>The answer is 4.\n\nThe answer is 4.</final>\n\n"
            "[System Message] done\n\n"
        )
        assert sanitize_output(raw) == "The answer is 4."

    def test_order_matters_thinking_inside_final(self) -> None:
        assert sanitize_output("<final><thinking>x</thinking>ok</final>") == "ok"

    @pytest.mark.parametrize(
        "garbage",
        [
            "<think>only thoughts</think>",
            '<minimax:tool_call><invoke name="a"></invoke></minimax:tool_call>',
            '[Tool Call: x {"a": 1}]',
            "[System Message] hidden\nmore hidden",
            "\n\n  \n",
        ],
    )
    def test_garbage_only_is_empty_and_not_delivered(self, garbage: str) -> None:
        cleaned = sanitize_output(garbage)
        assert cleaned == ""
        assert RunResult("r", RunStatus.COMPLETED, content=cleaned).silent
