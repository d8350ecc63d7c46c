"""pyzmq's socket-option lookup without its Enum call: what ``Socket.get`` / ``Socket.set`` do first.

pyzmq's Cython backend (27.x) starts every ``Socket.get(option)`` and ``Socket.set(option, value)`` with
``SocketOption(option)``, an Enum call (``EnumType.__call__`` then ``Enum.__new__``: two Python frames,
~0.5 µs) only to read the option's type. The bus asks ``ZMQ_EVENTS`` after every frame it reads or sends
(``actors/bus/shared_socket.py``), so that lookup ran 3-4 times a round trip. :func:`install` puts a table
of the same members in its place, looked up in C (``dict.__getitem__``); an option the table lacks still
goes through ``SocketOption`` (its ``ValueError`` for an unknown option included), so every answer is the
one pyzmq gave. It replaces only that module global, and only in the pyzmq it was checked against (27.x, the
Cython backend, whose ``_zmq.py`` only ever calls ``SocketOption(option)``: in ``Socket.get`` and ``set``);
any other pyzmq (another major version, another backend) is left as it is (tests/actors/
test_bus_socket_options.py then fails: check the new backend's uses of ``SocketOption`` and widen
``CHECKED_MAJOR``).
"""

from __future__ import annotations

from typing import Any

import zmq
from zmq.constants import SocketOption

CHECKED_MAJOR = (27,)  # pyzmq major versions whose Cython backend uses SocketOption only as a call


class _OptionTable(dict[int, SocketOption]):
    """``SocketOption(value)`` for the values it holds (every member's), the Enum call for any other."""

    __slots__ = ()

    def __missing__(self, value: Any) -> SocketOption:
        return SocketOption(value)


def _backend() -> Any:
    try:
        from zmq.backend.cython import _zmq
    except ImportError:  # another backend (cffi): nothing to replace
        return None
    return _zmq


def install() -> bool:
    """Replace the backend's ``SocketOption`` lookup with the table's (once per process; inherited by forked
    children). False when this pyzmq is not the one expected (left as it is)."""
    if zmq.pyzmq_version_info()[0] not in CHECKED_MAJOR:
        return False
    backend = _backend()
    if backend is None or zmq.backend.Socket is not getattr(backend, "Socket", None):
        return False
    current = getattr(backend, "SocketOption", None)
    if current is not SocketOption:
        return getattr(current, "__self__", None).__class__ is _OptionTable
    backend.SocketOption = _OptionTable({m.value: m for m in SocketOption.__members__.values()}).__getitem__
    return True


INSTALLED = install()
