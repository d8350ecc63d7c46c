"""Which code each child process hosts: child kind → ``"module:function"`` builder (owners edit one line).

A builder is ``build(bus: Bus, ctx: ChildContext) -> object | None``: it serves its endpoints on ``bus``
(``bus.serve(...)``, ``bus.connect_peer(...)``) and returns something with ``stop()`` (or None). It runs in
the child process (or, with ``--single-process``, in the shared process on an inproc bus).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from geode.home import GeodeHome
from geode.protocol.errors import ConfigError

if TYPE_CHECKING:
    from actors.bus import Bus
    from actors.tree.config_sections import TreeSettings
    from geode.config_source import ConfigSource

log = logging.getLogger(__name__)

BUILDERS: dict[str, str] = {
    "store": "actors.store:build",
    "lanes": "actors.lanes:build",
    "executor": "actors.executor:build",
    "loop": "actors.loop_worker:build",  # hosted by loop-1 .. loop-N
    "control": "actors.control:build",
    "messengers": "actors.messengers:build",
    "scheduler": "actors.scheduler:build",  # geode serve only (actors/tree/children.py)
    "webhooks": "actors.webhooks:build",  # geode serve with [webhooks] listen set (actors/tree/children.py)
}


@dataclass(frozen=True)
class ChildContext:
    """What a builder knows about the child it builds.

    Builders read ``settings`` (the typed, checked sections of the child's one :class:`ConfigSource`,
    built once at the child's start; ``geode reload`` replaces its snapshot) and hand each builder the
    section it needs; ``source.env`` is ``.env`` as read at start or at the last reload.
    """

    name: str  # "store", "loop-2", ...
    incarnation: int
    home: GeodeHome
    config_source: ConfigSource[TreeSettings] | None = field(default=None, repr=False, compare=False)
    single_process: bool = False

    @cached_property
    def source(self) -> ConfigSource[TreeSettings]:
        """The child's config source (given, or the tree's validated copy of this home, read once)."""
        if self.config_source is not None:
            return self.config_source
        from actors.tree.config_sections import TreeSettings
        from geode.config_source import ConfigSource

        return ConfigSource(self.home, TreeSettings.from_raw, tree=True)

    @property
    def settings(self) -> TreeSettings:
        """The current typed snapshot (a bad value at start is a ``ConfigError``; a reload replaces it)."""
        return self.source.snapshot

    @property
    def kind(self) -> str:
        """``loop`` for ``loop-N``; the name otherwise."""
        return kind_of(self.name)


Builder = Callable[["Bus", ChildContext], Any]


def kind_of(name: str) -> str:
    base, _, num = name.rpartition("-")
    return base if base and num.isdigit() else name


def _load(ref: str) -> Builder:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]


def builder_for(name: str) -> tuple[str, Builder]:
    """The builder for child ``name`` and its reference; an unknown kind is a :class:`ConfigError`."""
    ref = BUILDERS.get(kind_of(name))
    if ref is None:
        raise ConfigError(f"no actor process is named {kind_of(name)!r} (known: {', '.join(BUILDERS)})")
    return ref, _load(ref)


def build_child(bus: Bus, ctx: ChildContext) -> Any:
    ref, build = builder_for(ctx.name)
    log.info("%s#%d hosts %s", ctx.name, ctx.incarnation, ref)
    return build(bus, ctx)
