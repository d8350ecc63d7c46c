"""A send from a socket the bus may refuse: never blocks on a DEALER the refusal left without a pipe."""

from __future__ import annotations

import zmq


def send_unless_refused(sock: zmq.Socket, frame: bytes) -> None:
    """Send without blocking: a DEALER whose handshake was refused before the send has no pipe left, and
    a blocking send waits forever (a clean-clone CI run hung here 120 s); nothing sent, nothing answered."""
    try:
        sock.send(frame, zmq.NOBLOCK)
    except zmq.Again:
        pass
