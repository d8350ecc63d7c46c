"""Operator requests on the control socket: status, sessions, receipts, reconcile, restart, stop."""

from __future__ import annotations

from typing import Any

from geode.protocol import control as c
from geode.protocol import lanes as lanes_msg
from geode.protocol import runtime
from geode.protocol.dispatch import Handler
from geode.protocol.errors import BadRequest, GeodeError, NotFound
from geode.protocol.transport import Request, Transport
from geode.records.store_client import StoreClient


class OperatorDesk:
    """Forwards operator requests to the supervisor, lanes and the store; one typed reply each."""

    def __init__(self, transport: Transport, *, lanes: str = "lanes", supervisor: str = "supervisor") -> None:
        self.transport = transport
        self.lanes, self.supervisor = lanes, supervisor
        self.store = StoreClient(transport, attempts=2)

    def routes(self) -> dict[str, Handler]:
        """The operator's rows of the control socket's Dispatch table (``cli.status`` ... ``cli.stop``)."""
        return {
            c.STATUS: lambda b, r: self.status(),
            c.SESSIONS: lambda b, r: {
                "sessions": [s.model_dump(mode="json") for s in self.store.list_sessions()]
            },
            c.RECEIPTS: self._receipts,
            c.RECONCILE: self._reconcile,
            c.RESTART: lambda b, r: self.transport.call(
                self.supervisor, runtime.TREE_RESTART, runtime.RestartChild(name=b.child), timeout_s=30.0
            ),
            c.STOP: lambda b, r: self.transport.call(
                self.supervisor, runtime.TREE_STOP, runtime.StopTree(), timeout_s=5.0
            ),
        }

    def _receipts(self, b: c.Receipts, r: Request) -> dict[str, Any]:
        rows = self.store.list_receipts(session_id=b.session_id, uncertain_only=b.uncertain_only)
        return {"receipts": [row.model_dump(mode="json") for row in rows]}

    def _reconcile(self, b: c.Reconcile, r: Request) -> dict[str, Any]:
        rec = self.store.reconcile(b.operation_id, outcome=b.outcome, by="operator", note=b.note)
        return {"receipt": rec.model_dump(mode="json")}

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, target, type_ in (
            ("tree", self.supervisor, runtime.TREE_STATUS),
            ("lanes", self.lanes, lanes_msg.LANES_STATUS),
        ):
            try:
                out[key] = self.transport.call(target, type_, {}, timeout_s=2.0)
            except GeodeError as exc:
                out[key] = {"error": exc.code.value, "message": exc.message[:200]}
        return out

    def find_session(self, session_id: str | None, *, newest: bool = False) -> dict[str, Any]:
        """The session to resume: by id, or the newest active/paused one for ``--continue``."""
        sessions = self.store.list_sessions()
        if session_id:
            for s in sessions:
                if s.session_id == session_id:
                    return s.model_dump(mode="json")
            restored = self.store.load_checkpoint(session_id)
            if restored is None:
                raise NotFound(f"no session {session_id!r}")
            return {
                "session_id": session_id,
                "message_count": restored.state.message_count,
                "status": restored.state.status.value,
                "meta": restored.state.meta,
            }
        if not newest:
            raise BadRequest("resume needs a session id or continue=true")
        live = [s for s in sessions if s.status.value in ("active", "paused")]
        if not live:
            raise NotFound("no session to continue")
        best = max(live, key=lambda s: s.updated_at)
        return best.model_dump(mode="json")
