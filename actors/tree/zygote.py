"""The fork server: imports what every child needs once, then forks children on the supervisor's request.

A restarted child starts in milliseconds with its modules (and the provider SDKs) already imported, and
the tree shares those pages. Started by :class:`actors.tree.zygote_client.Zygote` as
``python -m actors.tree.zygote``; single-threaded, so forking is safe. It speaks JSON datagrams with file
descriptors on a SOCK_SEQPACKET socket (``GEODE_ZYGOTE_FD``):

* supervisor → zygote: ``{"op": "spawn", "id": N, "name": ..., "env": {...}, "sdk": bool, "early": bool}``
  with the fds ``[ready_w, log]``; ``sdk``: the child needs the SDKs (a loop worker, the messengers);
  ``early``: it may be forked before they are imported (a loop worker: swapped later, ``swaps.py``);
  ``{"op": "warm", "env": {...}}``: import the SDKs now (after the tree's first burst of spawns);
* zygote → supervisor: ``{"op": "importing", "module": M}`` before each import (busy, not stuck),
  ``{"op": "core"}`` once the children's modules are imported, ``{"op": "sdks"}`` once the SDKs are,
  ``{"op": "spawned", "id": N, "pid": P, "sdks": bool}`` (or ``"error"``; ``sdks``: the child carries them),
  and ``{"op": "exit", "pid": P, "rc": RC}`` (Popen's returncode convention: ``-signal`` when killed).

The SDKs (``WARM``, 1-2 s of imports) come after ``core``: children that do not need them are forked at once,
and so are the loop workers (``early``: ready at once, taking turns once swapped for a fork with them); the
zygote imports the SDKs on ``warm`` (or before the fork of an SDK child that cannot be early), and the
supervisor then swaps each early loop worker, once idle, for a fork that shares them.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import json
import os
import select
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from actors.tree import immortal, path_parts, pool_fill
from actors.tree.fork_imports import watch as watch_imports

ENV_FD = "GEODE_ZYGOTE_FD"
MAX_MESSAGE = 1 << 20  # an environment is a few KiB
# every child's code, in the order children start (store first), then what first turns need
CORE = (
    "actors.tree.child_main",
    "actors.bus",
    "actors.tree.registry",
    "actors.store",
    "actors.lanes",
    "actors.executor",
    "actors.loop_worker",
    "actors.control",
    "actors.messengers",
    "actors.scheduler",
    # what child_main and the builders import at every start: imported after the fork, each child paid its
    # import time and ~8 MiB of private memory (the config schema's pydantic models) on every (re)start
    "actors.tree.config_sections",
    "actors.tree.config_memo",
    "actors.tree.process_logging",
    "actors.tree.telemetry_boot",
    "actors.tree.reload_rule",
    "actors.tree.peer_exits",
    "actors.tree.worker_role",
    "actors.bus.endpoints",
    "actors.bus.host_keys",
    "geode.config_source",
    "geode.protocol.webhooks",
    "geode.loop.hook_bridge",
    "geode.tools.mcp.hub",
    "geode.tools.mcp.bridge",
    "geode.tools.mcp.catalogue",
    "geode.tools.mcp.status",
    "geode.schedule.stored",
    # the Anthropic wire's adapter (not its SDK): a loop worker's ready describes the provider, which imports
    # it (the OpenAI adapters come with actors.loop_worker); a clean-clone CI run of b17ee02 saw loop-2#2
    # import it after the fork
    "geode.providers.anthropic_messages",
    "lmdb._envid",  # lmdb.open imports it
    # socket.getaddrinfo encodes a str host with the IDNA codec: a loop worker's first connection imported
    # encodings.idna and stringprep after the fork (a bare fork: +1.9 MiB private, 0.3 pre-imported; in the
    # running tree ~0.2 MiB a loop worker, whose earlier work had copied most of those pages already)
    "encodings.idna",
)
# the provider SDKs, imported before the first fork of a child that needs them (a loop worker): 1.2-1.8 s,
# while the other children start; no loop worker ever pays them on its first turn, and the tree shares them
WARM = ("httpx", "anthropic", "openai")
# the provider SDKs of the config's models (actors/tree/provider_sdks.py), comma-separated; unset: all of WARM
PROVIDERS_ENV = "GEODE_ZYGOTE_PROVIDERS"
PROVIDER_SDKS = WARM[1:]
# more to import with them, comma-separated: the messenger SDKs of the platforms the config binds
WARM_ENV = "GEODE_ZYGOTE_WARM"
PR_SET_PDEATHSIG = 1
# an early fork (no SDKs yet) builds no provider at ready: the warm-up would import the SDK in every early
# worker at once, beside the zygote's own import (geode.loop.turn_providers.WARM_ENV); it offers lanes no
# capacity until it is swapped (geode.loop.retirement.EARLY_ENV)
NO_WARM_UP = {"GEODE_WARM_WORKER": "0", "GEODE_EARLY_FORK": "1"}

_setproctitle: Callable[[str], None] | None
try:  # a dependency; without it ps shows the zygote's command line for every child
    from setproctitle import setproctitle as _setproctitle
except ImportError:  # pragma: no cover
    _setproctitle = None


def _send(sock: socket.socket, msg: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):
        sock.send(json.dumps(msg).encode())


def warm_modules(environ: Mapping[str, str]) -> tuple[str, ...]:
    """What the zygote imports: every child's code, the provider SDKs, then ``WARM_ENV``."""
    return CORE + sdk_modules(environ)


def sdk_modules(environ: Mapping[str, str]) -> tuple[str, ...]:
    """What a child that needs the SDKs waits for: the provider SDKs, then ``WARM_ENV`` (messenger SDKs)."""
    extra = tuple(m.strip() for m in environ.get(WARM_ENV, "").split(",") if m.strip())
    if (only := environ.get(PROVIDERS_ENV)) is None:
        return WARM + extra
    wanted = {m.strip() for m in only.split(",")}
    return WARM[:1] + tuple(m for m in PROVIDER_SDKS if m in wanted) + extra


def _import(name: str) -> None:
    t0 = time.monotonic()
    try:
        importlib.import_module(name)
    except Exception as exc:  # a child importing it itself will report the real error
        print(f"zygote: cannot import {name}: {exc!r}", file=sys.stderr, flush=True)
        return
    print(f"zygote: imported {name} in {time.monotonic() - t0:.2f}s", flush=True)


def _die_with_parent() -> int:
    """SIGKILL this process when the supervisor goes; its children follow (they watch us the same way)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    return os.getppid()


def _rc(status: int) -> int:
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1


def _child(name: str, env: dict[str, str], fds: list[int], closing: list[int]) -> None:
    """In the forked child: become ``python -m actors.tree.child_main NAME`` and never return."""
    rc = 1
    at_fork = watch_imports()  # first: every import from here on is this child's own
    try:
        for fd in closing:
            with contextlib.suppress(OSError):
                os.close(fd)
        _title(name)  # first: setproctitle claims the environment's memory, which the child then replaces
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM):  # SIGPIPE stays ignored, as in every Python process
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        ready_w, log_fd = fds
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.close(log_fd)
        from actors.tree.child_guard import READY_FD_ENV, SUPERVISOR_PID_ENV

        os.environ.clear()
        os.environ.update(env)
        os.environ[READY_FD_ENV] = str(ready_w)
        os.environ[SUPERVISOR_PID_ENV] = str(os.getppid())  # we watch the zygote; it watches the supervisor
        from geode import faults

        faults.rearm(env.get(faults.ENV), name)  # armed at import from the zygote's env: this child's own
        sys.argv = ["-m", "actors.tree.child_main", name]
        from actors.tree import child_main

        child_main.AT_FORK = at_fork
        rc = child_main.main([name])
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
        rc = 1
    finally:
        with contextlib.suppress(Exception):
            import logging

            logging.shutdown()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(rc)


def _prepare_config(env: Mapping[str, str]) -> None:
    """The tree's config validated here, once per version of the file, not in every child (config_memo.py)."""
    from actors.tree import config_memo, process_logging
    from geode.home import GeodeHome

    if config_memo.prepare(GeodeHome.from_env(env.get("GEODE_HOME"))):
        snapshot = config_memo.snapshot()
        if snapshot is not None:  # the root logger's level each child sets (process_logging.py)
            process_logging.preset_root_level(snapshot)
        gc.freeze()  # a new snapshot's objects too: no collection in a child writes to their pages


def _title(name: str) -> None:
    """``ps`` shows the child as if it had been started by its own command line."""
    if _setproctitle is not None:
        _setproctitle(f"{sys.executable} -m actors.tree.child_main {name}")


class Server:
    """The zygote's loop: imports, then spawn requests and reaping."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.wake_r, self.wake_w = os.pipe()
        for fd in (self.wake_r, self.wake_w):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # the wakeup fd does the work
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in a terminal: the supervisor decides
        self.parent = _die_with_parent()
        self.children: set[int] = set()
        self.sdks_done: set[str] = set()

    def run(self) -> int:
        from actors.tree.httpx_no_cli import import_httpx_without_cli

        had = len(sys.modules)  # forked from the daemon: it imported CORE (zygote_fork.import_core)
        import_httpx_without_cli()  # before CORE imports it (the executor's web tools): ~4.5 MiB less
        self._import_all(CORE)
        print(f"zygote: {len(sys.modules) - had} modules imported for CORE", flush=True)
        _send(self.sock, {"op": "core", "pid": os.getpid()})
        while True:
            if os.getppid() != self.parent:
                return 0
            watched: list[Any] = [self.sock, self.wake_r]
            ready, _, _ = select.select(watched, [], [], 0.5)
            if self.wake_r in ready:
                with contextlib.suppress(OSError):
                    while os.read(self.wake_r, 512):
                        pass
            self._reap()
            if self.sock in ready and not self._request():
                return 0

    def _import_all(self, names: Any, *, clients: bool = False) -> None:
        if clients:  # the SDKs' re-export packages load lazily: ~1,000 modules fewer (sdk_lazy_types.py)
            from geode.providers import sdk_lazy_types

            sdk_lazy_types.install()
        for name in names:
            _send(self.sock, {"op": "importing", "module": name})  # busy, not stuck (slow when loaded)
            _import(name)
        if clients:  # the SDKs' first-client state, built here and shared, not copied into each loop worker
            from actors.tree.sdk_warmup import build_and_drop, rehearse_request

            build_and_drop(names)
            rehearse_request(names)  # a worker's first request's lazy state, answered in memory
        gc.collect()
        immortal.immortalize()  # the phase's classes, functions and constants: no count written in a child
        gc.freeze()  # what is imported now stays shared with the children (no gc writes to its pages)
        pool_fill.fill()  # and their allocations go to fresh pages, not into this phase's holes and tails

    def _import_sdks(self, env: Mapping[str, str]) -> None:
        """The SDKs a child with ``env`` needs (``WARM_ENV`` is in the spawn's env: the zygote may have been
        started before the supervisor read the config), those not imported yet."""
        names = [m for m in sdk_modules(env) if m not in self.sdks_done]
        if names:
            self.sdks_done.update(names)
            self._import_all(names, clients=True)
            _send(self.sock, {"op": "sdks"})

    def _has_sdks(self, env: Mapping[str, str]) -> bool:
        return all(m in self.sdks_done for m in sdk_modules(env))

    def _request(self) -> bool:
        try:
            data, fds, _flags, _addr = socket.recv_fds(self.sock, MAX_MESSAGE, 4)
        except OSError:
            return False
        if not data:
            return False  # the supervisor closed its end: it is going
        req: Any = {}
        try:
            req = json.loads(data)
            if isinstance(req, dict) and req.get("op") == "warm" and not fds:
                env = dict(req.get("env") or {})
                if self._has_sdks(env):
                    _send(self.sock, {"op": "sdks"})  # imported already (for a child that could not wait)
                self._import_sdks(env)
                return True
            if not isinstance(req, dict) or req.get("op") != "spawn" or len(fds) != 2:
                raise ValueError(f"bad request {str(req)[:200]!r} with {len(fds)} fds")
            env = dict(req["env"])
            carries = not req.get("sdk") or self._has_sdks(env)
            if not carries and not req.get("early"):
                self._import_sdks(env)
                carries = True
            _prepare_config(env)
            pool_fill.fill(tails=False)  # the child's first allocations in fresh pages, not in shared holes
            pid = os.fork()
            if pid == 0:
                ours = [self.sock.fileno(), self.wake_r, self.wake_w]
                _child(str(req["name"]), env if carries else {**env, **NO_WARM_UP}, fds, ours)
            self.children.add(pid)
            _send(self.sock, {"op": "spawned", "id": req.get("id"), "pid": pid, "sdks": carries})
        except Exception as exc:
            rid = req.get("id") if isinstance(req, dict) else None
            _send(self.sock, {"op": "error", "id": rid, "error": repr(exc)[:500]})
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
        return True

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.children.clear()
                return
            if pid == 0:
                return
            self.children.discard(pid)
            _send(self.sock, {"op": "exit", "pid": pid, "rc": _rc(status)})


def main() -> int:
    path_parts.install()  # an exec'd zygote (a forked one has it from the daemon)
    fd = int(os.environ.pop(ENV_FD, "-1"))
    if fd < 0:
        print("usage: started by the supervisor with GEODE_ZYGOTE_FD", file=sys.stderr)
        return 2
    sock = socket.socket(fileno=fd)
    started = time.monotonic()
    try:
        return Server(sock).run()
    finally:
        up = time.monotonic() - started
        print(f"zygote {os.getpid()} exiting after {up:.1f}s", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
