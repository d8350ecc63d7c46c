"""A free base port on loopback for `[bus] listen` (lanes = port, store = port+1, executor = port+2)."""

from __future__ import annotations

import socket


def free_base_port() -> int:
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port > 65000:
            continue
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port + 1))
                b.bind(("127.0.0.1", port + 2))
            return port
        except OSError:
            continue
    raise AssertionError("no three consecutive free ports on 127.0.0.1")
