from agent_core.tools.base import Tool, ToolContext, ToolHandler, ToolKind, ToolRegistry
from agent_core.tools.files import FILE_TOOLS, LIST_FILES, READ_FILE, WRITE_FILE

__all__ = [
    "FILE_TOOLS",
    "LIST_FILES",
    "READ_FILE",
    "WRITE_FILE",
    "Tool",
    "ToolContext",
    "ToolHandler",
    "ToolKind",
    "ToolRegistry",
]
