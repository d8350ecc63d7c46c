"""Child processes for tests: a Popen that closes its pipes once it has been reaped.

With ``filterwarnings = error`` a pipe left for the garbage collector is a ResourceWarning that fails some
later, unrelated test; every test that spawns a child with pipes uses :class:`Child` (or ``with``).
"""

from __future__ import annotations

import contextlib
import subprocess
from typing import Any


class Child(subprocess.Popen[Any]):
    """``subprocess.Popen`` whose ``wait`` (also reached through ``communicate``) closes the pipes once the
    process has exited, so kill/terminate + wait is the whole clean-up."""

    def wait(self, timeout: float | None = None) -> int:
        code = super().wait(timeout)
        self.close_pipes()
        return code

    def close_pipes(self) -> None:
        for pipe in (self.stdin, self.stdout, self.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):  # a stdin with unflushed data and a dead reader
                    pipe.close()
