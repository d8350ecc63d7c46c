"""A turn's start does per session (or per plan) what it used to do per turn: the plan's derivation and its
bind at the executor; and no INFO line per model request from the HTTP client in a worker's log."""

from __future__ import annotations

import logging
from typing import Any, cast

import pytest

from geode.loop.prepare import bind_plan
from geode.loop.settings import LoopSettings
from geode.loop.turn_providers import TurnProviders
from geode.protocol import tools as m
from geode.providers.types import Provider
from geode.tools.builtin.catalogue import builtin_specs
from geode.tools.executor_client import ExecutorClient
from geode.tools.plan import BoundToolPlan
from geode.tools.spec import ToolCall, ToolContext, ToolResult


class _Executor:
    """A transport to an executor whose plan cache is ``bound``; records what it was sent."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.bound: set[tuple[str, int]] = set()

    def call(self, target: str, message: Any, body: Any, **kw: Any) -> Any:
        self.sent.append(str(message))
        if message == m.PLAN_BIND:
            self.bound.add((body["content_hash"], body["generation"]))
            return {"content_hash": body["content_hash"], "generation": body["generation"], "tools": 1}
        ctx, call = body.ctx, body.call
        if (ctx.plan_hash, ctx.plan_generation) not in self.bound:
            return ToolResult.error(call, "not bound here", "plan_not_bound").model_dump()
        return ToolResult(tool_use_id=call.id, name=call.name, content={"ok": True}).model_dump()


def _ctx(plan: BoundToolPlan, n: int) -> ToolContext:
    return ToolContext(
        session_id="s",
        turn_id=f"t{n}",
        step_id="st",
        operation_id=f"op{n}",
        workspace="/tmp",
        plan_hash=plan.content_hash,
        plan_generation=plan.generation,
    )


def test_a_plan_is_bound_at_the_executor_once_not_per_turn_and_again_after_it_restarts() -> None:
    plan = BoundToolPlan.build(builtin_specs())
    executor = _Executor()
    client = ExecutorClient(executor)  # type: ignore[arg-type]
    for _turn in range(3):  # each turn's start binds the session's plan
        client.bind_plan(plan)
    assert executor.sent == [str(m.PLAN_BIND)]
    # the executor restarted unnoticed (its cache is empty): the call is refused before it runs, the client
    # binds the plan again and the call goes through once
    executor.bound.clear()
    res = client.execute(_ctx(plan, 1), ToolCall(id="c1", name="list_dir", input={}))
    assert not res.is_error
    assert executor.sent[1:] == [str(m.EXECUTE), str(m.PLAN_BIND), str(m.EXECUTE)]
    # the worker heard the executor exit: the next turn binds its plan again before any call
    executor.bound.clear()
    client.forget_bound()
    client.bind_plan(plan)
    assert executor.sent[4:] == [str(m.PLAN_BIND)]
    assert not client.execute(_ctx(plan, 2), ToolCall(id="c2", name="list_dir", input={})).is_error
    assert executor.sent[5:] == [str(m.EXECUTE)]


class _Provider:
    name = "anthropic"


PROVIDER = cast(Provider, _Provider())


def test_a_turns_plan_is_derived_once_per_session_plan_and_settings() -> None:
    plan = BoundToolPlan.build(builtin_specs())
    narrow = LoopSettings(allowed_tools=("read_file", "list_dir"), denied_tools=("list_dir",))
    first = bind_plan(plan, PROVIDER, narrow)
    assert first is not None and [s.name for s in first.specs] == ["read_file"]
    again = bind_plan(
        plan,
        cast(Provider, _Provider()),
        LoopSettings(allowed_tools=("list_dir", "read_file"), denied_tools=("list_dir",)),
    )
    assert again is first  # the same lists: the same snapshot, not re-filtered and re-hashed per turn
    wide = bind_plan(plan, PROVIDER, LoopSettings())
    assert wide is not None and wide is not first and len(wide) == len(plan.projected("anthropic"))
    assert bind_plan(plan, PROVIDER, LoopSettings()) is wide


@pytest.fixture
def http_loggers() -> Any:
    names = ("httpx", "httpx2", "")
    kept = {n: logging.getLogger(n).level for n in names}
    yield
    for n, level in kept.items():
        logging.getLogger(n).setLevel(level)


def test_a_loop_worker_logs_no_info_line_per_model_request_unless_it_logs_debug(http_loggers: Any) -> None:
    for name in ("httpx", "httpx2"):
        logging.getLogger(name).setLevel(logging.NOTSET)
    logging.getLogger().setLevel(logging.INFO)
    TurnProviders(None, "loop-1", factory=lambda model: _Provider())  # type: ignore[arg-type,return-value]
    assert not logging.getLogger("httpx2").isEnabledFor(logging.INFO)
    assert not logging.getLogger("httpx").isEnabledFor(logging.INFO)
    assert logging.getLogger("httpx2").isEnabledFor(logging.WARNING)
    for name in ("httpx", "httpx2"):
        logging.getLogger(name).setLevel(logging.NOTSET)
    logging.getLogger().setLevel(logging.DEBUG)  # [log] level = "debug": every line, these too
    TurnProviders(None, "loop-1", factory=lambda model: _Provider())  # type: ignore[arg-type,return-value]
    assert logging.getLogger("httpx2").isEnabledFor(logging.INFO)
