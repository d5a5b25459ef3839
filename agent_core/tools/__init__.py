from agent_core.tools.base import Tool, ToolContext, ToolHandler, ToolKind, ToolRegistry
from agent_core.tools.cron import CRON, CronJob, CronJobs, CronPolicy, CronRefused, cron_tool
from agent_core.tools.exec import EXEC, Credential, exec_tool
from agent_core.tools.files import FILE_TOOLS, LIST_FILES, READ_FILE, WRITE_FILE
from agent_core.tools.skills import SKILL_SEARCH, SKILL_TOOLS

__all__ = [
    "CRON",
    "EXEC",
    "FILE_TOOLS",
    "LIST_FILES",
    "READ_FILE",
    "SKILL_SEARCH",
    "SKILL_TOOLS",
    "WRITE_FILE",
    "Credential",
    "CronJob",
    "CronJobs",
    "CronPolicy",
    "CronRefused",
    "Tool",
    "ToolContext",
    "ToolHandler",
    "ToolKind",
    "ToolRegistry",
    "cron_tool",
    "exec_tool",
]
