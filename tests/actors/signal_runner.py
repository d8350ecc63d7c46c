"""A Supervisor with real signal handling over tiny children, for the signal tests; prints pids when up."""

from __future__ import annotations

import sys
import tempfile
import threading
from pathlib import Path

from actors.tree.supervisor import Supervisor
from tests.actors.supervision_kit import FAST, tiny


def main() -> None:
    sup = Supervisor(
        [tiny("ok"), tiny("hang", mode="hang", shutdown_ms=int(sys.argv[1]))],
        FAST,
        logs_dir=Path(tempfile.mkdtemp()) / "logs",
    )

    def announce() -> None:
        sup.started.wait(10)
        while not all(c.state == "running" for c in sup.snapshot()):
            threading.Event().wait(0.01)
        print(" ".join(str(c.pid) for c in sup.snapshot()), flush=True)
        while sup.state == "running":
            threading.Event().wait(0.005)
        print("stopping", flush=True)

    threading.Thread(target=announce, daemon=True).start()
    sys.exit(sup.run(install_signals=True))


if __name__ == "__main__":
    main()
