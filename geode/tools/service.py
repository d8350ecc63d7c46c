"""The executor endpoint's Service: ``tool.plan.bind``, ``tool.execute``, ``tool.execute_batch``."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from geode.protocol import runtime as rt
from geode.protocol import tools as m
from geode.protocol.errors import BadRequest
from geode.protocol.transport import Request
from geode.tools.executor import ToolExecutor
from geode.tools.plan import BoundToolPlan, PlanError
from geode.tools.spec import ToolResult, ToolSpec

MAX_RESULT_CHARS = 600_000  # keeps a reply well under the 1 MiB frame cap


class ToolService:
    """Stateless adapter over a ToolExecutor (which is thread-safe)."""

    def __init__(
        self,
        executor: ToolExecutor,
        *,
        name: str = "executor",
        incarnation: int = 0,
        catalogue: Sequence[ToolSpec] | None = None,
    ) -> None:
        self.executor = executor
        if catalogue is None:
            from geode.tools.builtin.catalogue import builtin_specs

            catalogue = builtin_specs()
        self.catalogue = list(catalogue)
        self.name = name
        self.incarnation = incarnation

    def handle(self, request: Request) -> BaseModel | dict[str, Any] | None:
        body = request.body
        if request.type == rt.PING:
            return rt.Pong(name=self.name, incarnation=self.incarnation, pid=os.getpid())
        if request.type == rt.STATUS:
            detail = {
                "owner": self.executor.owner,
                "plans": len(self.executor.plans),
                "held_locks": self.executor.locks.held_keys(),
                "in_flight": self.executor.in_flight(),
            }
            return rt.StatusReply(
                name=self.name, incarnation=self.incarnation, pid=os.getpid(), detail=detail
            )
        if isinstance(body, m.PlanBind):
            try:
                plan = BoundToolPlan.from_wire(body.model_dump())
            except (PlanError, ValueError) as exc:
                raise BadRequest(f"invalid plan: {exc}"[:500]) from None
            self.executor.bind_plan(plan)
            return m.PlanBound(content_hash=plan.content_hash, generation=plan.generation, tools=len(plan))
        if isinstance(body, m.ToolExecute):
            return bounded(self.executor.execute(body.ctx, body.call))
        if isinstance(body, m.CatalogueQuery):
            return m.Catalogue(specs=self.catalogue)
        if isinstance(body, m.ToolCancel):
            return m.ToolCancelled(touched=self.executor.cancel(body.session_id, body.turn_id or None))
        if isinstance(body, m.ToolExecuteBatch):
            results = self.executor.execute_batch([(i.ctx, i.call) for i in body.items])
            per = MAX_RESULT_CHARS // max(1, len(results))
            return m.ToolResults(results=[bounded(r, per) for r in results])
        raise BadRequest(f"executor does not handle {request.type}")


def bounded(result: ToolResult, limit: int = MAX_RESULT_CHARS) -> ToolResult:
    """A result whose content fits the frame: oversized content becomes a marked preview."""
    text = json.dumps(result.content, ensure_ascii=False, default=str)
    if len(text) <= limit:
        return result
    preview = {"_truncated": True, "_original_chars": len(text), "preview": text[: max(1000, limit - 1000)]}
    return result.model_copy(update={"content": preview})
