"""The agent core: knows LLMs, nothing of platforms.

The bot reaches agent_core only through five front doors: this package and the subpackages
``agent_core.providers``, ``agent_core.tools``, ``agent_core.orchestration`` and
``agent_core.mcp``. ``__all__`` here lists what the bot takes from this one; other names stay in
their modules (``agent_core.errors``, ``agent_core.messages``...).
"""

from agent_core.bootstrap import (
    AGENT_LEVEL_FILES,
    MINIMAL_FILES,
    STANDARD_FILES,
    USER_MD,
    AgentType,
    ContextFile,
    PromptMode,
    Workspaces,
    truncate_for_prompt,
)
from agent_core.documents import (
    DocumentEncrypted,
    DocumentUnreadable,
    ExtractedText,
    document_kind,
    extract_text,
)
from agent_core.errors import AgentError
from agent_core.events import Event, EventBus, EventType, Subscriber
from agent_core.exec_approval import Approver, Verdict, exec_hooks
from agent_core.exec_profile import Approval, ExecProfile
from agent_core.hooks import PreToolUseHook
from agent_core.images import ImageUnreadable, prepare_image
from agent_core.locks import SharedLocks
from agent_core.loop import Loop
from agent_core.memory import (
    FileStamp,
    MemoryDocument,
    MemoryHit,
    MemoryIndex,
    memory_tools,
    query_terms,
)
from agent_core.messages import ImagePart, Message, SessionHistory, ToolCall, Usage
from agent_core.prompt import PromptContext, find_skills, render_with_markers
from agent_core.run import RunRequest, RunResult, RunStatus, is_no_reply
from agent_core.sanitize import sanitize_output
from agent_core.schedules import (
    Schedule,
    ScheduleError,
    ScheduleKind,
    parse_schedule,
    time_zone,
)
from agent_core.self_evolution import add_self_evolution_tools
from agent_core.settings import (
    AgentSettings,
    CompactionSettings,
    MemoryFlushSettings,
    PruningSettings,
)
from agent_core.store import MemoryStore, SessionStore, TraceStore
from agent_core.stream_sanitize import safe_preview
from agent_core.tools import FILE_TOOLS, SKILL_TOOLS, Tool, ToolRegistry
from agent_core.tracing import Span, SpanKind, Trace, render_tree
from agent_core.uncancellable import cancel_and_wait, finish_despite_cancel, stop_if_cancelled
from agent_core.usage import Charge, LlmCall, Reservation, UsageLimitReached, UsageMeter
from agent_core.workspace import WorkspaceFull, save_inbox_file, user_workspace

__all__ = [
    "AGENT_LEVEL_FILES",
    "FILE_TOOLS",
    "MINIMAL_FILES",
    "SKILL_TOOLS",
    "STANDARD_FILES",
    "USER_MD",
    "AgentError",
    "AgentSettings",
    "AgentType",
    "Approval",
    "Approver",
    "Charge",
    "CompactionSettings",
    "ContextFile",
    "DocumentEncrypted",
    "DocumentUnreadable",
    "Event",
    "EventBus",
    "EventType",
    "ExecProfile",
    "ExtractedText",
    "FileStamp",
    "ImagePart",
    "ImageUnreadable",
    "LlmCall",
    "Loop",
    "MemoryDocument",
    "MemoryFlushSettings",
    "MemoryHit",
    "MemoryIndex",
    "MemoryStore",
    "Message",
    "PreToolUseHook",
    "PromptContext",
    "PromptMode",
    "PruningSettings",
    "Reservation",
    "RunRequest",
    "RunResult",
    "RunStatus",
    "Schedule",
    "ScheduleError",
    "ScheduleKind",
    "SessionHistory",
    "SessionStore",
    "SharedLocks",
    "Span",
    "SpanKind",
    "Subscriber",
    "Tool",
    "ToolCall",
    "ToolRegistry",
    "Trace",
    "TraceStore",
    "Usage",
    "UsageLimitReached",
    "UsageMeter",
    "Verdict",
    "WorkspaceFull",
    "Workspaces",
    "add_self_evolution_tools",
    "cancel_and_wait",
    "document_kind",
    "exec_hooks",
    "extract_text",
    "find_skills",
    "finish_despite_cancel",
    "is_no_reply",
    "memory_tools",
    "parse_schedule",
    "prepare_image",
    "query_terms",
    "render_tree",
    "render_with_markers",
    "safe_preview",
    "sanitize_output",
    "save_inbox_file",
    "stop_if_cancelled",
    "time_zone",
    "truncate_for_prompt",
    "user_workspace",
]
