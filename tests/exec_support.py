"""What the ``exec`` tests share: a loop whose fake model (over real HTTP) calls ``exec`` once,
and what the model was given back."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agent_core import (
    AgentSettings,
    EventBus,
    MemoryStore,
    PreToolUseHook,
    RunRequest,
    RunResult,
    user_workspace,
)
from agent_core.loop import Loop
from agent_core.providers import OpenAICompatProvider
from agent_core.sandbox import BwrapSandbox, Limits, Sandbox
from agent_core.tools import Credential, ToolRegistry, exec_tool
from agent_core.tools.files import FILE_TOOLS
from tests.fakes.llm_server import FakeLLM, call, text, tool_calls

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (.ci/run installs it)"
)

# Small limits keep the escape tests fast and the machine safe when one of them fails.
TEST_LIMITS = Limits(timeout=5.0, memory=256 << 20, processes=24, max_output=4096)


@dataclass
class ExecRun:
    result: RunResult
    workspace: Path
    store: MemoryStore
    tool_results: list[str] = field(default_factory=list)

    @property
    def output(self) -> str:
        """What the model got back from the (first) exec call."""
        return self.tool_results[0]


async def run_calls(
    llm: FakeLLM,
    tmp_path: Path,
    calls: Sequence[tuple[str, dict[str, Any]]],
    *,
    sandbox: Sandbox | None = None,
    credentials: Sequence[Credential] = (),
    hooks: Sequence[PreToolUseHook] = (),
    request: RunRequest | None = None,
) -> ExecRun:
    """One run in which the fake model makes ``calls`` one after another, then answers."""
    sandbox = sandbox or BwrapSandbox(limits=TEST_LIMITS)
    llm.script(*(tool_calls(call(name, args)) for name, args in calls), text("done"))
    registry = ToolRegistry.of([*FILE_TOOLS, exec_tool(sandbox, credentials)])
    store = MemoryStore()
    provider = OpenAICompatProvider(llm.base_url)
    settings = AgentSettings(id="main", model="fake-model", workspace=tmp_path / "workspaces")
    loop = Loop(settings, provider, registry, store, store, EventBus(), hooks=hooks)
    request = request or RunRequest("s", "go", "alice")
    try:
        result = await loop.run(request)
    finally:
        await provider.aclose()
    tool_messages = [
        m["content"]
        for m in llm.chat_requests[-1].messages
        if m.get("role") == "tool" and isinstance(m.get("content"), str)
    ]
    workspace = user_workspace(settings.workspace, request.user_id)
    return ExecRun(result, workspace, store, tool_messages)


async def run_exec(llm: FakeLLM, tmp_path: Path, command: str, **kw: Any) -> ExecRun:
    return await run_calls(llm, tmp_path, [("exec", {"command": command})], **kw)


def processes_with(word: str) -> list[int]:
    """Host processes whose command line holds ``word`` (a marker no one else uses)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if word.encode() in cmdline:
            found.append(int(entry.name))
    return found


async def gone(word: str, within: float = 2.0) -> bool:
    """No host process holds ``word`` any more, allowing the kernel a moment to finish the
    killed ones (SIGKILL is delivered asynchronously)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while processes_with(word):
        if loop.time() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True
