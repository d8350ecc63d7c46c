"""Builders adapting owners' start functions to the registry signature ``build(bus, ctx)``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from actors.bus import Bus
from actors.registry import ChildContext


@dataclass
class _StopBusFirst:
    """Stop serving (the bus) before closing what the requests use."""

    bus: Bus
    inner: Any

    def stop(self) -> None:
        self.bus.stop()
        self.inner.stop()


def build_store(bus: Bus, ctx: ChildContext) -> Any:
    from actors.store import start_store

    child = start_store(ctx.home, name=ctx.name, incarnation=ctx.incarnation, bus=bus)
    return _StopBusFirst(bus, child)
