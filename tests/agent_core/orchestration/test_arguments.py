"""agent_core/orchestration/arguments.py: reading the orchestration tools' arguments, one
model-readable ToolError per bad argument."""

from __future__ import annotations

from typing import Any

import pytest

from agent_core.errors import ToolError
from agent_core.orchestration.arguments import MAX_TASK_CHARS, flag, strings, text


def test_text_is_stripped() -> None:
    assert text({"task": "  sum the column \n"}, "spawn", "task") == "sum the column"


@pytest.mark.parametrize("args", [{}, {"task": None}, {"task": ""}, {"task": "   "}, {"task": 3}])
def test_a_required_text_must_be_a_non_empty_string(args: dict[str, Any]) -> None:
    with pytest.raises(ToolError, match="argument 'task' \\(non-empty string\\) is required") as e:
        text(args, "spawn", "task")
    assert e.value.tool_name == "spawn"


def test_an_optional_text_may_be_missing_or_empty_but_not_another_type() -> None:
    assert text({}, "spawn", "context", required=False) == ""
    assert text({"context": None}, "spawn", "context", required=False) == ""
    assert text({"context": "  "}, "spawn", "context", required=False) == ""
    for bad in (["a"], [], 0, False):  # falsy is not missing
        with pytest.raises(ToolError, match="'context'"):
            text({"context": bad}, "spawn", "context", required=False)


def test_a_text_longer_than_the_limit_is_refused_with_its_length() -> None:
    assert text({"task": "x" * MAX_TASK_CHARS}, "spawn", "task") == "x" * MAX_TASK_CHARS
    too_long = "x" * (MAX_TASK_CHARS + 1)
    with pytest.raises(ToolError, match=f"is {MAX_TASK_CHARS + 1} characters \\(max"):
        text({"task": too_long}, "spawn", "task")
    with pytest.raises(ToolError, match="characters"):
        text({"context": too_long}, "spawn", "context", required=False)


def test_flag_takes_its_default_and_only_booleans() -> None:
    assert flag({}, "spawn", "wait", True) is True
    assert flag({}, "spawn", "wait", False) is False
    assert flag({"wait": False}, "spawn", "wait", True) is False
    for bad in ("false", 0, None):
        with pytest.raises(ToolError, match="'wait' must be true or false"):
            flag({"wait": bad}, "spawn", "wait", True)


def test_strings_is_a_list_of_strings_or_nothing() -> None:
    assert strings({}, "delegate", "files") == []
    assert strings({"files": None}, "delegate", "files") == []
    assert strings({"files": ["a.txt", "b.csv"]}, "delegate", "files") == ["a.txt", "b.csv"]
    for bad in ("a.txt", ["a.txt", 3], {"a": 1}):
        with pytest.raises(ToolError, match="'files' must be a list of strings"):
            strings({"files": bad}, "delegate", "files")
