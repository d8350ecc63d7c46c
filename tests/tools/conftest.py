"""Fixtures: a real in-process record store, probe handlers that count calls, an executor factory."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from geode.home import GeodeHome
from geode.protocol.transport import LocalTransport
from geode.records.engine import RecordEngine
from geode.records.service import StoreService
from geode.records.store_client import StoreClient
from geode.tools.builtin.catalogue import builtin_handlers, builtin_specs
from geode.tools.executor import ToolExecutor
from geode.tools.handlers import HandlerEntry, ToolEnv
from geode.tools.plan import BoundToolPlan
from geode.tools.spec import (
    ApprovalMode,
    DataClass,
    EffectClass,
    SafetyPolicy,
    ToolCall,
    ToolContext,
    ToolSpec,
)

_ids = itertools.count(1)


@dataclass
class Probe:
    """A side-effect probe: every real handler invocation is recorded here."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    started: threading.Event = field(default_factory=threading.Event)
    release: threading.Event | None = None
    result: Any = None

    def __call__(self, args: dict[str, Any], env: ToolEnv) -> Any:
        self.calls.append(dict(args))
        self.started.set()
        if self.release is not None:
            self.release.wait(30)
        return self.result if self.result is not None else {"ok": True, "args": args}


def probe_spec(name: str, **policy: Any) -> ToolSpec:
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}, "additionalProperties": False}
    return ToolSpec(
        name=name,
        description=name,
        input_schema=schema,
        handler=f"test:{name}",
        policy=SafetyPolicy(**policy),
        deadline_s=10,
    )


PROBE_SPECS = (
    probe_spec("probe"),
    probe_spec("probe_write", effect=EffectClass.MUTATE, resource_strategy="global:probe"),
    probe_spec(
        "probe_cached",
        effect=EffectClass.MUTATE,
        approval=ApprovalMode.CACHED,
        resource_strategy="global:probe",
    ),
    probe_spec(
        "probe_personal",
        data_class=DataClass.PERSONAL,
        approval=ApprovalMode.PER_INVOCATION,
        allow_headless=False,
        allow_subagents=False,
    ),
    probe_spec("probe_denied", denied=True),
    probe_spec("probe_nohead", allow_headless=False),
    probe_spec("probe_nosub", allow_subagents=False),
)


@dataclass
class StoreFixture:
    engine: RecordEngine
    client: StoreClient


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StoreFixture]:
    home = GeodeHome(tmp_path / "home").ensure()
    engine = RecordEngine.for_home(home).open()
    client = StoreClient(LocalTransport({"store": StoreService(engine)}, sender="executor#1"))
    try:
        yield StoreFixture(engine, client)
    finally:
        engine.close()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@dataclass
class Rig:
    executor: ToolExecutor
    plan: BoundToolPlan
    probes: dict[str, Probe]
    workspace: Path
    store: StoreFixture

    def ctx(self, **kw: Any) -> ToolContext:
        n = next(_ids)
        base: dict[str, Any] = dict(
            session_id="s1",
            turn_id="t1",
            step_id=f"st{n}",
            operation_id=f"op-{n}",
            mode="IPC",
            plan_hash=self.plan.content_hash,
            plan_generation=self.plan.generation,
            workspace=str(self.workspace),
        )
        base.update(kw)
        return ToolContext(**base)

    def call(self, name: str, args: dict[str, Any] | None = None, **ctx: Any) -> Any:
        c = self.ctx(**ctx)
        return self.executor.execute(c, ToolCall(id=f"tu-{c.operation_id}", name=name, input=args or {}))

    def timeline(self, session: str = "s1") -> list[Any]:
        assert self.executor.timeline.flush(5)
        return [r.event for r in self.store.client.read_timeline(session)]


@pytest.fixture
def make_rig(store: StoreFixture, workspace: Path):  # type: ignore[no-untyped-def]
    made: list[ToolExecutor] = []

    def make(extra_specs: tuple[ToolSpec, ...] = (), **kw: Any) -> Rig:
        probes = {s.name: Probe() for s in PROBE_SPECS + extra_specs}
        handlers = {**builtin_handlers(), **{f"test:{n}": HandlerEntry(p) for n, p in probes.items()}}
        handlers.update(kw.pop("handlers", {}))
        kw.setdefault("records", store.client)
        ex = ToolExecutor(owner="executor#1", handlers=handlers, default_workspace=workspace, **kw)
        plan = BoundToolPlan.build(builtin_specs() + PROBE_SPECS + extra_specs)
        ex.bind_plan(plan)
        made.append(ex)
        return Rig(ex, plan, probes, workspace, store)

    yield make
    for ex in made:
        ex.shutdown()
