"""MCP client: tools of external Model Context Protocol servers, offered to the agents.

``McpManager`` (manager.py) runs the configured servers (``ServerSpec``, servers.py), each owned
by one supervisor task (connection.py); their tools become ordinary ``Tool``s named
``<server>__<tool>`` (naming.py) whose results are converted to text (convert.py).

The MCP SDK itself loads with the first connection (manager.py imports connection.py then), so
importing this package stays cheap.
"""

from agent_core.mcp._manager import McpManager
from agent_core.mcp._search import add_mcp_tools
from agent_core.mcp._servers import ServerSpec, ServerState, ServerStatus

__all__ = ["McpManager", "ServerSpec", "ServerState", "ServerStatus", "add_mcp_tools"]
