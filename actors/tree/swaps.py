"""Drain-and-swap of the loop workers forked before the zygote imported the provider SDKs.

`geode serve` is ready before the SDK import (1-2 s of a quiet start): the zygote forks the loop workers right
after its core imports (``early``: ready at once, offering lanes no capacity until swapped:
``geode.loop.retirement``), and imports the SDKs once the tree's first burst of spawns is sent (``warm``).
When it has, each early worker in turn is asked to retire (``lifecycle.CHILD_RETIRE``, published until it
exits: the PUB is lossy); it takes no new turn, finishes those it runs and exits 0
(``geode.loop.retirement``). That exit is not a crash (no backoff, not counted, ``ChildRun.retired``): its
replacement is forked at once and shares the zygote's SDK pages. One swap at a time, so the rest of the pool
keeps serving.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from actors.tree.child_handle import ChildRun
from actors.tree.zygote_client import Zygote, ZygoteProc
from geode.protocol import lifecycle

log = logging.getLogger("actors.tree.supervisor")
RETIRE_REPEAT_S = 1.0  # the retire request again while the worker has not exited (a lost PUB, a busy worker)


class SdkSwaps:
    """The swap half of a Supervisor; the state is set up by ``Supervisor.__init__``."""

    children: dict[str, ChildRun]
    _order: list[str]
    zygote: Zygote | None
    state: str
    _publish: Any

    if TYPE_CHECKING:  # defined by actors.tree.supervisor.Supervisor

        def _emit(self, topic: str, c: ChildRun, **extra: Any) -> None: ...

    def _swap_early(self, now: float) -> None:
        """After each step: the SDK import once the first spawns are out, then the next swap when due."""
        z = self.zygote
        if z is None or self.state != "running":
            return
        z.warm()
        for c in self.children.values():
            if c.swap == "replacing" and c.state in ("running", "fatal", "stopped"):
                if c.state == "running":
                    log.info("%s#%d: swapped in, with the SDKs", c.name, c.incarnation)
                c.swap = None
        if not z.sdks_ready or self._publish is None:
            return
        busy = [c for c in self.children.values() if c.swap is not None]
        if not busy:
            early = (self.children[n] for n in self._order)
            nxt = next((c for c in early if c.state == "running" and _early(c)), None)
            if nxt is None:
                return
            log.info(
                "%s#%d was forked before the SDKs: asking it to retire once idle", nxt.name, nxt.incarnation
            )
            nxt.swap, nxt.retire_told_at = "retiring", 0.0
            busy = [nxt]
        for c in busy:
            if c.swap == "retiring" and c.proc is not None and now - c.retire_told_at >= RETIRE_REPEAT_S:
                c.retire_told_at = now
                self._emit(lifecycle.CHILD_RETIRE, c)


def _early(c: ChildRun) -> bool:
    return isinstance(c.proc, ZygoteProc) and c.proc.early and c.proc.returncode is None
