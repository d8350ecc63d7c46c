"""Entry point of every child process: ``python -m actors.child <name>`` hosts its registry builder."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading

from actors.child_guard import arm_parent_death, report_ready

log = logging.getLogger("actors.child")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    name = args[0] if args else os.environ.get("GEODE_CHILD_NAME", "")
    if not name:
        print("usage: python -m actors.child <name>", file=sys.stderr)
        return 2
    incarnation = int(os.environ.get("GEODE_INCARNATION", "1"))
    arm_parent_death()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    from actors import process_logging
    from actors.bus import Bus
    from actors.registry import ChildContext, build_child
    from geode.home import GeodeHome

    home = GeodeHome.from_env().ensure()
    process_logging.configure(home, name, incarnation)
    bus = Bus(name, incarnation, home).start()
    ctx = ChildContext(name, incarnation, home, home.load_config())
    try:
        hosted = build_child(bus, ctx)
    except Exception:
        log.exception("%s#%d failed to start", name, incarnation)
        bus.stop()
        return 1
    report_ready()
    log.info("%s#%d ready (pid %d)", name, incarnation, os.getpid())
    while not stop.wait(1.0):
        pass
    log.info("%s#%d stopping", name, incarnation)
    try:
        if hosted is not None and hasattr(hosted, "stop"):
            hosted.stop()
    except Exception:
        log.exception("stop failed")
    bus.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
