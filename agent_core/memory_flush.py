"""Memory flush (spec section 8): one embedded agent turn that saves durable memories.

Runs before post-run compaction truncates the history: Minimal prompt, the latest messages
only, ``read_file`` and ``write_file`` only, at most ``max_iterations`` model calls within
``timeout`` seconds. ``NO_REPLY`` (nothing worth keeping) is a normal outcome. It never raises
for provider or tool failures: a failed flush is logged and compaction goes on.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog

from agent_core.bootstrap import ContextFile, PromptMode
from agent_core.errors import AgentError
from agent_core.history import sanitize_history
from agent_core.messages import Message, Usage
from agent_core.prompt import build_system_prompt
from agent_core.providers.base import ModelRequest, Provider
from agent_core.run import RunRequest, is_no_reply
from agent_core.settings import AgentSettings
from agent_core.tools.base import ToolContext, ToolRegistry
from agent_core.tools.files import READ_FILE, WRITE_FILE

log = structlog.get_logger(__name__)

FLUSH_TOOLS = ToolRegistry.of((READ_FILE, WRITE_FILE))


@dataclass(slots=True)
class FlushResult:
    content: str = ""
    iterations: int = 0
    tool_calls: int = 0
    usage: Usage | None = None
    timed_out: bool = False
    error: str | None = None

    @property
    def silent(self) -> bool:
        """The flush ran to its end and had nothing to say (a failure is not silence)."""
        return self.error is None and not self.timed_out and is_no_reply(self.content)


def flush_window(messages: Sequence[Message], window: int) -> list[Message]:
    """The latest ``window`` messages, repaired so the slice starts on a valid sequence."""
    recent = [m for m in messages if m.role != "system"][-window:] if window > 0 else []
    return sanitize_history(recent)


async def run_memory_flush(
    *,
    provider: Provider,
    settings: AgentSettings,
    request: RunRequest,
    workspace: Path,
    messages: Sequence[Message],
    files: Sequence[ContextFile] = (),
) -> FlushResult:
    flush = settings.compaction.memory_flush
    result = FlushResult(usage=Usage())
    system = build_system_prompt(
        settings, request, FLUSH_TOOLS, workspace, mode=PromptMode.MINIMAL, files=files
    )
    convo = [
        Message.system(system),
        *flush_window(messages, flush.window),
        Message.user(flush.prompt),
    ]
    ctx = ToolContext(
        workspace=workspace,
        session_key=request.session_key,
        user_id=request.user_id,
        agent_id=settings.id,
        run_id=f"flush-{uuid.uuid4().hex[:12]}",
        max_file_bytes=settings.max_file_bytes,
        workspace_max_bytes=settings.workspace_max_bytes,
    )
    try:
        async with asyncio.timeout(flush.timeout):
            for _ in range(flush.max_iterations):
                result.iterations += 1
                response = await provider.complete(
                    ModelRequest(
                        model=settings.model,
                        messages=convo,
                        tools=FLUSH_TOOLS.specs(),
                        stream=False,
                        temperature=settings.temperature,
                    )
                )
                assert result.usage is not None
                result.usage.add(response.usage)
                if not response.tool_calls:
                    result.content = response.content.strip()
                    break
                convo.append(Message.assistant(response.content, tuple(response.tool_calls)))
                for call in response.tool_calls:
                    result.tool_calls += 1
                    convo.append(Message.tool(call, await _run_flush_tool(call, ctx)))
    except TimeoutError:
        result.timed_out = True
        log.warning("memory_flush.timeout", session_key=request.session_key, after=flush.timeout)
    except AgentError as exc:
        result.error = str(exc)
        log.warning("memory_flush.failed", session_key=request.session_key, error=str(exc)[:200])
    log.info(
        "memory_flush.done",
        session_key=request.session_key,
        iterations=result.iterations,
        tool_calls=result.tool_calls,
        silent=result.silent,
    )
    return result


async def _run_flush_tool(call: object, ctx: ToolContext) -> str:
    from agent_core.messages import ToolCall

    assert isinstance(call, ToolCall)
    tool = FLUSH_TOOLS.get(call.name)
    if tool is None:
        return f"Error: tool {call.name!r} is not available during the memory flush"
    try:
        return await tool.handler(call.parsed_arguments(), ctx)
    except (AgentError, ValueError, OSError) as exc:
        return f"Error: {exc}"
