"""The reload rule in every child: on the supervisor's ``config_reload`` event, re-read the child's config
source (the tree's copy `geode reload` wrote after its check), let the hosted object apply the difference
from what this child last applied (``apply_config``), and confirm to the supervisor. A hosted object that
answers None needs a restart: the child asks its supervisor for a clean one and does not confirm (the
supervisor counts its new incarnation, which starts on the new copy)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError

from geode.config_reload import ConfigChange, diff_config
from geode.protocol import lifecycle, runtime
from geode.protocol.errors import GeodeError

if TYPE_CHECKING:
    from actors.bus import Bus
    from actors.tree.config_sections import TreeSettings
    from actors.tree.registry import ChildContext

log = logging.getLogger(__name__)
SUPERVISOR = "supervisor"


class Reloadable(Protocol):
    """A hosted object that applies a reload: what it did (one phrase each), or None to be restarted."""

    def apply_config(self, change: ConfigChange, settings: TreeSettings) -> list[str] | None: ...


class ChildReload:
    """One child's side of the rule: diff against what it last applied (not the shared source's snapshot:
    in ``--single-process`` every child holds the same source), apply, and say what happened."""

    def __init__(self, ctx: ChildContext, hosted: object, restart: Callable[[], None]) -> None:
        self.ctx, self.hosted, self.restart = ctx, hosted, restart
        self._applied = (ctx.source.snapshot, dict(ctx.source.env))
        self._done: set[str] = set()  # stamps applied: asked again, it only confirms again
        self._lock = threading.Lock()

    def apply(self, stamp: str) -> runtime.ConfigApplied | None:
        """Apply reload ``stamp``; None when the child asked for its restart instead."""
        with self._lock:
            applied, error = ([], "") if stamp in self._done else self._apply()
            if applied is None:
                return None
            self._done.add(stamp)
        name, inc = self.ctx.name, self.ctx.incarnation
        return runtime.ConfigApplied(
            name=name, incarnation=inc, stamp=stamp, applied=applied[:64], error=error
        )

    def _apply(self) -> tuple[list[str] | None, str]:
        name, source = self.ctx.name, self.ctx.source
        try:
            new = source.reload()
        except GeodeError as exc:  # the copy is checked before it is written; a race with a manual edit
            log.warning("%s: reload refused, keeping the current config: %s", name, exc)
            return [], exc.message[:2000]
        old, old_env = self._applied
        change = diff_config(old, new, old_env, source.env)
        apply = getattr(self.hosted, "apply_config", None)
        try:
            lines = apply(change, new) if apply is not None and not change.empty else []
        except Exception as exc:  # keep serving on what it had; say so to `geode reload`
            log.exception("%s: applying the reload failed", name)
            return [], f"{type(exc).__name__}: {exc}"[:2000]
        self._applied = (new, dict(source.env))
        if lines is None:
            log.info("%s: restarting to apply the reload (%s)", name, "; ".join(change.lines()))
            self.restart()
            return None, ""
        log.info("%s: config re-read (%s)", name, "; ".join(change.lines()))
        return lines, ""


def arm_reload(bus: Bus, ctx: ChildContext, hosted: object) -> ChildReload:
    """Subscribe this child to ``geode reload`` (the supervisor's ``config_reload`` event)."""
    rule = ChildReload(ctx, hosted, lambda: restart_me(bus, ctx.name))

    def on_event(topic: str, body: Mapping[str, Any]) -> None:
        if topic != lifecycle.CONFIG_RELOAD:
            return
        try:
            event = lifecycle.ConfigReload.model_validate(body)
        except ValidationError as exc:  # never raised into the events thread
            log.warning(
                "%s: a config_reload event with a bad body ignored: %s", ctx.name, exc.errors()[0]["msg"]
            )
            return
        if ctx.name not in event.children:
            return
        confirm = rule.apply(event.stamp)
        if confirm is None:
            return
        try:
            bus.transport.call(SUPERVISOR, runtime.CONFIG_APPLIED, confirm, timeout_s=5.0)
        except GeodeError as exc:  # the CLI asks again for what it did not see confirmed
            log.warning("%s: reload %s applied, confirmation not delivered: %s", ctx.name, confirm.stamp, exc)

    bus.subscribe(SUPERVISOR, on_event)
    return rule


def restart_me(bus: Bus, name: str) -> None:
    """Ask the supervisor for this child's clean restart (graceful stop, then a new incarnation)."""
    try:
        bus.transport.call(SUPERVISOR, runtime.TREE_RESTART, runtime.RestartChild(name=name), timeout_s=5.0)
    except GeodeError as exc:  # the CLI sees no confirmation and names this child
        log.error("%s: could not ask for a restart to apply the reload: %s", name, exc)
