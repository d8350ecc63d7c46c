"""Issue 17 (E) on one machine: a remote executor (`--role worker` env, its own GEODE_HOME and keys) registers
with a served main tree over tcp loopback + CURVE; calls of a session whose workspace is under its roots run
there, others locally; SIGKILL of the remote mid-command makes the effect uncertain at once, never re-run.
Issue 27: after a main restart that forgot the remote (its run dir gone, as after a reboot), the remote's
admitted receipt becomes uncertain with the reason, shown by `geode receipts --uncertain`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from actors.bus import Bus, host_keys
from actors.tree.worker_role import WorkerRole
from geode.home import GeodeHome
from geode.protocol import tools as m
from geode.records.store_client import StoreClient
from geode.tools.executor_client import ExecutorClient
from geode.tools.spec import ToolCall, ToolContext, ToolResult
from tests.actors.tree_kit import ROOT, geode, make_home, serve, stop, wait_for
from tests.multihost.ports import free_base_port
from tests.processes import kill_bash_calls_in
from tests.tools.executor_tree import ALLOW_ALL, bound_executor


@dataclass
class TwoHosts:
    main: GeodeHome
    worker: GeodeHome
    remote: subprocess.Popen[bytes]
    remote_ws: Path
    local_ws: Path
    bus: Bus
    env: dict[str, str]

    def respawn(self) -> None:
        """The remote executor again (a test killed it or it left), registered with main."""
        if self.remote.poll() is None:
            return
        argv = [sys.executable, "-m", "actors.tree.child_main", "executor"]
        self.remote = subprocess.Popen(argv, env=self.env)
        wait_for(
            lambda: any(h.host == "w1" and h.state == "up" for h in _hosts(self.bus)),
            30,
            what="the remote executor to register with main's executor",
            swallow=(Exception,),
        )


def _hosts(bus: Bus) -> list[m.HostRow]:
    return m.Hosts.model_validate(bus.transport.call("executor", m.HOSTS, {}, timeout_s=5)).hosts


@pytest.fixture(scope="module")
def two_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoHosts]:
    base = tmp_path_factory.mktemp("rx")
    worker = GeodeHome(base / "w").ensure()
    worker_pub = host_keys.create(worker)
    worker.config_file.write_text(ALLOW_ALL)
    port = free_base_port()
    main = make_home(
        base,
        f'{ALLOW_ALL}[bus]\nlisten = "tcp://127.0.0.1:{port}"\n'
        f'[bus.curve]\nauthorized_keys = ["{worker_pub}"]\n',
    )
    main_pub = host_keys.create(main)
    remote_ws, local_ws = base / "remote-ws", base / "local-ws"
    remote_ws.mkdir()
    local_ws.mkdir()
    serve(main, timeout=60)
    role = WorkerRole(
        host="w1",
        connect=f"tcp://127.0.0.1:{port}",
        server_key=main_pub,
        children=("executor",),
        roots=(str(remote_ws),),
    )
    env = {**os.environ, "GEODE_HOME": str(worker.root), "PYTHONPATH": str(ROOT), **role.env()}
    remote = subprocess.Popen([sys.executable, "-m", "actors.tree.child_main", "executor"], env=env)
    bus = Bus("remote-exec-test", 1, main).start()
    h = TwoHosts(main, worker, remote, remote_ws, local_ws, bus, env)
    try:
        wait_for(
            lambda: any(h.host == "w1" and h.state == "up" for h in _hosts(bus)),
            30,
            what="the remote executor to register with main's executor",
            swallow=(Exception,),
        )
        yield h
    finally:
        if h.remote.poll() is None:
            h.remote.kill()
        h.remote.wait(10)
        h.bus.stop()
        stop(main)


def _run(client: ExecutorClient, ctx: ToolContext, name: str, args: dict[str, object]) -> ToolResult:
    return client.execute(ctx, ToolCall(id=f"tu-{ctx.operation_id}", name=name, input=args))


def test_a_session_under_the_remote_roots_runs_its_tools_there_others_locally(two_hosts: TwoHosts) -> None:
    h = two_hosts
    h.respawn()
    row = next(x for x in _hosts(h.bus) if x.host == "w1")
    assert row.roots == [str(h.remote_ws)] and row.incarnation == 1 and row.last_seen_s < 3
    store = StoreClient(h.bus.transport, timeout_s=5)
    client, ctx = bound_executor(h.bus, h.remote_ws, "s-remote", "op-remote-1")
    r = _run(client, ctx, "write_file", {"file_path": "a.txt", "content": "from w1"})
    assert not r.is_error, r
    assert (h.remote_ws / "a.txt").read_text() == "from w1"
    receipt = store.get_receipt("op-remote-1")
    assert receipt is not None and receipt.owner == "w1/executor#1" and receipt.state.value == "committed"
    client, ctx = bound_executor(h.bus, h.local_ws, "s-local", "op-local-1")
    r = _run(client, ctx, "write_file", {"file_path": "b.txt", "content": "from main"})
    assert not r.is_error, r
    receipt = store.get_receipt("op-local-1")
    assert receipt is not None and receipt.owner.startswith("executor#"), receipt


def test_killing_the_remote_mid_command_makes_the_effect_uncertain_and_it_never_runs_again(
    two_hosts: TwoHosts,
) -> None:
    h = two_hosts
    h.respawn()
    runs, pgid_file = h.remote_ws / "runs", h.remote_ws / "pgid"
    client, ctx = bound_executor(h.bus, h.remote_ws, "s-cut", "op-cut-1")
    out: list[ToolResult] = []
    cmd = "echo $$ > pgid; echo run >> runs; sleep 30"
    t = threading.Thread(
        target=lambda: out.append(_run(client, ctx, "run_bash", {"command": cmd, "timeout": 40}))
    )
    t.start()
    pgid = 0
    try:
        wait_for(lambda: runs.exists() and pgid_file.exists() and pgid_file.read_text().strip() != "", 20)
        pgid = int(pgid_file.read_text())
        wait_for(lambda: next(x for x in _hosts(h.bus) if x.host == "w1").effects_in_flight == 1, 5)
        os.kill(h.remote.pid, signal.SIGKILL)
        t.join(15)  # main declares the host lost after 3 s of silence
        assert out, "the forwarded call got no answer after its host was lost"
        assert out[0].error_type == "effect_outcome_uncertain", out[0]
        store = StoreClient(h.bus.transport, timeout_s=5)
        wait_for(lambda: (r := store.get_receipt("op-cut-1")) is not None and r.state.value == "uncertain", 5)
        rows = [x for x in _hosts(h.bus) if x.host == "w1"]
        assert [(x.state, x.effects_in_flight) for x in rows] == [("lost", 0)]
        again = _run(client, ctx, "run_bash", {"command": cmd, "timeout": 40})  # the loop asking once more
        assert again.is_error and again.error_type == "executor_host_down", again
        assert runs.read_text() == "run\n"  # ran once, never re-sent
    finally:
        if pgid:
            kill_bash_calls_in(h.remote_ws)


def test_a_main_restart_that_forgot_the_remote_makes_its_admitted_receipt_uncertain_visibly(
    two_hosts: TwoHosts,
) -> None:
    h = two_hosts
    h.respawn()
    runs = h.remote_ws / "restart-runs"
    client, ctx = bound_executor(h.bus, h.remote_ws, "s-restart", "op-restart-1")
    cmd = "echo run >> restart-runs; sleep 30"
    threading.Thread(
        target=lambda: _run(client, ctx, "run_bash", {"command": cmd, "timeout": 40}), daemon=True
    ).start()
    try:
        wait_for(lambda: runs.exists(), 20, what="the command to start on the remote")
        h.bus.stop()
        stop(h.main)
        (h.main.run_dir / "executor-hosts.json").unlink(missing_ok=True)  # a reboot empties the run dir
        serve(h.main, timeout=60)
        h.bus = Bus("remote-exec-test", 2, h.main).start()
        store = StoreClient(h.bus.transport, timeout_s=5)
        wait_for(
            lambda: (r := store.get_receipt("op-restart-1")) is not None and r.state.value != "admitted",
            30,
            what="the remote receipt to leave admitted",
            swallow=(Exception,),
        )
        receipt = store.get_receipt("op-restart-1")
        assert receipt is not None and receipt.state.value == "uncertain", receipt
        assert receipt.owner == "w1/executor#1", receipt.owner
        shown = geode(h.main, "receipts", "--uncertain")
        row = next(ln for ln in shown.stdout.splitlines() if ln.startswith("op-restart-1"))
        assert "uncertain" in row and "did not register again" in shown.stdout, shown.stdout
        assert runs.read_text() == "run\n"  # never re-sent
    finally:
        kill_bash_calls_in(h.remote_ws)
        h.respawn()
