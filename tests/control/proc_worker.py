"""``python -m tests.control.proc_worker NAME [INCARNATION]``: the scripted worker as a real process."""

from __future__ import annotations

import os
import signal
import sys
import threading

from actors.bus import Bus
from geode.home import GeodeHome
from tests.control.scripted_worker import ScriptedWorker


def main() -> int:
    name = sys.argv[1]
    inc = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    home = GeodeHome.from_env()
    bus = Bus(name, inc, home).start()
    w = ScriptedWorker(bus.transport, name, inc)
    bus.connect_peer("lanes", w.handle, concurrency=4)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not stop.is_set():
        try:
            w.ready()
            break
        except Exception:
            stop.wait(0.1)
    print("ready", flush=True)
    while not stop.wait(0.5):
        try:
            w.heartbeat()
        except Exception:
            pass
    bus.stop()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
