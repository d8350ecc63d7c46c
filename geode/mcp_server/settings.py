"""``[mcp.serve]``: ``geode mcp`` as a server (its HTTP bearer token), a leaf section."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

MAX_TOKEN = 512  # longest bearer token accepted (the floor is resolve_token's)


class McpServeSection(BaseModel):
    """``[mcp.serve]``: ``geode mcp`` as a server. ``token``: the bearer token HTTP clients must send
    (``GEODE_MCP_TOKEN`` in the environment or ``$GEODE_HOME/.env`` wins); required off loopback."""

    model_config = ConfigDict(extra="forbid")
    token: str | None = Field(default=None, max_length=MAX_TOKEN)  # the length floor: resolve_token
