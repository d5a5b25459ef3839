"""MCP client: tools of external Model Context Protocol servers, offered to the agents.

``McpManager`` (manager.py) runs the configured servers (``ServerSpec``, servers.py), each owned
by one supervisor task (connection.py); their tools become ordinary ``Tool``s named
``<server>__<tool>`` (naming.py) whose results are converted to text (convert.py).
"""
