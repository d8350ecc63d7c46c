"""Who may continue a session over MCP: only a session whose checkpoint records the same creator (the one
`geode mcp` stated when its first turn ran). Chat, CLI and automation sessions record none, so no MCP client
continues them; a refusal reads the same whether the session exists or not."""

from __future__ import annotations

from typing import Any, Protocol

from geode.protocol.errors import NotFound


class SessionFinder(Protocol):
    def find_session(self, session_id: str | None, *, newest: bool = False) -> dict[str, Any]: ...


class SessionOwners:
    """The creator check of control's ``cli.resume`` (and a HEADLESS re-handshake) for MCP connections."""

    def __init__(self, finder: SessionFinder) -> None:
        self.finder = finder

    @staticmethod
    def refusal(session_id: str | None) -> str:
        """The one answer for "no such session" and "not yours" (existence is not leaked)."""
        return f"no session {session_id!r} started by this MCP client"

    def check(self, session_id: str | None, creator: str, *, absent_ok: bool = False) -> dict[str, Any]:
        """The session's summary when ``creator`` started it; NotFound otherwise. ``absent_ok``: a session
        with no checkpoint yet passes (its first turn, not yet opened, will record this creator)."""
        if not session_id:
            raise NotFound(self.refusal(session_id))
        try:
            summary = self.finder.find_session(session_id)
        except NotFound:
            if absent_ok:
                return {"session_id": session_id}
            raise NotFound(self.refusal(session_id)) from None
        if (summary.get("meta") or {}).get("creator") != creator:
            raise NotFound(self.refusal(session_id))
        return summary
