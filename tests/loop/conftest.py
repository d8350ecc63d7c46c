"""Fixtures for loop tests: a real LMDB store over LocalTransport, a receipt-keeping executor, a plan."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from geode.loop import AgenticLoop, ListSink, LoopSettings
from geode.prompt import PromptSources
from geode.testing.function_model import FunctionModel
from geode.tools.plan import BoundToolPlan, PlanRegistry
from tests.loop.fakes import FakeExecutor, FlakyRecords, open_store, read_spec, write_spec
from tests.loop.tree_rig import launch, ws  # noqa: F401  (fixtures for the real-tree tests)


@dataclass
class Rig:
    tmp: Path
    records: FlakyRecords
    executor: FakeExecutor
    plan: BoundToolPlan
    registry: PlanRegistry
    effects: list[str] = field(default_factory=list)
    handlers: dict[str, Any] = field(default_factory=dict)
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


def _real_executor(client: Any, handlers: dict[str, Callable[[dict[str, Any]], Any]], root: Path) -> Any:
    from geode.tools.executor import ToolExecutor
    from geode.tools.handlers import HandlerEntry, ToolFailure

    def entry(name: str) -> HandlerEntry:
        def call(args: dict[str, Any], env: Any) -> Any:
            try:
                return handlers[name](args)
            except RuntimeError as exc:
                raise ToolFailure(str(exc), "handler_error") from exc

        return HandlerEntry(call)

    ex = ToolExecutor(
        owner="executor#1",
        records=client,
        handlers={f"test:{k}": entry(k) for k in handlers},
        default_workspace=root,
    )
    ex.calls = []  # type: ignore[attr-defined]
    return ex


@pytest.fixture(params=["real", "fake"])
def rig(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Rig]:
    yield from _make_rig(tmp_path, request.param)


@pytest.fixture
def fake_rig(tmp_path: Path) -> Iterator[Rig]:
    """The receipt-keeping fake executor, which can simulate the worker dying at precise points."""
    yield from _make_rig(tmp_path, "fake")


def _make_rig(tmp_path: Path, kind: str) -> Iterator[Rig]:
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
    executor = (
        FakeExecutor(client, handlers) if kind == "fake" else _real_executor(client, handlers, tmp_path)
    )
    registry = PlanRegistry()
    plan = registry.compile([read_spec("read"), write_spec("write"), read_spec("fail")])
    yield Rig(tmp_path, records, executor, plan, registry, effects, handlers)
    if kind == "real":
        executor.shutdown()
    engine.close()


def tool(name: str, id_: str | None = None, **args: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "input": args}
    if id_:
        out["id"] = id_
    return out


def store_calls(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The message type of every request the turn's store client makes, in order."""
    client = rig.records.inner
    seen: list[str] = []
    inner: Callable[..., Any] = client._call

    def call(type_: str, body: Any, **kw: Any) -> Any:
        seen.append(type_)
        return inner(type_, body, **kw)

    monkeypatch.setattr(client, "_call", call)
    return seen
