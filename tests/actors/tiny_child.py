"""A tiny supervised child for the supervisor tests.
Mode argv[1]: serve | crash | hang | never_ready | exit0 | fail_start (exits 1 before it reports ready).

``serve``: ready, then SIGTERM → exit 0, SIGUSR1 → exit 0 (normal), SIGUSR2 → exit 1 (error).
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from actors.tree.child_guard import arm_parent_death, report_ready


def main() -> None:
    mode = sys.argv[1]
    arm_parent_death(poll_s=0.2)
    done = threading.Event()
    code = [0]

    def exit_with(c: int) -> None:
        code[0] = c
        done.set()

    signal.signal(signal.SIGTERM, lambda *_: exit_with(0))
    signal.signal(signal.SIGUSR1, lambda *_: exit_with(0))
    signal.signal(signal.SIGUSR2, lambda *_: exit_with(1))
    if mode == "fail_start":
        os._exit(1)
    if mode == "crash":
        report_ready()
        os._exit(1)
    if mode == "exit0":
        report_ready()
        os._exit(0)
    if mode == "hang":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if mode != "never_ready":
        report_ready()
    while not done.wait(0.5):
        pass
    os._exit(code[0])


if __name__ == "__main__":
    main()
