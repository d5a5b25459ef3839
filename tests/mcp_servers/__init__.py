"""Real MCP servers (the SDK's MCPServer) the MCP client tests run as subprocesses."""
