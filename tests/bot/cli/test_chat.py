"""``loopgate chat`` (``bot/cli/chat.py``): one message with ``-m`` and the interactive terminal,
through the same pipeline and against the fake model server."""

from __future__ import annotations

import builtins
import getpass
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli import chat
from bot.cli.chat import run_chat
from bot.logging_setup import configure_logging
from tests.conftest import make_config
from tests.fakes.llm_server import FakeLLM, call, error, text, tool_calls


@pytest.fixture(autouse=True)
def quiet() -> None:
    """Logs as ``loopgate chat`` has them: warnings only, so stdout is the conversation."""
    configure_logging("warning", "console")


def typed(monkeypatch: pytest.MonkeyPatch, *lines: str | BaseException) -> list[str]:
    """``input()`` answers ``lines`` in turn (an exception is raised instead); the prompts
    shown are returned."""
    prompts: list[str] = []
    queue: Iterator[str | BaseException] = iter(lines)

    def fake_input(prompt: str = "") -> str:
        prompts.append(prompt)
        line = next(queue, EOFError())
        if isinstance(line, BaseException):
            raise line
        return line

    monkeypatch.setattr(builtins, "input", fake_input)
    return prompts


class TestOneMessage:
    async def test_prints_the_reply_and_exits_0(
        self, tmp_path: Path, llm: FakeLLM, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert await run_chat(make_config(tmp_path, llm), "hello") == 0
        assert capsys.readouterr().out == "echo: hello\n"
        [request] = llm.chat_requests
        assert request.messages[-1]["content"].endswith("hello")

    async def test_a_failed_run_exits_1_after_saying_so(
        self, tmp_path: Path, llm: FakeLLM, capsys: pytest.CaptureFixture[str]
    ) -> None:
        llm.script(*[error(400, "bad request")] * 5)
        config = make_config(tmp_path, llm)
        assert await run_chat(config, "hello") == 1
        assert capsys.readouterr().out == f"{config.bot.error_reply}\n"


class TestInteractive:
    async def test_answers_each_line_and_shows_tool_calls(
        self,
        tmp_path: Path,
        llm: FakeLLM,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        llm.script(tool_calls(call("list_files", {})), text("no files"))
        prompts = typed(monkeypatch, "what is here?", "   ")  # then EOF, as piped input ends
        assert await run_chat(make_config(tmp_path, llm), None) == 0
        out = capsys.readouterr().out
        assert out.startswith("Loopgate terminal chat.")
        assert "  [tool] list_files\n" in out
        assert out.index("[tool] list_files") < out.index("\nbot> no files\n")
        assert len(llm.chat_requests) == 2  # the blank line asked nothing
        assert prompts[0] == "you> "

    async def test_piped_input_is_answered_before_leaving(
        self,
        tmp_path: Path,
        llm: FakeLLM,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        typed(monkeypatch, "one", "two")  # EOF right after: the answers are still awaited
        assert await run_chat(make_config(tmp_path, llm), None) == 0
        out = capsys.readouterr().out
        assert "bot> echo: one" in out and "bot> echo: two" in out

    async def test_ctrl_c_ends_the_session(
        self,
        tmp_path: Path,
        llm: FakeLLM,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        typed(monkeypatch, KeyboardInterrupt())
        assert await run_chat(make_config(tmp_path, llm), None) == 0
        assert llm.chat_requests == []


def test_the_user_is_local_when_the_system_has_no_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(getpass, "getuser", lambda: "erin")
    assert chat._user() == "erin"

    def nameless() -> str:
        raise OSError("no user name")

    monkeypatch.setattr(getpass, "getuser", nameless)
    assert chat._user() == "local"
