"""The per-process ZeroMQ message bus: one socket-owning thread, peers by endpoint name, CURVE/ZAP for tcp.

``Bus`` loads on first use, so importing the bus's config leaf (``actors.bus.settings``) does not import zmq.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from actors.bus.socket_thread import Bus

__all__ = ["Bus"]


def __getattr__(name: str) -> Any:
    if name != "Bus":
        raise AttributeError(f"module 'actors.bus' has no attribute {name!r}")
    return importlib.import_module("actors.bus.socket_thread").Bus
