from agent_core.tools.base import Tool, ToolContext, ToolHandler, ToolKind, ToolRegistry
from agent_core.tools.files import FILE_TOOLS, LIST_FILES, READ_FILE, WRITE_FILE
from agent_core.tools.skills import SKILL_SEARCH, SKILL_TOOLS

__all__ = [
    "FILE_TOOLS",
    "LIST_FILES",
    "READ_FILE",
    "SKILL_SEARCH",
    "SKILL_TOOLS",
    "WRITE_FILE",
    "Tool",
    "ToolContext",
    "ToolHandler",
    "ToolKind",
    "ToolRegistry",
]
