"""MCP tools in the executor: server config, a stdio client hub, and the bridge to ToolSpecs and handlers."""
