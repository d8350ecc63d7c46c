"""A peer process for the bus tests: serves endpoint ``argv[2]`` until stdin closes or it is killed."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from actors.bus import Bus
from geode.home import GeodeHome
from tests.actors.bus_fixtures import FixtureService


def main() -> None:
    home, name, inc = GeodeHome(Path(sys.argv[1])), sys.argv[2], int(sys.argv[3])
    bus = Bus(name, inc, home).start()
    bus.serve(name, FixtureService(name, inc))
    print("ready", flush=True)
    sys.stdin.read()  # EOF when the test goes away: no orphans
    bus.stop()
    os._exit(0)


if __name__ == "__main__":
    main()
