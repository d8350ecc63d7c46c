"""REPL mode: the whole tree (single-process mode, inproc buses) and the terminal in one process.

The same session composition as the daemon: control composes REPL-mode sessions, lanes, executor and the
loop workers run as actors of this process. Refuses when a daemon already serves this ``GEODE_HOME``, and
refuses a bad ``config.toml`` exactly as ``geode serve`` does (the same check, lines and exit code 78).
"""

from __future__ import annotations

import threading
import time

import typer

from geode.home import GeodeHome
from geode.protocol.errors import GeodeError

START_TIMEOUT_S = 30.0
PROG = "geode --repl"  # the prefix of its start-up lines (``geode serve`` prints the same after its own)


def run_in_process_tree(  # type: ignore[no-untyped-def]
    home: GeodeHome, fn, *, timeout_s: float = START_TIMEOUT_S, holder: str = PROG
):
    """Start the single-process tree under the instance lock (naming ``holder``, the command it runs in, for
    `geode serve` and `geode status` to say), run ``fn()``, stop the tree.

    A config ``geode serve`` would refuse is refused here with the same lines, exiting ``EXIT_CONFIG``.
    """
    from actors.cli.daemon_start import control_answers
    from actors.tree import process_logging
    from actors.tree.child_handle import IncarnationStore
    from actors.tree.children import child_names
    from actors.tree.config_sections import EXIT_CONFIG, TreeSettings, start_settings
    from actors.tree.instance_lock import InstanceLock
    from actors.tree.single_process import SingleProcessTree
    from geode.config_source import ConfigSource

    home.ensure()
    lock = InstanceLock(home.lock_file)
    if not lock.acquire(holder):
        raise GeodeError(
            f"a daemon already serves {home.root} (pid {lock.holder_pid()}); run `geode` without --repl"
        )
    try:
        settings, _report = start_settings(home, prog=PROG)
        if settings is None:
            raise typer.Exit(EXIT_CONFIG)
        process_logging.configure(home, "repl", settings=settings)  # [log] level, as serve: logs/repl.log
        source = ConfigSource(home, TreeSettings.from_raw)  # the file just checked (no tree's copy here)
        tree = SingleProcessTree(
            child_names(settings), home, source, IncarnationStore(home.root / "incarnations.json")
        )
        th = threading.Thread(
            target=tree.run, kwargs={"install_signals": False}, name="repl-tree", daemon=True
        )
        th.start()
        deadline = time.monotonic() + timeout_s
        while not control_answers(home, 0.5):
            if time.monotonic() > deadline or not th.is_alive():
                raise GeodeError("the in-process tree did not open its control socket")
            time.sleep(0.05)
        try:
            return fn()
        finally:
            tree.request_stop()
            th.join(15)
    finally:
        lock.release()
