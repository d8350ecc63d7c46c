"""A connection's prompt settings: the frozen spec dumped once per spec and session, copied each prompt."""

from __future__ import annotations

from typing import Any

import pytest

from geode.control.connection import Connection
from geode.sessions.factory import SessionMode, SessionSpec


def _spec(session_id: str = "s-1", model: str = "m-1") -> SessionSpec:
    return SessionSpec(
        session_id=session_id,
        mode=SessionMode.IPC,
        workspace="/tmp/ws",
        hitl_level=1,
        approvals="forward",
        time_budget_s=None,
        denied_tools=frozenset({"run_bash", "web_fetch"}),
        allowed_tools=None,
        model=model,
        provider="anthropic",
        model_origin="config",
        visible_tools=("read_file", "glob_files"),
        plan=None,
        plan_hash="h",
        plan_generation=1,
        origin="control",
        skip_permissions=False,
        scope="operator",
    )


def test_dumped_once_per_spec_and_session(monkeypatch: pytest.MonkeyPatch) -> None:
    dumps: list[str | None] = []
    real = SessionSpec.turn_settings

    def counted(self: SessionSpec, session_id: str | None = None) -> dict[str, Any]:
        dumps.append(session_id)
        return real(self, session_id)

    monkeypatch.setattr(SessionSpec, "turn_settings", counted)
    conn = Connection("c-1", spec=_spec())
    first = conn.turn_settings("s-1")
    assert first == real(_spec(), "s-1")
    first["session_source"] = "resume"  # what a resumed session's first prompt adds
    first["denied_tools"].append("x")
    second = conn.turn_settings("s-1")
    assert second == real(_spec(), "s-1") and "session_source" not in second
    assert second["denied_tools"] == ["run_bash", "web_fetch"]
    assert dumps == ["s-1"]
    assert conn.turn_settings("s-2")["session_id"] == "s-2"  # another session: dumped for it
    conn.spec = _spec(model="m-2")  # a new spec (model switch, resume): dumped again
    assert conn.turn_settings("s-2")["model"] == "m-2"
    assert dumps == ["s-1", "s-2", "s-2"]
