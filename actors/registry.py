"""Which code each child process hosts: child kind → ``"module:function"`` builder (owners edit one line).

A builder is ``build(bus: Bus, ctx: ChildContext) -> object | None``: it serves its endpoints on ``bus``
(``bus.serve(...)``, ``bus.connect_peer(...)``) and returns something with ``stop()`` (or None). It runs in
the child process (or, with ``--single-process``, in the shared process on an inproc bus). When the module
is absent the child hosts :mod:`actors.placeholder`, which answers ``runtime.ping`` and ``runtime.status``.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from geode.home import GeodeHome

if TYPE_CHECKING:
    from actors.bus import Bus

log = logging.getLogger(__name__)

BUILDERS: dict[str, str] = {
    "store": "actors.registry_adapters:build_store",  # adapts actors.store.start_store
    "lanes": "actors.lanes:build",
    "executor": "actors.executor:build",
    "loop": "actors.loop_worker:build",  # hosted by loop-1 .. loop-N
    "control": "actors.control:build",
    "messengers": "actors.messengers:build",
}
PLACEHOLDER = "actors.placeholder:build"


@dataclass(frozen=True)
class ChildContext:
    """What a builder knows about the child it builds."""

    name: str  # "store", "loop-2", ...
    incarnation: int
    home: GeodeHome
    config: dict[str, Any] = field(default_factory=dict)
    single_process: bool = False

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
    """The builder for child ``name`` and its reference; the placeholder when the owner's module is absent."""
    ref = BUILDERS.get(kind_of(name), PLACEHOLDER)
    try:
        return ref, _load(ref)
    except ModuleNotFoundError as exc:
        if exc.name != ref.partition(":")[0]:
            raise  # the owner's module exists but one of its imports is missing: a real error
        log.info("%s: %s not present yet, hosting the placeholder", name, ref)
    except AttributeError:
        log.warning("%s: %s has no builder function, hosting the placeholder", name, ref)
    return PLACEHOLDER, _load(PLACEHOLDER)


def build_child(bus: Bus, ctx: ChildContext) -> Any:
    ref, build = builder_for(ctx.name)
    log.info("%s#%d hosts %s", ctx.name, ctx.incarnation, ref)
    return build(bus, ctx)
