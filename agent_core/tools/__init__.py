from agent_core.errors import ToolError
from agent_core.tools.base import Tool, ToolContext, ToolHandler, ToolKind, ToolRegistry
from agent_core.tools.cron import CRON, CronJob, CronJobs, CronPolicy, CronRefused, cron_tool
from agent_core.tools.files import FILE_TOOLS, LIST_FILES, READ_FILE, WRITE_FILE
from agent_core.tools.send_file import SEND_FILE, FileSender, OutgoingFile, send_file_tool
from agent_core.tools.skills import SKILL_SEARCH, SKILL_TOOLS
from agent_core.tools.ssrf import AllowList, Refused, Resolver, WebGuard
from agent_core.tools.web import WEB_FETCH, FetchCounter, FetchPolicy, web_fetch_tool
from agent_core.tools.web_client import WebClient, WebLimits
from agent_core.tools.web_search import (
    BRAVE_BASE_URL,
    PROVIDERS,
    TAVILY_BASE_URL,
    WEB_SEARCH,
    SearchProvider,
    search_provider,
    web_search_tool,
)

__all__ = [
    "BRAVE_BASE_URL",
    "CRON",
    "FILE_TOOLS",
    "LIST_FILES",
    "PROVIDERS",
    "READ_FILE",
    "SEND_FILE",
    "SKILL_SEARCH",
    "SKILL_TOOLS",
    "TAVILY_BASE_URL",
    "WEB_FETCH",
    "WEB_SEARCH",
    "WRITE_FILE",
    "AllowList",
    "CronJob",
    "CronJobs",
    "CronPolicy",
    "CronRefused",
    "FetchCounter",
    "FetchPolicy",
    "FileSender",
    "OutgoingFile",
    "Refused",
    "Resolver",
    "SearchProvider",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolHandler",
    "ToolKind",
    "ToolRegistry",
    "WebClient",
    "WebGuard",
    "WebLimits",
    "cron_tool",
    "search_provider",
    "send_file_tool",
    "web_fetch_tool",
    "web_search_tool",
]
