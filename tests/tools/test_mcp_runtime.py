"""The MCP runtime's pieces: per-tool policy order, the keys: lock strategy, the gate (first use asks once per
server per session in IPC, never in DAEMON; project servers only inside their project), and the hub against a
real SDK server (a dead server restarted on the first call after its cooldown; a request timeout)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from geode.tools.executor import ToolExecutor
from geode.tools.handlers import HandlerEntry, ToolEnv
from geode.tools.locks import resource_keys
from geode.tools.mcp.bridge import connect_overlay, redact_result
from geode.tools.mcp.config import McpServerConfig
from geode.tools.mcp.gate import McpGate, outside_scope
from geode.tools.mcp.hub import McpCallLost, McpHub, McpUnavailable
from geode.tools.mcp.policy import tool_policy
from geode.tools.plan import BoundToolPlan
from geode.tools.spec import EffectClass, SafetyPolicy, ToolCall, ToolContext, ToolSpec
from geode.tools.structured_text import expand

SERVER = str(Path(__file__).with_name("mcp_policy_server.py"))


def _tool(name: str, read_only: bool | None = None) -> Any:
    ann = None if read_only is None else SimpleNamespace(read_only_hint=read_only)
    return SimpleNamespace(name=name, annotations=ann)


def test_policy_order_explicit_then_read_only_then_keys_then_undeclared() -> None:
    explicit = SafetyPolicy(effect=EffectClass.MUTATE, resource_strategy="global:x")
    cfg = McpServerConfig(
        name="s", command="x", tools={"e": explicit}, read_only_tools=["r"], resource_keys=["db", "db"]
    )
    assert tool_policy(cfg, _tool("e", read_only=True)).policy == explicit  # the config's own policy wins
    assert tool_policy(cfg, _tool("r")).source == "read_only_tools"
    hinted = tool_policy(cfg, _tool("h", read_only=True))
    assert hinted.source == "read_only_hint" and hinted.policy.effect is EffectClass.READ
    keyed = tool_policy(cfg, _tool("w", read_only=False))
    assert keyed.policy.effect is EffectClass.MUTATE and keyed.policy.resource_strategy == "keys:db"
    bare = McpServerConfig(name="s", command="x")
    undeclared = tool_policy(bare, _tool("w"))
    assert undeclared.policy.denied and not undeclared.offered


def test_keys_strategy_locks_every_declared_key(tmp_path: Path) -> None:
    spec = ToolSpec(
        name="mcp__s__w",
        description="",
        handler="mcp:s/w",
        policy=SafetyPolicy(effect=EffectClass.MUTATE, resource_strategy="keys:a,b"),
    )
    ctx = ToolContext(session_id="s", turn_id="t", step_id="x", operation_id="o")
    assert resource_keys(spec, {}, ctx, tmp_path) == ("key:a", "key:b")


def test_results_are_redacted() -> None:
    out = redact_result({"result": "with sk-live-0123456789abc", "token": "t0k", "n": 3})
    assert out == {"result": "with [REDACTED]", "token": "[REDACTED]", "n": 3}


class CountingChannel:
    def __init__(self, answer: str = "y") -> None:
        self.asked: list[tuple[str, str]] = []
        self.answer = answer

    def request(self, ctx: ToolContext, tool_name: str, detail: str, safety: SafetyPolicy) -> str:
        self.asked.append((ctx.session_id, tool_name))
        return self.answer


def _spec(server: str, tool: str) -> ToolSpec:
    return ToolSpec(name=f"mcp__{server}__{tool}", description="", handler=f"mcp:{server}/{tool}")


def test_first_use_asks_once_per_server_per_session(tmp_path: Path) -> None:
    specs = [_spec("a", "x"), _spec("a", "y"), _spec("b", "x")]
    ran: list[str] = []

    def handler(name: str) -> HandlerEntry:
        def fn(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
            ran.append(name)
            return {"ok": True}

        return HandlerEntry(fn)

    channel = CountingChannel()
    ex = ToolExecutor(
        owner="executor#1",
        records=None,
        approvals=channel,
        handlers={s.handler: handler(s.name) for s in specs},
        default_workspace=tmp_path,
        gate=McpGate(),
    )
    plan = BoundToolPlan.build(specs)
    ex.bind_plan(plan)

    def run(session: str, name: str, mode: str = "IPC") -> Any:
        ctx = ToolContext(
            session_id=session,
            turn_id="t",
            step_id="s",
            operation_id=f"{session}-{name}-{len(ran)}",
            plan_hash=plan.content_hash,
            plan_generation=plan.generation,
            mode=mode,
        )
        return ex.execute(ctx, ToolCall(id="c", name=name, input={}))

    for name in ("mcp__a__x", "mcp__a__y", "mcp__a__x", "mcp__b__x", "mcp__b__x"):
        assert not run("s1", name).is_error
    assert channel.asked == [("s1", "mcp__a__x"), ("s1", "mcp__b__x")]  # once per server in the session
    run("s2", "mcp__a__y")
    assert channel.asked[-1] == ("s2", "mcp__a__y")  # a new session asks again
    run("d1", "mcp__a__x", mode="DAEMON")
    assert len(channel.asked) == 3  # no person to ask in DAEMON mode: declared tools run without a prompt

    channel.answer = "n"
    denied = run("s3", "mcp__a__x")
    assert denied.error_type == "permission_denied" and ran.count("mcp__a__x") == 3
    assert channel.asked[-1] == ("s3", "mcp__a__x")
    run("s3", "mcp__a__x")
    assert channel.asked[-1] == ("s3", "mcp__a__x") and len(channel.asked) == 5  # a "no" asks again next time
    ex.shutdown()


def test_project_server_only_inside_its_project(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "sub").mkdir(parents=True)
    gate = McpGate(origins={"p": str(project)})
    spec = _spec("p", "x")

    def ctx(ws: Path | str) -> ToolContext:
        return ToolContext(session_id="s", turn_id="t", step_id="x", operation_id="o", workspace=str(ws))

    assert gate.refusal(ctx(project / "sub"), spec) is None
    outside = gate.refusal(ctx(tmp_path), spec)
    assert outside is not None and outside.reason == "mcp_project_scope" and str(project) in outside.message
    assert gate.refusal(ctx(tmp_path), _spec("global", "x")) is None
    scoped = spec.model_copy(update={"scope": str(project)})
    assert outside_scope([scoped, _spec("g", "x")], tmp_path) == {"mcp__p__x"}  # not offered outside
    assert outside_scope([scoped], project / "sub") == frozenset()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def hub_and_clock() -> Iterator[tuple[McpHub, Clock]]:
    clock = Clock()
    hub = McpHub(clock=clock)
    yield hub, clock
    hub.close()


def test_dead_server_restarts_on_the_first_call_after_its_cooldown(
    hub_and_clock: tuple[McpHub, Clock], tmp_path: Path
) -> None:
    hub, clock = hub_and_clock
    cfg = McpServerConfig(name="s", command=sys.executable, args=[SERVER], env={"EFFECTS_FILE": "x"})
    names = {t.name for t in hub.start(cfg)}
    assert {"lookup", "append", "pause", "crash"} <= names
    with pytest.raises(McpCallLost):  # it died with the call in flight: outcome unknown
        hub.call("s", "crash", {}, timeout_s=10)
    [st] = hub.states()
    assert st.state == "restarting" and st.next_try_s == 5.0
    with pytest.raises(McpUnavailable, match="next try in 5 s"):  # within the cooldown: never sent
        hub.call("s", "lookup", {"key": "k"}, timeout_s=10)
    clock.now += 5.0
    assert "value-of-k" in str(hub.call("s", "lookup", {"key": "k"}, timeout_s=10).content)  # restarted
    [st] = hub.states()
    assert st.state == "running" and st.restarts == 1
    with pytest.raises(McpCallLost):
        hub.call("s", "crash", {}, timeout_s=10)
    assert hub.states()[0].next_try_s == 10.0  # the cooldown doubles


def test_a_call_that_outlives_its_timeout_is_lost_and_the_server_stays_usable(
    hub_and_clock: tuple[McpHub, Clock],
) -> None:
    hub, _ = hub_and_clock
    hub.start(McpServerConfig(name="s", command=sys.executable, args=[SERVER]))
    with pytest.raises(McpCallLost, match=r"did not answer within 0\.3s"):
        hub.call("s", "pause", {"seconds": 5}, timeout_s=0.3)
    assert "awake" in str(hub.call("s", "pause", {"seconds": 0}, timeout_s=10).content)


def test_a_read_only_call_past_its_timeout_fails_cleanly_through_the_executor(
    hub_and_clock: tuple[McpHub, Clock], tmp_path: Path
) -> None:
    hub, _ = hub_and_clock
    cfg = McpServerConfig(name="s", command=sys.executable, args=[SERVER], timeout_s=0.5)
    overlay = connect_overlay(hub, [cfg])
    assert overlay.servers["s"].refused == ["mcp__s__append", "mcp__s__crash"]  # undeclared: not runnable
    ex = ToolExecutor(owner="executor#1", records=None, handlers=overlay.handlers, default_workspace=tmp_path)
    plan = BoundToolPlan.build(overlay.specs)
    ex.bind_plan(plan)
    ctx = ToolContext(
        session_id="s",
        turn_id="t",
        step_id="x",
        operation_id="o",
        plan_hash=plan.content_hash,
        plan_generation=plan.generation,
        mode="DAEMON",
    )
    slow = ex.execute(ctx, ToolCall(id="c1", name="mcp__s__pause", input={"seconds": 5}))
    assert slow.error_type == "mcp_call_lost" and "did not answer within 0.5s" in slow.content["error"], slow
    quick = ex.execute(ctx, ToolCall(id="c2", name="mcp__s__pause", input={"seconds": 0}))
    assert expand(quick.content) == {"result": "awake"}, quick
    ex.shutdown()
