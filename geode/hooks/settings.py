"""``[hooks]``: the hook section (``[[hooks.<Event>]]`` entries, ``claude_settings``) and its defaults, a
leaf the hook loader imports."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_TIMEOUT_S = 10.0  # a hook entry's timeout (s) when it sets none
MAX_TIMEOUT_S = 600.0
CLAUDE_DEFAULT_TIMEOUT_S = 60.0  # Claude Code's default for command hooks


class HooksSection(BaseModel):
    """``[hooks]``: ``[[hooks.<Event>]]`` arrays (checked by ``load_hooks``) and ``claude_settings``."""

    model_config = ConfigDict(extra="allow")
    claude_settings: list[str] | str = Field(default_factory=list)
