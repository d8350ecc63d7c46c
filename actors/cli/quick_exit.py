"""The `geode` console script's end for the short client commands (`ask`, `status`, `--version`,
`--help`): the command's exit code without the interpreter's teardown.

Freeing every module at exit (pydantic's models, zmq, the protocol) cost `geode ask` ~25 ms after its
answer was printed, a third of the last model reply → exit budget. The process ends the same way a normal
exit does, minus that: atexit handlers run (logging's flush among them), stdout and stderr are flushed, and
a live non-daemon thread (none on these paths today) makes it fall back to the normal exit.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from collections.abc import Callable
from typing import NoReturn

QUICK_COMMANDS = frozenset({"ask", "status", "--version", "--help"})


def exit_code(exc: SystemExit) -> int:
    """The status a normal exit would give for ``exc`` (a message is printed to stderr, status 1)."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def run_then_exit(command: Callable[[], None]) -> NoReturn:
    """Run ``command`` and end the process with its status, skipping the interpreter's teardown."""
    try:
        command()
        code = 0
    except SystemExit as exc:
        code = exit_code(exc)
    if any(not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        raise SystemExit(code)  # someone's thread still works: the normal exit joins it
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):  # a closed pipe, or None after one
            pass
    os._exit(code)
