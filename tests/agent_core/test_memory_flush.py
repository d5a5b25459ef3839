"""The memory flush: one embedded turn that saves durable memories before compaction."""

from __future__ import annotations

from pathlib import Path

from agent_core.errors import ProviderUnavailable
from agent_core.history import MISSING_TOOL_RESULT
from agent_core.memory_flush import FlushResult, flush_window, run_memory_flush
from agent_core.messages import Message
from agent_core.run import RunRequest
from agent_core.settings import AgentSettings, CompactionSettings, MemoryFlushSettings
from agent_core.testing import ScriptedProvider, call, reply, tool_calls

HISTORY = [
    Message.system("old system prompt"),
    Message.user("my cat is called Miso"),
    Message.assistant("Nice name!"),
    Message.user("and I like tea"),
    Message.assistant("Noted."),
]


def settings(tmp_path: Path, **flush: object) -> AgentSettings:
    return AgentSettings(
        id="main",
        model="m",
        workspace=tmp_path,
        compaction=CompactionSettings(memory_flush=MemoryFlushSettings(**flush)),  # type: ignore[arg-type]
    )


async def flush(
    tmp_path: Path, provider: ScriptedProvider, **flush_settings: object
) -> tuple[FlushResult, Path]:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    result = await run_memory_flush(
        provider=provider,
        settings=settings(tmp_path, **flush_settings),
        request=RunRequest(session_key="s1", message="hi", user_id="u1"),
        workspace=workspace,
        messages=HISTORY,
    )
    return result, workspace


class TestFlushWindow:
    def test_latest_messages_without_system(self) -> None:
        assert flush_window(HISTORY, 2) == HISTORY[-2:]
        assert flush_window(HISTORY, 100) == HISTORY[1:]

    def test_zero_window_is_empty(self) -> None:
        assert flush_window(HISTORY, 0) == []

    def test_the_slice_is_repaired(self) -> None:
        c = call("read_file", {"path": "a"})
        messages = [
            Message.user("read a"),
            Message.assistant("", (c,)),
            Message.tool(c, "contents"),
            Message.assistant("done"),
        ]
        # The window starts on the tool result: an orphan, dropped.
        assert flush_window(messages, 2) == [Message.assistant("done")]
        # A call whose result is missing gets a placeholder.
        repaired = flush_window(messages[:2], 2)
        assert repaired[-1].role == "tool" and repaired[-1].content == MISSING_TOOL_RESULT


class TestRunMemoryFlush:
    async def test_nothing_to_store_is_silent(self, tmp_path: Path) -> None:
        provider = ScriptedProvider(reply("NO_REPLY"))
        result, _ = await flush(tmp_path, provider)
        assert result.silent and result.content == "NO_REPLY"
        assert (result.iterations, result.tool_calls) == (1, 0)
        assert not result.timed_out and result.error is None
        [request] = provider.requests
        assert request.messages[0].role == "system"
        assert request.messages[1:-1] == HISTORY[1:]
        assert request.messages[-1] == Message.user(MemoryFlushSettings().prompt)
        assert {t.name for t in request.tools} == {"read_file", "write_file"}
        assert not request.stream

    async def test_window_limits_what_the_model_sees(self, tmp_path: Path) -> None:
        provider = ScriptedProvider(reply("NO_REPLY"))
        await flush(tmp_path, provider, window=2)
        assert provider.requests[0].messages[1:-1] == HISTORY[-2:]

    async def test_memories_are_written_to_the_workspace(self, tmp_path: Path) -> None:
        write = call("write_file", {"path": "memory/2026-01-01.md", "content": "cat: Miso"})
        provider = ScriptedProvider(tool_calls(write), reply("Saved."))
        result, workspace = await flush(tmp_path, provider)
        assert (workspace / "memory" / "2026-01-01.md").read_text() == "cat: Miso"
        assert (result.iterations, result.tool_calls) == (2, 1)
        assert result.content == "Saved." and not result.silent
        assert result.usage is not None
        assert (result.usage.input_tokens, result.usage.output_tokens) == (20, 10)
        second = provider.requests[1].messages
        assert second[-2].tool_calls == (write,)
        assert second[-1].tool_call_id == write.id
        assert second[-1].content.startswith("wrote ")

    async def test_tool_failures_go_back_to_the_model(self, tmp_path: Path) -> None:
        other = call("list_files", {})
        bad_json = call("write_file", "{not json")
        escape = call("write_file", {"path": "../x.md", "content": "x"})
        provider = ScriptedProvider(tool_calls(other, bad_json, escape), reply("NO_REPLY"))
        result, _ = await flush(tmp_path, provider)
        assert result.error is None and result.tool_calls == 3
        results = [m.content for m in provider.requests[1].messages if m.role == "tool"]
        assert results[0] == "Error: tool 'list_files' is not available during the memory flush"
        assert results[1].startswith("Error: arguments are not valid JSON")
        assert results[2].startswith("Error: access denied")
        assert not (tmp_path / "x.md").exists()

    async def test_provider_failure_is_reported_not_raised(self, tmp_path: Path) -> None:
        provider = ScriptedProvider(ProviderUnavailable("502 bad gateway"))
        result, _ = await flush(tmp_path, provider)
        assert result.error == "502 bad gateway"
        assert result.iterations == 1 and result.content == ""
        assert not result.silent  # a failure, not "nothing to save"

    async def test_stops_after_max_iterations(self, tmp_path: Path) -> None:
        reads = [tool_calls(call("read_file", {"path": "MEMORY.md"})) for _ in range(3)]
        provider = ScriptedProvider(*reads)
        result, _ = await flush(tmp_path, provider, max_iterations=3)
        assert result.iterations == 3 and result.tool_calls == 3
        assert len(provider.requests) == 3
        assert result.content == "" and result.error is None

    async def test_timeout_ends_the_turn(self, tmp_path: Path) -> None:
        provider = ScriptedProvider(reply("too late"), delay=30.0)
        result, _ = await flush(tmp_path, provider, timeout=0.05)
        assert result.timed_out and result.content == ""
        assert result.error is None and not result.silent
