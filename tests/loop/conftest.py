"""Fixtures for loop tests: a real LMDB store over LocalTransport, a receipt-keeping executor, a plan."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from geode.loop import AgenticLoop, ListSink, LoopSettings
from geode.prompt import PromptSources
from geode.providers.function_model import FunctionModel
from geode.tools.plan import BoundToolPlan, PlanRegistry
from tests.loop.fakes import FakeExecutor, FlakyRecords, open_store, read_spec, write_spec


@dataclass
class Rig:
    tmp: Path
    records: FlakyRecords
    executor: FakeExecutor
    plan: BoundToolPlan
    registry: PlanRegistry
    effects: list[str] = field(default_factory=list)
    sink: ListSink = field(default_factory=ListSink)

    def loop(self, provider: Any, **kw: Any) -> AgenticLoop:
        settings = kw.pop("settings", LoopSettings(model="test-model"))
        return AgenticLoop(
            provider,
            self.executor,
            self.records,
            plan=kw.pop("plan", self.plan),
            events=self.sink,
            settings=settings,
            prompt=PromptSources(workspace=self.tmp),
            **kw,
        )

    def script(self, *replies: Any) -> FunctionModel:
        return FunctionModel.script(list(replies))


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    engine, client = open_store(tmp_path)
    records = FlakyRecords(client)
    effects: list[str] = []

    def write(args: dict[str, Any]) -> dict[str, Any]:
        effects.append(str(args.get("text", "")))
        return {"written": args.get("text", "")}

    handlers: dict[str, Callable[[dict[str, Any]], Any]] = {
        "read": lambda a: {"value": f"read:{a.get('key', '')}"},
        "write": write,
        "fail": lambda a: (_ for _ in ()).throw(RuntimeError("boom")),
    }
    executor = FakeExecutor(client, handlers)
    registry = PlanRegistry()
    plan = registry.compile([read_spec("read"), write_spec("write")])
    yield Rig(tmp_path, records, executor, plan, registry, effects)
    engine.close()


def tool(name: str, id_: str | None = None, **args: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "input": args}
    if id_:
        out["id"] = id_
    return out
