"""`geode mcp`: GEODE as an MCP server (run_agent, continue_agent, get_health) for other MCP hosts."""
