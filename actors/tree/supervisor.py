"""The root supervisor: starts children, restarts them by OTP rules, marks flappers fatal, stops the tree.

A child that reported ready and dies is restarted at once; past its own ``intensity`` it turns ``fatal`` while
the rest keeps serving; only a tree-wide storm (``tree_intensity``) stops the tree. Backoff is for failed
starts only. All child state is owned by the thread that calls :meth:`Supervisor.run`; other threads (bus
handlers, signal handlers) only enqueue commands. Exit code of :meth:`run`: 0 after a requested stop, 1 after
a restart storm (or when every child is fatal).
What an exit leads to (restart, backoff, fatal, storm) is ``actors/tree/restarts.py``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import selectors
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from actors.tree.child_handle import ChildRun, IncarnationStore
from actors.tree.restarts import DiedCallback, RestartRules
from actors.tree.spec import ChildSpec, TreeConfig
from actors.tree.swaps import SdkSwaps
from actors.tree.zygote_client import Zygote
from geode.metrics import record as metrics
from geode.protocol import lifecycle
from geode.protocol.errors import NotFound
from geode.protocol.runtime import ChildInfo

log = logging.getLogger(__name__)

Publish = Callable[[str, dict[str, Any]], None]


class Supervisor(RestartRules, SdkSwaps):
    """A one-level OTP-style supervisor of OS processes."""

    def __init__(
        self,
        specs: Sequence[ChildSpec],
        config: TreeConfig | None = None,
        *,
        logs_dir: Path,
        incarnations: IncarnationStore | None = None,
        env: dict[str, str] | None = None,
        publish: Publish | None = None,
        zygote: Zygote | None = None,
    ) -> None:
        """``zygote``: one started early (``actors.tree.daemon_main``), used when the tree forks children."""
        self.config = config or TreeConfig()
        self.children: dict[str, ChildRun] = {s.name: ChildRun(s) for s in specs}
        self._order = [s.name for s in specs]
        self._logs_dir = logs_dir
        self._incarnations = incarnations or IncarnationStore(None)
        self._env = dict(env or {})
        self._publish = publish
        self._died: list[DiedCallback] = []
        self._cmds: queue.SimpleQueue[tuple[str, str]] = queue.SimpleQueue()
        self._signals: list[int] = []
        self._restarts: deque[float] = deque()
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._lock = threading.Lock()
        self._snapshot: list[ChildInfo] = []
        self.state = "running"
        self.exit_code: int | None = None
        self.force = False
        self.started = threading.Event()
        self.zygote: Zygote | None = None
        wanted = self.config.zygote and os.environ.get("GEODE_ZYGOTE", "1") != "0"
        if wanted and any(s.forkable for s in specs):
            self.zygote = zygote or Zygote(self._env, logs_dir / "zygote.log")
            self.zygote.adopt(self._env)
            if zygote is not None:
                log.info("zygote started before the tree's imports (pid %s)", zygote.pid)
        elif zygote is not None:
            zygote.abandon()
        self._zygote_key: tuple[int, int] | None = None  # (fd, start count) registered in the selector

    # ---- thread-safe API -------------------------------------------------------------------------
    def on_child_died(self, callback: DiedCallback) -> None:
        """``callback(name, incarnation, reason)`` after every child exit; must not block (enqueue work)."""
        self._died.append(callback)

    def snapshot(self) -> list[ChildInfo]:
        with self._lock:
            return list(self._snapshot)

    def request_stop(self) -> None:
        self._command("stop", "")

    def request_restart(self, name: str) -> None:
        if name not in self.children:
            raise NotFound(f"no child named {name!r} (children: {', '.join(self._order)})")
        self._command("restart", name)

    def _command(self, cmd: str, arg: str) -> None:
        self._cmds.put((cmd, arg))
        try:
            self._wake_w.send(b"c")
        except OSError:
            pass

    # ---- main loop -------------------------------------------------------------------------------
    def run(self, *, install_signals: bool = True) -> int:
        if install_signals:
            self._install_signals()
        try:
            if self.zygote is not None:
                self.zygote.start()  # it imports while we get ready; the first spawn waits for it
            now = time.monotonic()
            for name in self._start_order():
                self._start(self.children[name], now)
            self._swap_early(now)  # the zygote imports the SDKs now, while the children start
            self._refresh()
            self.started.set()
            while self.state == "running":
                self._step()
            self._shutdown()
        finally:
            if self.zygote is not None:
                self._watch_zygote(None)
                self.zygote.close()
            self._refresh()
            self._wake_r.close()
            self._wake_w.close()
        return self.exit_code if self.exit_code is not None else 0

    def _start_order(self) -> list[str]:
        """With the zygote, the children that need the SDKs last: the others and the loop workers (forked
        early, swapped later: ``swaps.py``) at once, then those that wait for the SDKs (it imports them after
        the burst, or before such a fork). Stopping stays the reverse of ``_order``."""
        if self.zygote is None:
            return list(self._order)
        return sorted(self._order, key=lambda n: _start_rank(self.children[n].spec))

    def _install_signals(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
            signal.signal(sig, self._on_signal)
        signal.set_wakeup_fd(self._wake_w.fileno(), warn_on_full_buffer=False)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals.append(signum)  # only enqueue; the loop drains

    def _watch_zygote(self, key: tuple[int, int] | None) -> None:
        """Wake the loop when the zygote reports (an exit code). A restarted zygote's socket may reuse the
        dead one's fd number (which the kernel dropped from epoll), so the key carries its start count."""
        if key == self._zygote_key:
            return
        if self._zygote_key is not None:
            with contextlib.suppress(KeyError, OSError, ValueError):
                self._sel.unregister(self._zygote_key[0])
        self._zygote_key = key
        if key is not None:
            self._sel.register(key[0], selectors.EVENT_READ, "zygote")

    def _step(self) -> None:
        for key, _ in self._sel.select(self._timeout()):
            if key.data == "zygote":
                assert self.zygote is not None
                self.zygote.pump()
                self._watch_zygote(self.zygote.watch_key)
            elif key.data is None:
                try:
                    while self._wake_r.recv(4096):
                        pass
                except OSError:
                    pass
            else:
                self._on_pipe(key.data)
        self._drain_signals()
        self._drain_commands()
        now = time.monotonic()
        self._reap(now)
        self._timers(now)
        self._swap_early(now)
        self._refresh()

    def _timeout(self) -> float:
        now, t = time.monotonic(), 0.25
        for c in self.children.values():
            if c.proc is not None and c.eof_at is not None and now - c.eof_at < 0.5:
                t = min(t, 0.01)  # pipe closed: the exit status is probably imminent
            for due in (c.restart_at, c.kill_at):
                if due is not None:
                    t = min(t, max(0.0, due - now))
        return t

    def _drain_signals(self) -> None:
        while self._signals:
            sig = self._signals.pop(0)
            if sig in (signal.SIGTERM, signal.SIGINT):
                if self.state == "stopping":
                    self.force = True
                log.info("signal %s: stopping the tree", signal.Signals(sig).name)
                self.state = "stopping"
                self.exit_code = 0 if self.exit_code is None else self.exit_code

    def _drain_commands(self) -> None:
        while True:
            try:
                cmd, arg = self._cmds.get_nowait()
            except queue.Empty:
                return
            if cmd == "stop":
                self.state = "stopping"
                self.exit_code = 0
            elif cmd == "restart":
                c = self.children[arg]
                if c.state == "fatal":
                    log.warning("%s: fatal state cleared by an operator restart", c.name)
                c.clear_fatal()
                if c.proc is not None:
                    c.then = "restart"
                    c.terminate(time.monotonic())
                else:
                    self._schedule(c, 0.0)

    def _on_pipe(self, c: ChildRun) -> None:
        assert c.ready_fd is not None
        try:
            data = os.read(c.ready_fd, 512)
        except BlockingIOError:
            return
        if not data:
            self._sel.unregister(c.ready_fd)
            c.close_pipe()
            c.eof_at = time.monotonic()
            return
        if b"ready" in data and c.state == "starting":
            c.state = "running"
            c.ready_at = time.monotonic()
            log.info("%s#%d ready (pid %s)", c.name, c.incarnation, c.pid)
            self._emit(lifecycle.CHILD_READY, c)

    def _reap(self, now: float) -> None:
        for c in self.children.values():
            if c.proc is not None and (rc := c.proc.poll()) is not None:
                self._on_exit(c, rc, now)

    def _timers(self, now: float) -> None:
        self._keep_pools_alive(now)
        for name in self._order:
            c = self.children[name]
            if c.proc is None and c.state == "backoff" and c.restart_at is not None and now >= c.restart_at:
                pred = self.children.get(c.after) if c.after else None
                settled = pred is None or (pred.then is None and pred.kill_at is None)
                if settled and (pred is None or pred.state in ("running", "stopped", "fatal")):
                    self._start(c, now)
            elif c.proc is not None and c.state == "starting" and c.kill_at is None:
                if now - c.started_at > self.config.ready_timeout_s:
                    log.error(
                        "%s#%d not ready within %.1fs: killing",
                        c.name,
                        c.incarnation,
                        self.config.ready_timeout_s,
                    )
                    c.kill()
                    c.kill_at = now
            c.kill_if_due(now)

    # ---- transitions -----------------------------------------------------------------------------
    def _start(self, c: ChildRun, now: float) -> None:
        inc = self._incarnations.next(c.name)
        try:
            c.spawn(inc, self._env, self._logs_dir / f"{c.name}.log", self.zygote)
        except OSError as exc:
            log.error("cannot start %s: %s", c.name, exc)
            c.incarnation = inc
            self._on_exit(c, 127, now)
            return
        if self.zygote is not None:
            self._watch_zygote(self.zygote.watch_key)
        assert c.ready_fd is not None
        self._sel.register(c.ready_fd, selectors.EVENT_READ, c)
        log.info("started %s#%d pid %s", c.name, inc, c.pid)
        metrics.child_started(c.name, inc)
        self._emit(lifecycle.CHILD_STARTED, c)

    def _shutdown(self) -> None:
        """Stop the children in reverse start order: SIGTERM, grace, SIGKILL (all at once when forced)."""
        self._emit_tree(lifecycle.TREE_STOPPING)
        for name in reversed(self._order):
            c = self.children[name]
            if c.proc is None:
                if c.state != "fatal":
                    c.state = "stopped"
                continue
            c.terminate(time.monotonic())
            while c.proc is not None and c.proc.poll() is None:
                self._drain_signals()
                if self.force:
                    for other in self.children.values():
                        other.kill()
                c.kill_if_due(time.monotonic())
                self._refresh()
                try:
                    c.proc.wait(timeout=0.02)
                except Exception:
                    pass
            if c.proc is not None:
                state = c.state
                self._on_exit(c, c.proc.poll() or 0, time.monotonic())
                c.state = "fatal" if state == "fatal" else "stopped"

    # ---- observation -----------------------------------------------------------------------------
    def _refresh(self) -> None:
        now = time.monotonic()
        snap = [self.children[n].info(now) for n in self._order]
        with self._lock:
            self._snapshot = snap

    def _emit(self, topic: str, c: ChildRun, **extra: Any) -> None:
        if self._publish is not None:
            try:
                event = lifecycle.ChildEvent(
                    name=c.name, incarnation=c.incarnation, pid=c.pid, state=c.state, **extra
                )
                self._publish(topic, event.model_dump(mode="json"))
            except Exception:
                log.exception("publish failed")

    def _emit_tree(self, topic: str) -> None:
        if self._publish is not None:
            try:
                self._publish(topic, lifecycle.TreeEvent(pid=os.getpid()).model_dump(mode="json"))
            except Exception:
                log.exception("publish failed")


def _start_rank(spec: ChildSpec) -> int:
    """Without an SDK first, then the loop workers (forked early), then those that wait for the SDKs."""
    return 0 if not spec.sdks else 1 if spec.swappable else 2
