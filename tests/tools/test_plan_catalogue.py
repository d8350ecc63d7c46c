"""The one plan builder over the executor's catalogue: allow/deny lists and declared denials, one hash that
control (composing the session) and the loop worker (running its turn) agree on, the catalogue asked over
the bus and cached until the executor changes, the built-ins (logged) when it does not answer."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from geode.home import GeodeHome
from geode.loop.settings import LoopSettings
from geode.protocol import lifecycle
from geode.protocol import tools as m
from geode.protocol.errors import Unavailable
from geode.sessions.factory import create_session
from geode.tools.builtin.catalogue import builtin_specs
from geode.tools.catalogue_plans import CataloguePlans
from geode.tools.plan import compile_plan
from geode.tools.spec import SafetyPolicy, ToolSpec
from tests.waiting import poll_for

ADD = ToolSpec(name="mcp__t__add", description="Add two numbers.", handler="mcp:t/add")
UNDECLARED = ToolSpec(
    name="mcp__t__undeclared", description="?", handler="mcp:t/undeclared", policy=SafetyPolicy(denied=True)
)
CATALOGUE = [*builtin_specs(), ADD, UNDECLARED]


class FakeExecutor:
    """A transport whose ``executor`` answers ``tool.catalogue`` (or is down)."""

    def __init__(self, specs: list[ToolSpec]) -> None:
        self.specs, self.down, self.asked = specs, False, 0

    def call(self, target: str, msg: Any, body: Any, **kw: Any) -> Any:
        assert target == "executor" and msg is m.CATALOGUE and kw.get("timeout_s")
        self.asked += 1
        if self.down:
            raise Unavailable("executor not connected")
        return m.Catalogue(specs=self.specs).model_dump(mode="json")


class Timeline:
    def __init__(self) -> None:
        self.rows: list[Any] = []

    def append_timeline(self, event: Any) -> None:
        self.rows.append(event)


def test_compile_plan_applies_lists_and_declared_denials_with_one_hash() -> None:
    plan = compile_plan(CATALOGUE, denied=["run_bash"])
    assert "mcp__t__add" in plan and "read_file" in plan
    assert "run_bash" not in plan and "mcp__t__undeclared" not in plan
    assert compile_plan(reversed(CATALOGUE), denied=["run_bash"]).content_hash == plan.content_hash
    only = compile_plan(CATALOGUE, allowed=["mcp__t__add", "mcp__t__undeclared"])
    assert only.tool_names == ("mcp__t__add",)
    assert compile_plan(CATALOGUE).content_hash != compile_plan(builtin_specs()).content_hash


def test_catalogue_is_cached_until_the_executor_changes() -> None:
    ex = FakeExecutor(CATALOGUE)
    plans = CataloguePlans(ex, who="loop-1")  # type: ignore[arg-type]
    first = plans.base()
    assert "mcp__t__add" in first and plans.source == "executor"
    assert plans.base() is first and ex.asked == 1
    plans.on_lifecycle(lifecycle.CHILD_STARTED, lifecycle.ChildEvent(name="lanes", incarnation=2))
    assert plans.base() is first and ex.asked == 1
    ex.specs = list(builtin_specs())  # the next incarnation has no MCP server
    plans.on_lifecycle(lifecycle.CHILD_STARTED, lifecycle.ChildEvent(name="executor", incarnation=2))
    second = plans.base()
    assert ex.asked == 2 and "mcp__t__add" not in second and second.generation == first.generation + 1


def test_executor_down_falls_back_to_builtins_logged_and_asks_again(caplog: pytest.LogCaptureFixture) -> None:
    ex = FakeExecutor(CATALOGUE)
    ex.down = True
    now = [100.0]
    plans = CataloguePlans(ex, who="control", cache=False, clock=lambda: now[0])  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="geode.tools.catalogue_plans"):
        fallback = plans.base()
    assert set(fallback.tool_names) == {s.name for s in builtin_specs()} and plans.source == "builtin"
    assert "catalogue is unavailable" in caplog.text and "built-in tools only" in caplog.text
    ex.down = False
    assert plans.base() is fallback and ex.asked == 1  # a dead executor delays one session, not each
    now[0] += plans.retry_after_s
    assert "mcp__t__add" in plans.base() and ex.asked == 2  # a fallback is never kept
    ex.down = True
    plans.base()
    plans.on_lifecycle(lifecycle.CHILD_READY, lifecycle.ChildEvent(name="executor", incarnation=3))
    ex.down = False
    assert "mcp__t__add" in plans.base() and ex.asked == 4  # a restarted executor is asked at once


def test_control_and_worker_agree_on_the_session_plan_hash(tmp_path: Path) -> None:
    """create_session (control) stamps plan_hash; the settings lanes forward keep it (LoopSettings); the
    worker's plan from the same catalogue has that hash, so no change is noted."""
    home = GeodeHome(tmp_path).ensure()
    control = CataloguePlans(FakeExecutor(CATALOGUE), cache=False)  # type: ignore[arg-type]
    worker = CataloguePlans(FakeExecutor(CATALOGUE))  # type: ignore[arg-type]
    for mode in ("IPC", "DAEMON"):
        spec = create_session(mode, home=home, env={}, plan=control.base(), workspace=tmp_path)
        assert spec.plan_hash and spec.plan_generation >= 1
        assert "mcp__t__add" in spec.visible_tools and "mcp__t__undeclared" not in spec.visible_tools
        sent = spec.model_dump(mode="json", exclude={"plan"})  # the turn's settings, as control submits them
        settings = LoopSettings.from_mapping({k: v for k, v in sent.items() if v is not None})
        assert settings.plan_hash == spec.plan_hash
        rows = Timeline()
        plan = worker.for_turn(
            worker.base(),
            session_id=spec.session_id,
            turn_id="t1",
            allowed=settings.allowed_tools,
            denied=settings.denied_tools,
            composed=(settings.plan_hash, settings.plan_generation),
            records=rows,
        )
        assert plan.content_hash == spec.plan_hash and rows.rows == []
        assert ("run_bash" in plan) is (mode == "IPC")


def test_a_changed_catalogue_is_noted_and_the_turn_gets_the_current_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    composed = compile_plan(builtin_specs())  # the session was composed while the MCP server was not up
    worker = CataloguePlans(FakeExecutor(CATALOGUE))  # type: ignore[arg-type]
    rows = Timeline()
    with caplog.at_level(logging.WARNING, logger="geode.tools.catalogue_plans"):
        for turn in ("t1", "t2"):
            plan = worker.for_turn(
                worker.base(),
                session_id="s1",
                turn_id=turn,
                allowed=None,
                denied=(),
                composed=(composed.content_hash, composed.generation),
                records=rows,
            )
            assert "mcp__t__add" in plan
    assert caplog.text.count("was composed with plan") == 1  # once per session and composed plan
    from tests.actors.tree_kit import wait_for

    wait_for(lambda: len(rows.rows) == 2, timeout_s=5, what="no plan.changed timeline rows")
    row = rows.rows[0]
    assert row.kind == "plan.changed" and row.payload["composed_hash"] == composed.content_hash
    assert row.payload["plan_hash"] == plan.content_hash and "mcp__t__add" in row.payload["tools"]


class ControlBus(FakeExecutor):
    """What control reaches: the executor (``tool.catalogue``) and lanes (``lanes.submit``, recorded)."""

    def __init__(self, specs: list[ToolSpec]) -> None:
        super().__init__(specs)
        self.submitted: list[Any] = []

    def call(self, target: str, msg: Any, body: Any, **kw: Any) -> Any:
        if target == "lanes":
            self.submitted.append(body)
            return {"turn_id": body.turn_id, "session_id": body.session_id, "state": "queued"}
        return super().call(target, msg, body, **kw)


def test_control_composes_from_the_executor_catalogue_and_submits_plan_hash(tmp_path: Path) -> None:
    from geode.control.core import ControlCore
    from geode.protocol import control as c
    from geode.protocol.envelope import Envelope

    bus = ControlBus(CATALOGUE)
    sent: list[Envelope] = []
    core = ControlCore(
        bus,  # type: ignore[arg-type]
        lambda _conn, env: sent.append(env),
        home=GeodeHome(tmp_path).ensure(),
        plans=CataloguePlans(bus, cache=False, who="control"),  # type: ignore[arg-type]
    )
    core.on_envelope("c1", Envelope(type=c.HANDSHAKE, body={"cwd": str(tmp_path)}))
    core.on_envelope("c1", Envelope(type=c.PROMPT, body={"text": "hi"}))
    assert [e.kind for e in sent] == ["ok", "ok"], sent
    (sub,) = bus.submitted
    worker = CataloguePlans(FakeExecutor(CATALOGUE))  # type: ignore[arg-type]
    expected = worker.for_session(worker.base(), None, ())
    assert sub.settings["plan_hash"] == expected.content_hash
    assert "mcp__t__add" in sub.settings["visible_tools"]
    bus.down = True  # the executor is down when the next session is composed: built-ins
    core.on_envelope("c2", Envelope(type=c.HANDSHAKE, body={"cwd": str(tmp_path)}))
    core.on_envelope("c2", Envelope(type=c.PROMPT, body={"text": "hi"}))
    assert "mcp__t__add" not in bus.submitted[1].settings["visible_tools"]
    assert bus.submitted[1].settings["plan_hash"] == ""  # composed without the executor: no hash claimed


def test_a_plan_handed_out_as_the_fallback_stays_the_fallback_when_an_answer_lands() -> None:
    """Control (wait=False) hands out the built-ins while its background ask runs; when the executor's answer
    lands before the session is finished, that session still claims no plan hash (it was composed with the
    built-ins), and the next handshake gets the executor's plan."""
    ex = FakeExecutor(CATALOGUE)
    ex.down = True
    plans = CataloguePlans(ex, who="control", cache=False, wait=False)  # type: ignore[arg-type]
    plans._ask()  # the start-up prefetch: no answer → the built-ins
    ex.down = False
    handed = plans.base()  # the built-ins, and an ask in the background
    assert "mcp__t__add" not in handed
    poll_for(lambda: "mcp__t__add" in plans.registry.latest("catalogue"), 5, what="the background answer")
    assert plans.from_executor is False  # about the plan this thread was handed, not the newer one
    assert "mcp__t__add" in plans.base() and plans.from_executor is True
