"""A real `geode serve` tree that allows every tool, and a test bus's view of its executor (bind, fire)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from actors.bus import Bus
from geode.home import GeodeHome
from geode.protocol import tools as m
from geode.tools.builtin.catalogue import builtin_specs
from geode.tools.executor_client import ExecutorClient
from geode.tools.plan import BoundToolPlan
from geode.tools.spec import ToolCall, ToolContext
from tests.actors.tree_kit import make_home, serve, stop, wait_for

ALLOW_ALL = """
[[hooks.PermissionRequest]]
command = '''echo '{"hookSpecificOutput": {"permissionDecision": "allow"}}' '''
"""


@contextmanager
def allow_all_tree(base: Path) -> Iterator[GeodeHome]:
    """A served tree whose PermissionRequest hook allows everything; stopped on exit."""
    home = make_home(base, ALLOW_ALL)
    serve(home, timeout=60)
    try:
        yield home
    finally:
        stop(home)


def bound_executor(
    bus: Bus, ws: Path, session_id: str, operation_id: str
) -> tuple[ExecutorClient, ToolContext]:
    """An executor client with the builtin plan bound (retried until the executor answers), and a context."""
    client = ExecutorClient(bus.transport)
    plan = BoundToolPlan.build(builtin_specs())
    wait_for(lambda: _bind(client, plan))
    ctx = ToolContext(
        session_id=session_id,
        turn_id="t1",
        step_id="st1",
        operation_id=operation_id,
        mode="IPC",
        workspace=str(ws),
        plan_hash=plan.content_hash,
        plan_generation=plan.generation,
    )
    return client, ctx


def _bind(client: ExecutorClient, plan: BoundToolPlan) -> bool:
    try:
        client.bind_plan(plan)
        return True
    except Exception:
        return False


def fire(bus: Bus, ctx: ToolContext, call: ToolCall) -> None:
    """Execute ``call`` and ignore the outcome: the executor dies under it."""
    try:
        bus.transport.call("executor", m.EXECUTE, m.ToolExecute(ctx=ctx, call=call), timeout_s=20)
    except Exception:
        pass  # the executor dies under this call
