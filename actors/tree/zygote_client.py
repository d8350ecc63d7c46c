"""The supervisor's side of the fork server: start it, ask it for children, learn their exit codes.

:class:`ZygoteProc` looks like the part of ``subprocess.Popen`` the supervisor uses (pid, poll, wait,
send_signal, returncode), so a child forked by the zygote is supervised exactly like one it started itself.
Every method runs on the supervisor's loop thread.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from actors.tree.child_guard import SUPERVISOR_PID_ENV
from actors.tree.zygote import ENV_FD, MAX_MESSAGE

if TYPE_CHECKING:
    from actors.tree.zygote_fork import ForkedProc

log = logging.getLogger(__name__)
# The zygote says "importing M" before each import; these bound the silence, not the whole wait, so a
# loaded machine's slow import (seconds for anthropic at load 8) never counts as a stuck zygote
CORE_WAIT_S = 5.0  # silence while the first spawn waits for the zygote's imports: start children without it
SPAWN_WAIT_S = 3.0  # silence while a spawn waits for its fork: the zygote is stuck; start children without it
IMPORT_WAIT_S = 30.0  # silence after "importing M": one import on a loaded machine
MAX_WAIT_S = 60.0  # however busy it says it is


class ZygoteProc:
    """A child the zygote forked; its exit code arrives through :meth:`Zygote.pump`."""

    def __init__(self, zygote: Zygote, pid: int, *, early: bool = False) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self.early = early  # forked before the zygote imported the SDKs it needs: swapped once they are
        self._zygote = zygote

    def poll(self) -> int | None:
        if self.returncode is None:
            self._zygote.pump()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0.0)
            self._zygote.wait_readable(0.05 if left is None else min(0.05, left))
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:  # never signal a pid that may have been reused
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)


class Zygote:
    """One fork-server process, started lazily and again after it died."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self._env = env
        self._log_path = log_path
        self._proc: subprocess.Popen[bytes] | ForkedProc | None = None
        self._sock: socket.socket | None = None
        self._core = False
        self._next_id = 0
        self._replies: dict[int, dict[str, Any]] = {}
        self._children: dict[int, ZygoteProc] = {}
        self.disabled_why = ""
        self._starts = 0
        self._heard = 0.0  # when the zygote last said anything
        self._importing = False  # and whether that was "importing M"
        self.adopted = False  # by a Supervisor (``adopt``)
        self.sdks_ready = False  # this incarnation imported the SDKs: an early fork can be swapped
        self._warm_env: dict[str, str] | None = None  # an early fork's env: the SDKs ``warm`` imports
        self._warm_sent = False

    # ---- life ------------------------------------------------------------------------------------
    def start(self, *, fork: bool = False) -> None:
        """Start the zygote (it imports in the background); a no-op while one is alive. ``fork``: fork it from
        this process if it has one thread (``zygote_fork.py``: it shares this process's imports)."""
        if self._sock is not None:
            return
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {**os.environ, **self._env, ENV_FD: str(theirs.fileno()), SUPERVISOR_PID_ENV: str(os.getpid())}
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        forked = None
        if fork:
            from actors.tree.zygote_fork import fork_zygote

            with contextlib.suppress(OSError):
                forked = fork_zygote(self._env, self._log_path, theirs)
        try:
            if forked is not None:
                self._proc = forked
            else:
                with open(self._log_path, "ab") as out:
                    self._proc = subprocess.Popen(
                        [sys.executable, "-m", "actors.tree.zygote"],
                        env=env,
                        pass_fds=(theirs.fileno(),),
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        close_fds=True,
                    )
        except OSError as exc:
            ours.close()
            self.disabled_why = f"cannot start the zygote: {exc}"
            log.warning("%s; children start as their own processes", self.disabled_why)
            return
        finally:
            theirs.close()
        ours.setblocking(False)
        self._sock = ours
        self._starts += 1
        self._core = False
        self.sdks_ready, self._warm_env, self._warm_sent = False, None, False
        log.info("zygote started (pid %d)", self._proc.pid)

    @property
    def pid(self) -> int | None:  # read-only, for `geode status` (any thread: one attribute read)
        return self._proc.pid if self._proc is not None else None

    @property
    def watch_key(self) -> tuple[int, int] | None:
        """(fd, start count) of the live socket: a restarted zygote may get the dead one's fd number back."""
        return (self._sock.fileno(), self._starts) if self._sock is not None else None

    def adopt(self, env: dict[str, str]) -> None:
        """A zygote started early (``actors.tree.daemon_main``, before the config was read) is the tree's now:
        a restarted one gets the tree's environment."""
        self._env = env
        self.adopted = True

    def abandon(self) -> None:
        """Stop a zygote started early that the tree does not use (a refused start, zygote off): at once."""
        if self._proc is not None:
            self._proc.kill()
        self._lost("not used")

    def close(self) -> None:
        """Stop the zygote (after the children are gone); its pipe closing is enough to make it exit."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._proc is not None:
            try:
                self._proc.wait(2.0)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(2.0)
            self._proc = None

    # ---- children --------------------------------------------------------------------------------
    def spawn(
        self,
        name: str,
        env: dict[str, str],
        ready_w: int,
        log_fd: int,
        *,
        sdk: bool = False,
        early: bool = False,
    ) -> ZygoteProc | None:
        """Fork ``child_main NAME`` with ``env`` (``sdk``: after the zygote imported the SDKs, or at once when
        ``early``: :attr:`ZygoteProc.early` says which); None when the zygote cannot (the caller execs it)."""
        self.start()
        if self._sock is None or not self._await_core():
            return None
        self._next_id += 1
        rid = self._next_id
        msg = json.dumps({"op": "spawn", "id": rid, "name": name, "env": env, "sdk": sdk, "early": early})
        try:
            socket.send_fds(self._sock, [msg.encode()], [ready_w, log_fd])
        except OSError as exc:
            self._lost(f"send: {exc}")
            return None
        self._wait(lambda: rid in self._replies, SPAWN_WAIT_S)
        reply = self._replies.pop(rid, None)
        if reply is None:
            if self._sock is not None:  # alive but not answering: never wait on it again this incarnation
                self._kill(f"no answer to a spawn (silent for {SPAWN_WAIT_S:g}s)")
            return None
        if reply.get("op") != "spawned":
            log.warning("zygote could not fork %s: %s", name, reply.get("error"))
            return None
        proc = ZygoteProc(self, int(reply["pid"]), early=sdk and reply.get("sdks") is False)
        self._children[proc.pid] = proc
        if proc.early and self._warm_env is None:
            self._warm_env = env
        return proc

    def warm(self) -> None:
        """After a burst of spawns: an early fork was made, so have the zygote import the SDKs now (once per
        incarnation, without waiting: it says ``sdks`` when done, :attr:`sdks_ready`)."""
        if self._sock is None or self._warm_env is None or self._warm_sent:
            return
        self._warm_sent = True
        try:
            self._sock.send(json.dumps({"op": "warm", "env": self._warm_env}).encode())
        except OSError as exc:
            self._lost(f"send: {exc}")

    def _await_core(self) -> bool:
        if not self._wait(lambda: self._core, CORE_WAIT_S) and self._sock is not None:
            self._kill(f"not ready (silent for {CORE_WAIT_S:g}s)")
        return self._core

    def _wait(self, done: Callable[[], bool], silence_s: float) -> bool:
        """Pump until ``done()``, the zygote is gone, it has said nothing for ``silence_s``, or MAX_WAIT_S."""
        start = time.monotonic()
        self._heard = start
        while not done() and self._sock is not None:
            now = time.monotonic()
            quiet = IMPORT_WAIT_S if self._importing else silence_s  # an import is slow, not stuck
            end = min(self._heard + quiet, start + MAX_WAIT_S)
            if now >= end:
                break
            self.wait_readable(end - now)
            self.pump()
        return done()

    # ---- messages --------------------------------------------------------------------------------
    def wait_readable(self, timeout: float) -> None:
        if self._sock is not None and timeout > 0:
            with contextlib.suppress(OSError, ValueError):
                select.select([self._sock], [], [], timeout)

    def pump(self) -> None:
        """Read every message waiting: exit codes, spawn replies, readiness; EOF means the zygote died."""
        while self._sock is not None:
            try:
                data = self._sock.recv(MAX_MESSAGE)
            except BlockingIOError:
                return
            except OSError as exc:
                self._lost(str(exc))
                return
            if not data:
                self._lost("it exited")
                return
            self._heard = time.monotonic()
            try:
                msg = json.loads(data)
            except ValueError:
                log.warning("zygote: unreadable message %r", data[:200])
                continue
            op = msg.get("op")
            self._importing = op == "importing"
            if op == "exit":
                proc = self._children.pop(int(msg["pid"]), None)
                if proc is not None:
                    proc.returncode = int(msg["rc"])
            elif op == "core":
                self._core = True
                log.info("zygote %s ready: children fork from it", msg.get("pid"))
            elif op == "sdks":
                if not self.sdks_ready:
                    log.info("zygote imported the SDKs: loop workers and messengers fork from it")
                self.sdks_ready = True
            elif op in ("spawned", "error") and isinstance(msg.get("id"), int):
                self._replies[msg["id"]] = msg

    def _kill(self, why: str) -> None:
        log.warning("zygote: %s: stopping it", why)
        if self._proc is not None:
            self._proc.kill()
        self._lost(why)

    def _lost(self, why: str) -> None:
        """The zygote is gone: its children die with it (PDEATHSIG); make sure, and report them killed."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(1.0)
            self._proc = None
        if self._children:
            log.warning("zygote lost (%s): %d children go with it", why, len(self._children))
        for proc in self._children.values():
            proc.send_signal(signal.SIGKILL)
            proc.returncode = -signal.SIGKILL
        self._children.clear()
        self._core = False
        self.sdks_ready, self._warm_env, self._warm_sent = False, None, False
