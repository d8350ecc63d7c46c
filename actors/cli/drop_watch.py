"""Notice at once that the control socket's peer went away: a libzmq socket monitor on the CLI's DEALER
for ``EVENT_DISCONNECTED`` (on ipc the kernel closes a SIGKILLed control's end at once, so the event comes
within milliseconds, where silence on the heartbeat took seconds)."""

from __future__ import annotations

import os
import struct
import weakref

import zmq

_EVENT = struct.Struct("=hi")  # a monitor message's first frame: event id, value (zmq.utils.monitor's layout;
# that module imports zmq.asyncio and asyncio, ~12 ms of every `geode ask`)


class DropWatch:
    """Counts the disconnections of one socket (read with :meth:`drain`, from the thread using it)."""

    def __init__(self, sock: zmq.Socket, owner: object) -> None:  # type: ignore[type-arg]
        self._sock = sock
        self.mon: zmq.Socket = sock.get_monitor_socket(
            zmq.EVENT_DISCONNECTED, addr=f"inproc://geode-monitor-{os.urandom(16).hex()}"
        )  # type: ignore[type-arg]
        self.drops = 0
        # closed with its owner at the latest (a caller that closed only the watched socket leaks no socket)
        self._close_mon = weakref.finalize(owner, self.mon.close, 0)

    def drain(self) -> int:
        """Read the pending monitor events; returns the number of disconnections seen so far."""
        while True:
            try:
                frames = self.mon.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return self.drops
            if len(frames) != 2 or len(frames[0]) != _EVENT.size:  # not a monitor message: never expected
                continue
            if _EVENT.unpack(frames[0])[0] == zmq.EVENT_DISCONNECTED:
                self.drops += 1

    def close(self) -> None:
        try:
            self._sock.disable_monitor()
        except zmq.ZMQError:
            pass
        self._close_mon()
