"""Replies other threads leave for the bus thread to send (in batches) instead of sending them themselves.

A handler thread whose pool has other jobs running or waiting (100 requests in flight in pool mode), or any
thread while the bus thread is awake, puts its reply into the wire's ``outbox`` (``SharedSocket.queue``):
the bus thread sends every queued reply right before it sleeps (:func:`send_outboxes`, from
``PollLoop._hand_off``), each peer's as batch frames on a batch wire. The handler thread then neither takes
the socket's lock nor calls into ZeroMQ (each such call lets go of the GIL: a switch between threads per
reply), and the replies leave in a few ZeroMQ messages. A lone reply (its job the pool's only one, the bus
thread asleep) is sent at once by its thread, as before: no hop through the bus thread on a lone request's
path. The bus thread is woken once per sleep at most (``_woken``, as ``PollLoop._post`` does).
"""

from __future__ import annotations

from collections import deque
from typing import Protocol

from actors.bus.handler_pool import busy_elsewhere
from actors.bus.shared_socket import SharedSocket


class BusThread(Protocol):
    """What a queued reply needs of the bus (``actors.bus.poll_loop.PollLoop``)."""

    _idle: bool  # asleep in poll (or about to be): it must be woken to send what is queued
    _stopping: bool  # its loop ends: nothing queued from now on (sent by its thread, or dropped at close)
    _woken: bool  # an eventfd write is on its way since it last went idle
    _drains: deque[SharedSocket]

    def _wake(self) -> None: ...


def queue_for_bus(bus: BusThread, wire: SharedSocket, frames: list[bytes]) -> bool:
    """From a thread other than the bus thread: queue the reply ``frames`` for the bus thread when it is awake
    or when this thread's handler pool has other jobs running or waiting (waking it if asleep); False when it
    is to be sent by the caller now (a lone reply, or not a small ``[rid, frame]`` reply)."""
    if (bus._idle and not busy_elsewhere()) or bus._stopping:
        return False
    if not wire.queue(frames):
        return False
    bus._drains.append(wire)
    if bus._idle and not bus._woken:  # (checked after the append: a bus going idle meanwhile sees the wire)
        bus._woken = True
        bus._wake()
    return True


def send_outboxes(drains: deque[SharedSocket]) -> None:
    """The bus thread, before it sleeps: send the replies other threads queued for it on each wire of
    ``drains``. A wire whose lock another thread holds is left to that holder, which sends the outbox as it
    lets go (the replies were queued before this try, so before its release)."""
    while drains:
        wire = drains.popleft()
        if wire.outbox:
            wire._let_go()
