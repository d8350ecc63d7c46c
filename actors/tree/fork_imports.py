"""Which modules a forked child imports itself, counted without touching the zygote's objects.

A child's ready line says how many modules it imported after the fork (each is private memory and start time
of every incarnation: ``CORE`` should hold it). Taking ``frozenset(sys.modules)`` at the fork and diffing it
at ready wrote a reference count into every module name the zygote made (~780 strings in a child without an
SDK, ~4,300 in a loop worker), which copied the pages holding them into the child: +1.7 MiB of private memory
in each small child and +5.4 MiB in each loop worker (a fork of the zygote measured before and after). This
finder, first in ``sys.meta_path`` from the fork until the ready line, sees only the imports that reach the
import system (a module not in ``sys.modules`` yet) and records their names; it finds nothing itself.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType


class ImportsAfterFork:
    """A ``sys.meta_path`` finder that records the name of every module looked up, and finds nothing."""

    def __init__(self) -> None:
        self.looked_up: list[str] = []

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        self.looked_up.append(fullname)
        return None  # the next finder imports it

    def imported(self) -> list[str]:
        """The modules looked up since :func:`watch` that were imported (an import that failed is not)."""
        return sorted({name for name in self.looked_up if name in sys.modules})

    def stop(self) -> None:
        """Leave ``sys.meta_path`` (the imports a running child makes later are not counted)."""
        if self in sys.meta_path:
            sys.meta_path.remove(self)


def watch() -> ImportsAfterFork:
    """Record from now on the modules this process imports (call right after the fork)."""
    finder = ImportsAfterFork()
    sys.meta_path.insert(0, finder)
    return finder
