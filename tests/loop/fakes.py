"""Test collaborators for the loop: a real in-process store, a receipt-keeping executor, failing wrappers."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from geode.protocol.transport import LocalTransport
from geode.records.engine import RecordEngine
from geode.records.models import AdmitKind, ReceiptIdentity
from geode.records.service import StoreService
from geode.records.store_client import StoreClient
from geode.redaction import fingerprint
from geode.tools.plan import BoundToolPlan
from geode.tools.spec import EffectClass, SafetyPolicy, ToolCall, ToolContext, ToolResult, ToolSpec

Handler = Callable[[dict[str, Any]], Any]


def read_spec(name: str) -> ToolSpec:
    return ToolSpec(name=name, description=f"read {name}", handler=f"test:{name}")


def write_spec(name: str) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=f"write {name}",
        handler=f"test:{name}",
        policy=SafetyPolicy(effect=EffectClass.MUTATE, resource_strategy="global:test"),
    )


def open_store(tmp: Path) -> tuple[RecordEngine, StoreClient]:
    engine = RecordEngine(tmp / "records", tmp / "evidence").open()
    transport = LocalTransport({"store": StoreService(engine)})
    return engine, StoreClient(transport, attempts=1)


class Crash(BaseException):
    """Simulates the loop worker dying at a precise point (propagates through the loop like SIGKILL would)."""


class FakeExecutor:
    """Mimics the executor contract: stale plans refused, effects admitted/committed as receipts."""

    def __init__(self, records: Any, handlers: dict[str, Handler], *, owner: str = "executor#1") -> None:
        self.records = records
        self.handlers = handlers
        self.owner = owner
        self.plan: BoundToolPlan | None = None
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()
        self.before_handler: Callable[[ToolContext, ToolCall], None] | None = None
        self.crash: dict[str, str] = {}  # tool_use id -> "before_admit" | "after_admit" | "after_commit"

    def bind_plan(self, plan: BoundToolPlan) -> None:
        self.plan = plan

    def execute(self, ctx: ToolContext, call: ToolCall) -> ToolResult:
        plan = self.plan
        if plan is None or not plan.matches(ctx.plan_hash, ctx.plan_generation):
            return ToolResult.error(call, "the call was made against a stale tool plan", "stale_plan")
        spec = plan.get(call.name)
        if spec is None:
            return ToolResult.error(call, f"unknown tool {call.name}", "scope_denied")
        effect = spec.policy.effect != EffectClass.READ
        if self.crash.get(call.id) == "before_admit":
            raise Crash(call.id)
        if effect:
            ident = ReceiptIdentity(
                session_id=ctx.session_id,
                turn_id=ctx.turn_id,
                step_id=ctx.step_id,
                tool_name=call.name,
                fingerprint=fingerprint({"tool_name": call.name, "arguments": call.input}),
            )
            adm = self.records.admit(
                ctx.operation_id, ident, owner=self.owner, effect=spec.policy.effect.value
            )
            if adm.kind == AdmitKind.REPLAY:
                return ToolResult.model_validate(
                    {**(adm.result or {}), "tool_use_id": call.id, "name": call.name}
                )
            if adm.kind != AdmitKind.NEW:
                return ToolResult.error(
                    call, adm.reason or "uncertain", "effect_outcome_uncertain", executed=None
                )
        if self.crash.get(call.id) == "after_admit":
            raise Crash(call.id)
        if self.before_handler is not None:
            self.before_handler(ctx, call)
        with self.lock:
            self.calls.append((call.name, dict(call.input)))
        try:
            out = self.handlers[call.name](call.input)
        except Exception as exc:
            return ToolResult.error(call, str(exc), "handler_error", executed=True)
        result = ToolResult(tool_use_id=call.id, name=call.name, content=out, executed=True)
        if effect:
            self.records.commit(ctx.operation_id, result.model_dump(mode="json"))
        if self.crash.get(call.id) == "after_commit":
            raise Crash(call.id)
        return result


class FlakyRecords:
    """Wraps a RecordClient; ``fail_pending`` makes saves of a pending batch fail, ``fail_all`` every save."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.fail_pending = False
        self.fail_all = False
        self.saves: list[Any] = []

    def save_checkpoint(self, save: Any) -> Any:
        if self.fail_all or (self.fail_pending and save.pending_batch is not None):
            raise OSError("store unavailable (test)")
        self.saves.append(save)
        return self.inner.save_checkpoint(save)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
