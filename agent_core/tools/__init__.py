from agent_core.errors import ToolError
from agent_core.tools.base import Tool, ToolContext, ToolHandler, ToolKind, ToolRegistry
from agent_core.tools.cron import CRON, CronJob, CronJobs, CronPolicy, CronRefused, cron_tool
from agent_core.tools.files import FILE_TOOLS, LIST_FILES, READ_FILE, WRITE_FILE
from agent_core.tools.send_file import SEND_FILE, FileSender, OutgoingFile, send_file_tool
from agent_core.tools.skills import SKILL_SEARCH, SKILL_TOOLS

__all__ = [
    "CRON",
    "FILE_TOOLS",
    "LIST_FILES",
    "READ_FILE",
    "SEND_FILE",
    "SKILL_SEARCH",
    "SKILL_TOOLS",
    "WRITE_FILE",
    "CronJob",
    "CronJobs",
    "CronPolicy",
    "CronRefused",
    "FileSender",
    "OutgoingFile",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolHandler",
    "ToolKind",
    "ToolRegistry",
    "cron_tool",
    "send_file_tool",
]
