"""What a supervised child's exit leads to, by the OTP rules: a restart at once (it had been ready long
enough) or after a backoff (a failed start), ``fatal`` past its own ``intensity`` or ``start_retries``, a
tree-wide restart storm (``tree_intensity``: stop the tree), ``rest_for_one`` restarts of its younger
siblings; and a worker pool that never waits in backoff as a whole."""

from __future__ import annotations

import logging
import selectors
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from actors.tree.child_handle import ChildRun, exit_reason
from actors.tree.spec import TreeConfig
from geode.metrics import record as metrics
from geode.protocol import lifecycle

log = logging.getLogger("actors.tree.supervisor")

DiedCallback = Callable[[str, int, str], None]
EXIT_ESCALATED = 1


class RestartRules:
    """The restart half of a Supervisor; the state is set up by ``Supervisor.__init__``."""

    config: TreeConfig
    children: dict[str, ChildRun]
    _order: list[str]
    _died: list[DiedCallback]
    _restarts: deque[float]
    _sel: selectors.BaseSelector
    state: str
    exit_code: int | None

    if TYPE_CHECKING:  # defined by actors.tree.supervisor.Supervisor

        def _emit(self, topic: str, c: ChildRun, **extra: Any) -> None: ...

    def _keep_pools_alive(self, now: float) -> None:
        """A worker pool never waits in backoff as a whole: when no member is up or starting, the member
        due first starts now (the others keep their backoff, so the pool is staggered)."""
        pools: dict[str, list[ChildRun]] = {}
        for c in self.children.values():
            if c.spec.pool is not None:
                pools.setdefault(c.spec.pool, []).append(c)
        for members in pools.values():
            if any(m.proc is not None for m in members):
                continue
            waiting = [m for m in members if m.state == "backoff" and m.restart_at and not m.after]
            if waiting:
                first = min(waiting, key=lambda m: m.restart_at or 0.0)
                if first.restart_at is not None and first.restart_at > now:
                    log.info("%s: no %s worker is up: starting it now", first.name, first.spec.pool)
                    first.restart_at = now

    def _schedule(self, c: ChildRun, delay: float, after: str | None = None) -> None:
        c.state = "backoff"
        c.restart_at = time.monotonic() + delay
        c.after = after
        metrics.child_restarted(c.name)

    def _on_exit(self, c: ChildRun, rc: int, now: float) -> None:
        metrics.child_exited(c.pid)  # its live gauges leave the page; its counters stay
        if c.ready_fd is not None:
            self._sel.unregister(c.ready_fd)
            c.close_pipe()
        reason, was_ready = exit_reason(rc), c.ready_at
        c.proc, c.kill_at, then = None, None, c.then
        c.then = None
        swapped = c.retired(rc, asked=then is not None)  # a drained early loop worker, for its replacement
        intended = self.state != "running" or then is not None or swapped
        log.log(
            logging.INFO if intended else logging.WARNING, "%s#%d exited: %s", c.name, c.incarnation, reason
        )
        self._emit(lifecycle.CHILD_EXITED, c, reason=reason)
        for cb in self._died if self.state == "running" else ():
            try:
                cb(c.name, c.incarnation, reason)
            except Exception:
                log.exception("child-died callback failed")
        if self.state != "running" or then == "stop":
            c.state = "stopped"
            return
        if swapped:  # its replacement (a fork with the SDKs) starts now: no backoff, no restart counted
            c.state, c.restart_at, c.after = "backoff", now, None
            return
        if then == "restart":  # asked for (restart command, rest_for_one): not counted as a failure
            self._schedule(c, 0.0, c.after)
            return
        if not c.spec.restarts_after(rc):
            c.state = "stopped"
            return
        started = was_ready is not None and now - was_ready >= self.config.stable_s
        n = c.restarted_within(now, self.config.period_s)
        if n > self.config.intensity:
            self._fatal(c, f"{n} restarts within {self.config.period_s:g} s")
            return
        c.failures = 0 if started else c.failures + 1
        if self.config.start_retries and c.failures > self.config.start_retries:
            self._fatal(c, f"{c.failures} failed starts in a row ({reason})")
            return
        self._restarts.append(now)
        while self._restarts and self._restarts[0] < now - self.config.tree_period_s:
            self._restarts.popleft()
        if len(self._restarts) > self.config.tree_intensity:
            log.error(
                "restart storm: %d restarts of the tree's children within %gs: stopping the tree",
                len(self._restarts),
                self.config.tree_period_s,
            )
            c.state, c.why = "fatal", "restart storm"
            self.state = "stopping"
            self.exit_code = EXIT_ESCALATED
            return
        self._schedule(c, 0.0 if started else self.config.backoff(c.failures))
        if c.failures and c.restart_at is not None:
            log.warning("%s: failed start #%d: next try in %.2fs", c.name, c.failures, c.restart_at - now)
        if self.config.strategy == "rest_for_one":
            self._restart_rest(c, now)

    def _fatal(self, c: ChildRun, why: str) -> None:
        c.state, c.why, c.restart_at = "fatal", why, None
        log.error(
            "%s is fatal: %s; the rest of the tree keeps serving (`geode restart %s`)", c.name, why, c.name
        )
        if all(o.state in ("fatal", "stopped") for o in self.children.values()):
            log.error("every child is fatal or stopped: stopping the tree")
            self.state = "stopping"
            self.exit_code = EXIT_ESCALATED

    def _restart_rest(self, failed: ChildRun, now: float) -> None:
        prev = failed.name
        for name in self._order[self._order.index(failed.name) + 1 :]:
            sib = self.children[name]
            keep = sib.spec.restart != "temporary"
            if sib.proc is not None:
                sib.then = "restart" if keep else "stop"
                sib.after = prev if keep else None
                sib.terminate(now)
            elif sib.state == "backoff":
                sib.after = prev
            else:
                continue
            if keep:
                prev = name
