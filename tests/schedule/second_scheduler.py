"""A second, live scheduler against a running tree's store, for the two-schedulers test: the scheduler child's
own code (:func:`actors.scheduler.assemble`) over a client bus, as another holder, serving nothing (the tree's
``scheduler`` keeps its name). ``python -m tests.schedule.second_scheduler <holder>`` with ``GEODE_HOME`` (and
the tree's ``GEODE_FAKE_CLOCK``); prints ``ready`` once started, then ``ticked <instant>`` whenever the clock
of its last whole tick changes; stops on SIGTERM."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading


def main(holder: str) -> int:
    from actors.bus import Bus
    from actors.bus.endpoints import Endpoints
    from actors.scheduler import assemble
    from actors.tree.config_sections import TreeSettings
    from actors.tree.registry import ChildContext
    from geode.config_source import ConfigSource
    from geode.home import GeodeHome

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="second %(levelname)s %(message)s")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    home = GeodeHome.from_env()
    source = ConfigSource(home, TreeSettings.from_raw, tree=True)
    bus = Bus(f"cli-second-scheduler-{os.getpid()}", 1, home, endpoints=Endpoints.from_config(home)).start()
    proc = assemble(bus, ChildContext("scheduler", 900, home, source), holder)
    proc.start()
    print("ready", flush=True)
    seen = None
    while not stop.wait(0.05):
        if proc.ticked_at != seen:
            seen = proc.ticked_at
            print(f"ticked {seen.isoformat() if seen else ''}", flush=True)
    proc.stop()
    bus.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
