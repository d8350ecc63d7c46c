"""The ``executor`` child: a ToolExecutor at bus endpoint ``executor`` (receipt owner = name#incarnation).

Hosted by ``actors.tree.child_main executor`` through the registry (``build``). Hooks come from the global
config's ``[hooks]`` tables; approvals go through lanes to the turn's origin; receipts and the timeline go
to the store. When this process dies, the store marks its admitted receipts uncertain (runtime.child_died).
On the main host it is also the tool routing (geode/tools/remote_routing.py): a session whose workspace lies
under a registered remote executor's roots runs its tools there. On a worker host (``--role worker``) it is
such a remote executor (``build_remote``): a peer of main's executor, owner ``HOST/executor#incarnation``.
`geode reload` (``apply_reload``): new hooks decide the next call; the MCP hub is rebuilt in place.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from actors.bus import Bus
from actors.tree.peer_exits import on_exit_failer
from actors.tree.registry import ChildContext
from actors.tree.worker_role import WorkerRole
from geode.config_reload import HOOKS, MCP, MESSENGERS, ConfigChange
from geode.hooks.config import hooks_of
from geode.hooks.runner import HookRunner
from geode.lanes.stream import each_event
from geode.memory.files import MemoryFiles
from geode.protocol import lanes as lanes_msg
from geode.protocol import tools as tools_msg
from geode.protocol.dispatch import Dispatch
from geode.protocol.transport import Request
from geode.records.models import TimelineEvent
from geode.records.store_client import StoreClient
from geode.tools.approval_lanes import LanesApprovalChannel
from geode.tools.approvals import APPROVAL_TIMEOUT_S
from geode.tools.builtin.bash import BashLimits
from geode.tools.builtin.bash_groups import GroupNote, GroupNotes, GroupReaper
from geode.tools.builtin.catalogue import builtin_handlers, builtin_specs
from geode.tools.builtin.messaging import BusMessenger
from geode.tools.builtin.schedule_job import BusScheduler, SchedulerLost
from geode.tools.builtin.session_search import BusSearch
from geode.tools.builtin.web_guard import WebAllow
from geode.tools.delegation import DelegateLimits, LanesDelegate
from geode.tools.executor import ToolExecutor
from geode.tools.observation import ObservationSweep
from geode.tools.remote_agent import RemoteAgent
from geode.tools.remote_routing import InlineTypes, RemoteRouter
from geode.tools.reply_delivery import MessengersLost, ReplyDelivery
from geode.tools.schedule_rule import ScheduleRule
from geode.tools.send_rule import SendRule
from geode.tools.service import ToolService
from geode.tools.spec import ToolSpec

if TYPE_CHECKING:
    from actors.tree.config_sections import TreeSettings
    from geode.config_source import ConfigSource
    from geode.tools.mcp.status import McpRuntime

log = logging.getLogger(__name__)
ENDPOINT = "executor"
EX_TEMPFAIL = 75  # a remote executor that lost main: restarted as a new incarnation
RETIRE_WAIT_S = 600.0  # the replaced hooks and MCP hub outlive the calls running on them this long at most
SAID = {
    "killed": "killed at its deadline",
    "scheduled": "still within its deadline; will be killed then",
    "ended": "ended by itself before its deadline",
    "gone": "already gone",
    "not_ours": "its pid now belongs to another process; left alone",
    "unreadable": "unreadable note removed",
}


@dataclass
class ExecutorChild:
    executor: ToolExecutor
    hooks: HookRunner
    mcp: Any = None  # geode.tools.mcp.status.McpRuntime: the MCP servers, closed with the child
    reaper: GroupReaper | None = None
    router: RemoteRouter | None = None  # main host: the remote executors it routes to
    agent: RemoteAgent | None = None  # worker host: the link to main's executor
    sweep: ObservationSweep | None = None  # settles uncertain write/edit receipts by looking at the files
    service: ToolService | None = None  # main host: its catalogue follows the MCP hub across reloads
    ctx: ChildContext | None = None

    def apply_config(self, change: ConfigChange, settings: TreeSettings) -> list[str]:
        """`geode reload`: hooks from the next call, the MCP hub reloaded, send_message's bindings."""
        return apply_reload(self, change, settings)

    def stop(self) -> None:
        if self.sweep is not None:
            self.sweep.stop()
        if self.agent is not None:
            self.agent.stop()
        if self.router is not None:
            self.router.stop()
        if self.reaper is not None:
            self.reaper.stop()  # pending orphan kills stay noted for the next incarnation
        self.executor.shutdown()
        self.hooks.close()
        if self.mcp is not None:
            self.mcp.close()


def connect_mcp(source: ConfigSource[TreeSettings], home_root: Path) -> McpRuntime:
    """Start the MCP servers of the snapshot and trusted projects (``load_mcp_catalogue``; ``home_root``
    is $GEODE_HOME) and describe their tools: a :class:`geode.tools.mcp.status.McpRuntime` (no enabled
    server → no hub, no overlay)."""
    from geode.tools.mcp.catalogue import load_mcp_catalogue
    from geode.tools.mcp.status import McpRuntime

    cat = load_mcp_catalogue(source.snapshot, home_root=home_root, dotenv=source.env)
    runtime = McpRuntime(servers=list(cat.servers), notes=list(cat.notes), pending=list(cat.pending))
    for note in runtime.notes:
        log.warning("MCP config: %s", note)
    enabled = [s for s in runtime.servers if getattr(s, "enabled", True)]
    if not enabled:
        return runtime
    from geode.tools.mcp.bridge import connect_overlay
    from geode.tools.mcp.hub import McpHub

    runtime.hub = McpHub()
    runtime.overlay = connect_overlay(runtime.hub, enabled)
    ov = runtime.overlay
    log.info("MCP: %d server(s), %d tool(s), %d offered", len(enabled), len(ov.specs), len(ov.handlers))
    return runtime


def executor_from_config(bus: Bus, ctx: ChildContext, **overrides: Any) -> ToolExecutor:
    """Compose the executor from the child's snapshot: [tools], [hooks], [daemon]/[gateway]."""
    cfg = ctx.settings
    tools = cfg.tools
    limits = BashLimits(
        cpu_s=tools.bash.cpu_s, fsize_bytes=tools.bash.fsize_bytes, pid_namespace=tools.bash.pid_namespace
    )
    hooks = HookRunner(hooks_of(cfg, base_dir=ctx.home.root))
    # a call without a session workspace never falls back to the daemon's cwd
    default_ws = Path(tools.default_workspace or ctx.home.root / "workspace").expanduser()
    default_ws.mkdir(parents=True, exist_ok=True)
    chat_approval_s = ctx.settings.messengers.approval_timeout_s  # an approval asked in a bound chat
    kw: dict[str, Any] = dict(
        owner=f"{ctx.name}#{ctx.incarnation}",
        records=StoreClient(bus.transport, attempts=3),
        hooks=hooks,
        approvals=LanesApprovalChannel(bus.transport, origin_timeouts={"messengers": chat_approval_s}),
        approval_timeout_s=max(APPROVAL_TIMEOUT_S, chat_approval_s),  # the gate outwaits every channel
        config=cfg,
        services={
            "bash_limits": limits,
            "messengers": BusMessenger(bus.transport),
            "web_fetch": WebAllow.from_section(tools.web_fetch),
            "memory": MemoryFiles(ctx.home.root, cfg.memory.max_bytes, cfg.trust.projects),  # memory_save
        },
        roots=tuple(tools.roots),
        default_workspace=default_ws,
        send_rule=SendRule(
            ctx.settings.messengers.bindings,
            StoreClient(bus.transport, attempts=3),
            max_per_turn=tools.send_message.max_per_turn,
        ),
        # schedule_job: a chat whose binding allows it, the create check over DAEMON's real denylist
        schedule_rule=ScheduleRule(
            ctx.settings.messengers.bindings,
            StoreClient(bus.transport, attempts=3),
            tools=builtin_specs(),
            config=cfg,
        ),
    )
    kw.update(overrides)
    return ToolExecutor(**kw)


def build(bus: Bus, ctx: ChildContext) -> ExecutorChild:
    """Registry builder: serve the executor (built-ins + MCP tools) on this child's bus; on a worker host,
    register with main's executor instead (``build_remote``)."""
    role = WorkerRole.from_env()
    if role is not None:
        return build_remote(bus, ctx, role)
    mcp = connect_mcp(ctx.source, ctx.home.root)
    mcp_specs, mcp_handlers = mcp.overlay.specs, mcp.overlay.handlers
    executor = executor_from_config(
        bus, ctx, handlers={**builtin_handlers(), **mcp_handlers}, gate=mcp.overlay.gate
    )
    if not ctx.single_process and ctx.settings.schedule.enabled:  # geode serve's tree has the scheduler
        executor.services["scheduler"] = BusScheduler(bus.transport)  # schedule_job's requests
        # it exited with a request in flight: fail that now, saying the outcome is unknown (never retried)
        bus.subscribe("supervisor", on_exit_failer(bus, ("scheduler",), ctx.name, error=SchedulerLost))
    executor.services["search"] = BusSearch(bus.transport)  # session_search: the store child's index
    executor.schedule_rule.use_tools([*builtin_specs(), *mcp_specs])
    reaper = start_group_reaper(executor, ctx, StoreClient(bus.transport, attempts=3))
    # at start and every SWEEP_S: what an earlier incarnation left uncertain and can be observed is settled
    sweep = ObservationSweep(StoreClient(bus.transport, attempts=3), executor.owner).start()
    start_delegate(bus, executor, ctx, [*builtin_specs(), *mcp_specs])
    concurrency = ctx.settings.tools.handlers
    delivery = ReplyDelivery(StoreClient(bus.transport, attempts=3), bus.transport, owner=executor.owner)
    service = ToolService(
        executor,
        name=ctx.name,
        incarnation=ctx.incarnation,
        catalogue=[*builtin_specs(), *mcp_specs],
        delivery=delivery,
    )
    # the tool routing: remote executors register here and serve the sessions under their roots
    router = RemoteRouter(
        executor,
        bus.transport,
        fail_pending=bus.fail_pending,
        memory=ctx.home.run_dir / "executor-hosts.json",  # across a restart of this child
        records=StoreClient(bus.transport, attempts=3),  # remote receipts a main restart forgot
    ).start()
    assert executor.hooks is not None
    child = ExecutorChild(
        executor, executor.hooks, mcp, reaper, router, sweep=sweep, service=service, ctx=ctx
    )
    # `geode mcp-servers`: the servers, their state and tool counts (the hub `geode reload` last made)
    dispatch = Dispatch(
        "the executor",
        {
            **service.dispatch.plain_routes,
            tools_msg.MCP_SERVERS: lambda b, r: child.mcp.rows(),
            **router.routes(),
        },
    )
    # the messengers child exited: its posts in flight get no reply; fail them now as MessengersLost, so the
    # replies they carried become uncertain at once instead of at their timeout (never re-sent)
    bus.subscribe("supervisor", on_exit_failer(bus, ("messengers",), ctx.name, error=MessengersLost))
    bus.serve(ENDPOINT, InlineTypes(dispatch, RemoteRouter.INLINE), concurrency=concurrency)
    log.info("executor %s serving (%d handler threads)", executor.owner, concurrency)
    return child


def build_remote(bus: Bus, ctx: ChildContext, role: WorkerRole) -> ExecutorChild:
    """A worker host's executor: serves the calls main's executor forwards (built-in tools; MCP servers stay
    on main) as a peer of main's ``executor`` endpoint, and registers ``role.roots`` with heartbeats. Its
    receipts are owned by ``HOST/executor#incarnation``; when main stops answering it exits (75)."""
    owner_name = role.qualified(ctx.name)
    executor = executor_from_config(
        bus, ctx, owner=f"{owner_name}#{ctx.incarnation}", handlers=builtin_handlers()
    )
    executor.services["worker_host"] = role.host  # schedule_job: the scheduler is main's, not routed here
    reaper = start_group_reaper(executor, ctx, StoreClient(bus.transport, attempts=3))
    # at start and every SWEEP_S: what an earlier incarnation left uncertain and can be observed is settled
    sweep = ObservationSweep(StoreClient(bus.transport, attempts=3), executor.owner).start()
    start_delegate(bus, executor, ctx, list(builtin_specs()))
    service = ToolService(executor, name=owner_name, incarnation=ctx.incarnation, catalogue=builtin_specs())
    bus.connect_peer(ENDPOINT, service.dispatch, concurrency=ctx.settings.tools.handlers)
    ready = tools_msg.ExecutorReady(
        host=role.host,
        name=ctx.name,
        incarnation=ctx.incarnation,
        roots=list(role.roots),
        address=role.address_towards_main(),
        pid=os.getpid(),
    )
    agent = RemoteAgent(bus.transport, ready, on_lost=_leave).start()
    log.info(
        "remote executor %s#%d serving roots %s for %s", owner_name, ctx.incarnation, role.roots, role.connect
    )
    assert executor.hooks is not None
    return ExecutorChild(executor, executor.hooks, None, reaper, agent=agent, sweep=sweep, ctx=ctx)


def _leave(why: str) -> None:
    """Main stopped answering: exit now (no handler outlives its incarnation's registration); the supervisor
    starts a new incarnation, which registers afresh. Admitted receipts become uncertain on main's side."""
    log.error("leaving: %s", why)
    logging.shutdown()
    os._exit(EX_TEMPFAIL)


def start_delegate(bus: Bus, executor: ToolExecutor, ctx: ChildContext, specs: list[ToolSpec]) -> None:
    """delegate_task's service: child turns through lanes, whose origin is this process (a lanes peer named
    ``ctx.name``): their stream comes back here and their approvals are relayed to the parent's turn."""
    delegate = LanesDelegate(
        bus.transport,
        origin=bus.name,  # the name lanes pushes to (host-qualified on a worker host)
        specs=specs,
        config=ctx.settings,
        limits=DelegateLimits(max_timeout_s=ctx.settings.tools.delegate.max_timeout_s),
        hooks=lambda: executor.hooks,  # the current runner (`geode reload` replaces it)
    )
    executor.services["delegate"] = delegate

    def on_origin_event(b: lanes_msg.StreamEvent, r: Request) -> None:
        delegate.on_event(b)

    lanes_push = Dispatch(
        f"{bus.name} (lanes peer)",
        {lanes_msg.ORIGIN_EVENT: on_origin_event, lanes_msg.ORIGIN_EVENTS: each_event(on_origin_event)},
    )
    bus.connect_peer("lanes", lanes_push, concurrency=1)


def start_group_reaper(executor: ToolExecutor, ctx: ChildContext, records: Any = None) -> GroupReaper:
    """Note this incarnation's run_bash groups; enforce the deadlines of those a dead executor left behind."""
    groups_dir = ctx.home.run_dir / "executor-groups"
    executor.services["bash_groups"] = GroupNotes(groups_dir, executor.owner)

    def report(note: GroupNote, action: str) -> None:
        when = time.strftime("%H:%M:%S", time.localtime(note.deadline_unix))
        what = (note.pgid, note.operation_id, note.owner, when, SAID.get(action, action))
        log.warning("orphaned run_bash group %d of %s (owner %s died; deadline %s): %s", *what)
        if records is None or not note.session_id or action not in ("killed", "scheduled", "ended"):
            return
        event = TimelineEvent(
            session_id=note.session_id,
            event_id=f"orphan-group-{note.operation_id}-{action}",
            kind="tool.orphan_group",
            ts=time.time(),
            payload={
                "operation_id": note.operation_id,
                "pgid": note.pgid,
                "owner": note.owner,
                "action": action,
                "by": executor.owner,
            },
        )
        # off this thread: at start-up the store may not answer yet
        threading.Thread(target=_append, args=(records, event), daemon=True).start()

    reaper = GroupReaper(groups_dir, report=report)
    reaper.reap()
    return reaper


def _append(records: Any, event: TimelineEvent) -> None:
    try:
        records.append_timeline(event)
    except Exception as exc:  # observation only
        log.warning("timeline note for orphaned group failed: %s", exc)


def apply_reload(child: ExecutorChild, change: ConfigChange, settings: TreeSettings) -> list[str]:
    """Apply the areas of ``change`` the executor owns; returns what it did (one phrase each)."""
    assert child.ctx is not None
    ex, home, done = child.executor, child.ctx.home.root, []
    retired: list[Callable[[], None]] = []
    if HOOKS in change.areas:
        hooks = HookRunner(hooks_of(settings, base_dir=home))
        ex.reconfigure(hooks=hooks)
        retired.append(child.hooks.close)
        child.hooks = hooks
        done.append("hooks reloaded")
    if MCP in change.areas and child.service is not None:  # main's executor: the MCP servers live here
        mcp = connect_mcp(child.ctx.source, home)
        specs = [*builtin_specs(), *mcp.overlay.specs]
        ex.reconfigure(handlers={**builtin_handlers(), **mcp.overlay.handlers}, gate=mcp.overlay.gate)
        child.service.catalogue = specs  # the next `tool.catalogue` (loop workers ask on the reload)
        delegate = ex.services.get("delegate")
        if delegate is not None:
            delegate.specs = tuple(specs)
        ex.schedule_rule.use_tools(specs)
        if child.mcp is not None:
            retired.append(child.mcp.close)
        child.mcp = mcp
        done.append(f"MCP hub reloaded ({len(mcp.overlay.handlers)} tool(s) offered)")
    if MESSENGERS in change.areas and ex.send_rule is not None:
        ex.send_rule.use_bindings(settings.messengers.bindings)
        done.append("send_message bindings")
    if MESSENGERS in change.areas:
        ex.schedule_rule.use_bindings(settings.messengers.bindings)
        done.append("schedule_job bindings")
    if retired:
        threading.Thread(target=_retire, args=(ex, retired), name="reload-retire", daemon=True).start()
    return done


def _retire(ex: ToolExecutor, closers: list[Callable[[], None]]) -> None:
    """Close the replaced hook runner and MCP hub once no call is running (at most RETIRE_WAIT_S)."""
    end = time.monotonic() + RETIRE_WAIT_S
    idle = threading.Event()
    while ex.in_flight() and time.monotonic() < end:
        idle.wait(0.05)
    for close in closers:
        try:
            close()
        except Exception:
            log.exception("closing what the reload replaced failed")
