"""``[hooks]``: the hook section (``[[hooks.<Event>]]`` entries, ``claude_settings``) and its defaults, a
leaf the hook loader imports."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from geode.hooks.events import HookEvent

DEFAULT_TIMEOUT_S = 10.0  # a hook entry's timeout (s) when it sets none
MAX_TIMEOUT_S = 600.0
CLAUDE_DEFAULT_TIMEOUT_S = 60.0  # Claude Code's default for command hooks


class HookTable(BaseModel):
    """One ``[[hooks.<Event>]]`` entry (``load_hooks`` builds the runnable ``HookEntry`` from it)."""

    model_config = ConfigDict(extra="forbid")
    command: str  # a shell command; the event's JSON on stdin (the Claude Code contract)
    matcher: str = ""  # empty or "*": every tool; otherwise a full-match regex over the tool name
    timeout: float = Field(default=DEFAULT_TIMEOUT_S, gt=0, le=MAX_TIMEOUT_S)
    fail: Literal["closed", "open"] = "closed"  # a deciding hook that fails: deny (closed) or allow (open)
    dialect: Literal["geode", "claude-code"] = "geode"
    name: str = ""  # empty: "<Event>[<index>]"


_HooksBase = create_model(  # type: ignore[call-overload]
    "_HooksBase", **{e.value: (list[HookTable], Field(default_factory=list)) for e in HookEvent}
)


class HooksSection(_HooksBase):  # type: ignore[misc, valid-type]
    """``[hooks]``: one array of tables per event (also checked by ``load_hooks``, whose errors name the
    entry) and ``claude_settings``, Claude Code settings files whose hooks to import."""

    claude_settings: list[str] | str = Field(default_factory=list)
