"""The executor endpoint's Service: a Dispatch table for ``tool.*`` (bind, execute, cancel, catalogue)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from geode.protocol import messengers as mm
from geode.protocol import runtime as rt
from geode.protocol import tools as m
from geode.protocol.dispatch import Dispatch
from geode.protocol.errors import BadRequest
from geode.protocol.transport import Request
from geode.tools.executor import ToolExecutor
from geode.tools.plan import BoundToolPlan, PlanError
from geode.tools.reply_delivery import ReplyDelivery
from geode.tools.spec import ToolResult, ToolSpec
from geode.tools.structured_text import carried, render

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
        delivery: ReplyDelivery | None = None,
    ) -> None:
        self.executor = executor
        if catalogue is None:
            from geode.tools.builtin.catalogue import builtin_specs

            catalogue = builtin_specs()
        self.catalogue = list(catalogue)
        self.name = name
        self.incarnation = incarnation
        self.dispatch = Dispatch(
            "the executor",
            {
                rt.PING: lambda b, r: rt.Pong(name=self.name, incarnation=self.incarnation, pid=os.getpid()),
                rt.STATUS: self._status,
                m.PLAN_BIND: self._bind,
                m.EXECUTE: lambda b, r: bounded(self.executor.execute(b.ctx, b.call)),
                m.CATALOGUE: lambda b, r: m.Catalogue(specs=self.catalogue),
                m.CANCEL: lambda b, r: m.ToolCancelled(
                    touched=self.executor.cancel(b.session_id, b.turn_id or None)
                ),
            },
        )
        if delivery is not None:  # messenger.deliver: a turn's reply as a receipted effect
            self.dispatch = Dispatch(
                "the executor", {**self.dispatch.plain_routes, mm.DELIVER: lambda b, r: delivery.deliver(b)}
            )
        self.handle = self.dispatch.handle

    def _status(self, b: rt.StatusQuery, r: Request) -> rt.StatusReply:
        detail = {
            "owner": self.executor.owner,
            "plans": len(self.executor.plans),
            "held_locks": self.executor.locks.held_keys(),
            "in_flight": self.executor.in_flight(),
        }
        return rt.StatusReply(name=self.name, incarnation=self.incarnation, pid=os.getpid(), detail=detail)

    def _bind(self, b: m.PlanBind, r: Request) -> m.PlanBound:
        try:
            plan = BoundToolPlan.from_wire(b.model_dump())
        except (PlanError, ValueError) as exc:
            raise BadRequest(f"invalid plan: {exc}"[:500]) from None
        self.executor.bind_plan(plan)
        return m.PlanBound(content_hash=plan.content_hash, generation=plan.generation, tools=len(plan))


def bounded(result: ToolResult, limit: int = MAX_RESULT_CHARS) -> ToolResult:
    """A result whose content fits the frame: oversized content becomes a marked preview."""
    content = result.content
    text = (
        json.dumps(content, ensure_ascii=False, default=str) if carried(content) is None else render(content)
    )
    if len(text) <= limit:
        return result
    preview = {"_truncated": True, "_original_chars": len(text), "preview": text[: max(1000, limit - 1000)]}
    return result.model_copy(update={"content": preview})
