"""Entry point of every child process: ``python -m actors.tree.child_main <name>`` hosts its builder."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading

from actors.tree import c_heap, path_parts
from actors.tree.child_guard import parent_check, report_ready
from actors.tree.fork_imports import ImportsAfterFork

log = logging.getLogger("actors.tree.child_main")
EX_TEMPFAIL = 75  # sysexits: a start-up failure that may clear (unwritable directory, full disk)
# the imports this child made since the zygote forked it (None: exec'd); what a child imports after the fork
# is private memory and start time of every incarnation, so the ready line says it (CORE should hold it);
# recorded by a finder, not by a copy of sys.modules (fork_imports.py: that copied 1.7-5.4 MiB of pages)
AT_FORK: ImportsAfterFork | None = None


def imported_after_fork() -> list[str]:
    """The modules this forked child imported itself (none when the zygote's imports cover it; [] exec'd)."""
    return AT_FORK.imported() if AT_FORK is not None else []


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    name = args[0] if args else os.environ.get("GEODE_CHILD_NAME", "")
    if not name:
        print("usage: python -m actors.tree.child_main <name>", file=sys.stderr)
        return 2
    incarnation = int(os.environ.get("GEODE_INCARNATION", "1"))
    path_parts.install()  # an exec'd child (a forked one has it from the daemon)
    # before any thread: one malloc arena, freed C heap back to the OS, and the supervisor-death check, on
    # one housekeeping thread (c_heap.py, child_guard.py)
    c_heap.configure(tick=parent_check())
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    from actors.bus import Bus
    from actors.tree import config_memo, process_logging
    from actors.tree.peer_exits import fail_calls_on_exit
    from actors.tree.registry import ChildContext, build_child
    from geode.home import GeodeHome
    from geode.protocol.errors import GeodeError

    home = GeodeHome.from_env()
    try:
        home.ensure()
    except OSError as exc:  # e.g. the records directory is a file, the disk is full, no permission
        print(f"{name}: cannot prepare {home.root} (the record store cannot open): {exc}", file=sys.stderr)
        return EX_TEMPFAIL
    from actors.bus.endpoints import Endpoints
    from geode.config_source import ConfigSource

    try:  # the one config source of this child: the tree's validated copy (broken file: the last good)
        source = ConfigSource(home, config_memo.build, tree=True)  # the zygote's snapshot of the same file
    except GeodeError as exc:
        print(f"{name}: {exc}", file=sys.stderr, flush=True)
        return EX_TEMPFAIL
    process_logging.configure(home, name, incarnation, settings=source.snapshot)
    from actors.tree.telemetry_boot import Tracing

    tracing = Tracing(f"{name}#{incarnation}", source.snapshot)  # after the fork: a provider of its own
    if os.environ.get("GEODE_TRACEMALLOC"):  # diagnostics: SIGUSR2 logs the heap growth (heap_trace.py)
        from actors.tree.heap_trace import arm

        arm(name)
    from actors.tree.worker_role import bus_name

    endpoints = Endpoints.from_config(home, bus=source.snapshot.bus)
    bus = Bus(bus_name(name), incarnation, home, endpoints=endpoints).start()  # ``HOST/<name>`` on a host
    fail_calls_on_exit(bus, name)  # a store call in flight when the store dies is retried at once
    ctx = ChildContext(name, incarnation, home, source)
    try:
        hosted = build_child(bus, ctx)
    except GeodeError as exc:  # a named start-up failure (store cannot open, bad config): say why, exit 75
        log.error("%s#%d cannot start: %s", name, incarnation, exc)
        print(f"{name}: {exc}", file=sys.stderr, flush=True)
        bus.stop()
        return EX_TEMPFAIL
    except Exception:
        log.exception("%s#%d failed to start", name, incarnation)
        bus.stop()
        return 1
    from actors.tree.reload_rule import arm_reload

    arm_reload(bus, ctx, hosted)  # `geode reload`: re-read the tree's copy, apply, confirm
    report_ready()
    if AT_FORK is None:
        log.info("%s#%d ready (pid %d)", name, incarnation, os.getpid())
    else:
        new = imported_after_fork()
        AT_FORK.stop()
        log.info(  # the modules it carries: every one of them is pages of the tree (a count to guard)
            "%s#%d ready (pid %d; %d modules; %d modules imported after the fork%s)",
            name,
            incarnation,
            os.getpid(),
            len(sys.modules),
            len(new),
            f": {', '.join(new[:30])}" if new else "",
        )

    while not stop.wait(1.0):
        pass
    log.info("%s#%d stopping", name, incarnation)
    try:
        if hosted is not None and hasattr(hosted, "stop"):
            hosted.stop()
    except Exception:
        log.exception("stop failed")
    bus.stop()
    tracing.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
