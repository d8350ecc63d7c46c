"""The per-process ZeroMQ message bus: one socket-owning thread, peers by endpoint name, CURVE/ZAP for tcp."""

from actors.bus.socket_thread import Bus

__all__ = ["Bus"]
