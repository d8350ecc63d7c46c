"""Replies other threads leave for the bus thread to send (in batches) instead of sending them themselves.

A handler thread whose pool has other jobs running or waiting (100 requests in flight in pool mode), or any
thread while the bus thread is awake, puts its reply into the wire's ``outbox`` (``SharedSocket.queue``):
the bus thread sends every queued reply right before it sleeps (:func:`send_outboxes`, from
``PollLoop._hand_off``), each peer's as batch frames on a batch wire. The handler thread then neither takes
the socket's lock nor calls into ZeroMQ (each such call lets go of the GIL: a switch between threads per
reply), and the replies leave in a few ZeroMQ messages. A lone reply (its job the pool's only one, the bus
thread asleep) is sent at once by its thread, as before: no hop through the bus thread on a lone request's
path. The bus thread is woken once per sleep at most (``_woken``, as ``PollLoop._post`` does).

A thread that completes several deferred replies in a row (the store's group writer answering one commit:
``geode.protocol.later.answering``) holds the replies they send (:class:`HeldReplies`, installed as that
block at import) and sends them as the block ends, each wire's with one lock and one ``ZMQ_EVENTS`` ask, a
peer's replies as batch frames (``SharedSocket._let_go``), instead of a lock, two sends and an ask each (every
ZeroMQ call letting go of the GIL). Held for the block's Python only (at most ``HOLD_MAX_PARTS`` replies).
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Protocol

from actors.bus.handler_pool import busy_elsewhere
from actors.bus.shared_socket import HOLD_MAX_FRAME, HOLD_MAX_PARTS, SharedSocket
from geode.protocol import later


class _Held(threading.local):
    """This thread's held replies (``[rid, frame]`` each, with its wire), None when it holds none."""

    replies: list[tuple[SharedSocket, list[bytes]]] | None = None


_HELD = _Held()


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
    is to be sent by the caller now (a lone reply, or not a small ``[rid, frame]`` reply). Inside
    :class:`HeldReplies` the reply is held by this thread instead (sent as its block ends)."""
    held = _HELD.replies
    if held is not None and len(frames) == 2 and len(frames[1]) <= HOLD_MAX_FRAME and not bus._stopping:
        held.append((wire, frames))
        if len(held) >= HOLD_MAX_PARTS:  # (bounded: the first reply waits for at most this many)
            _HELD.replies = []
            _send_held(held)
        return True
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


class HeldReplies:
    """The ``geode.protocol.later.answering`` block over the bus: the replies this thread sends
    (``queue_for_bus``) are held until the block ends, then sent: each wire's into its outbox and sent by this
    thread under one lock (or by the lock's holder as it lets go, as :meth:`SharedSocket.reply`'s queued
    replies), each peer's in order. A nested block holds for the outer one. (A class, not a generator: no
    contextlib frames nor StopIteration on the writer thread's every commit.)"""

    __slots__ = ("outer",)

    def __enter__(self) -> None:
        self.outer = _HELD.replies is None
        if self.outer:
            _HELD.replies = []

    def __exit__(self, *exc: object) -> None:
        if self.outer:
            held, _HELD.replies = _HELD.replies, None
            if held:
                _send_held(held)


def _send_held(held: list[tuple[SharedSocket, list[bytes]]]) -> None:
    wires: dict[SharedSocket, list[list[bytes]]] = {}
    for wire, frames in held:
        wires.setdefault(wire, []).append(frames)
    for wire, replies in wires.items():
        if not wire.closed:  # (a reply after the bus closed it: nobody to send it, as _send_raw's)
            wire.outbox.extend(replies)
            wire._let_go()


later.set_answering(HeldReplies)
