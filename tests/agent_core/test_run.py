"""agent_core/run.py: the request's defaults and when a result is silent (nothing delivered)."""

from __future__ import annotations

import pytest

from agent_core.run import NO_REPLY, RunRequest, RunResult, RunStatus, is_no_reply


@pytest.mark.parametrize(
    ("content", "silent"),
    [
        ("", True),
        ("   \n\t", True),
        (NO_REPLY, True),
        (f"  {NO_REPLY}\n", True),
        ("no_reply", False),  # the token is exact
        (f"{NO_REPLY}.", False),
        (f"{NO_REPLY} but here is more", False),
        ("hello", False),
    ],
)
def test_is_no_reply(content: str, silent: bool) -> None:
    assert is_no_reply(content) is silent


@pytest.mark.parametrize("status", [s for s in RunStatus if s is not RunStatus.CANCELLED])
def test_a_result_with_content_is_delivered_whatever_its_status(status: RunStatus) -> None:
    assert RunResult("r", status, content="the answer").silent is False
    assert RunResult("r", status, content=NO_REPLY).silent is True


def test_a_cancelled_run_is_silent_even_with_content() -> None:
    assert RunResult("r", RunStatus.CANCELLED, content="half an answer").silent is True


def test_each_request_gets_its_own_run_id() -> None:
    first, second = RunRequest("s", "m", "u"), RunRequest("s", "m", "u")
    assert first.run_id != second.run_id
    assert len(first.run_id) == 32 and int(first.run_id, 16) >= 0


def test_origin_does_not_take_part_in_equality() -> None:
    # The bot's chat rides along opaquely; two requests for the same run are still equal.
    a = RunRequest("s", "m", "u", run_id="r", origin=object())
    b = RunRequest("s", "m", "u", run_id="r", origin=object())
    assert a == b
    assert a != RunRequest("s", "m", "u", run_id="r", depth=1)


def test_a_fresh_result_has_its_own_usage() -> None:
    first, second = RunResult("a", RunStatus.COMPLETED), RunResult("b", RunStatus.COMPLETED)
    first.usage.input_tokens = 5
    assert second.usage.input_tokens == 0
