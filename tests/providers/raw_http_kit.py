"""A loopback server for the HTTP/1.1 transport's tests: each accepted connection is served by a script (a
function of the connection's socket and its index) on a thread of its own; requests are read as bytes."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any

Script = Callable[[socket.socket, int], None]


class RawServer:
    """Accepts connections on 127.0.0.1 and runs ``script(sock, n)`` for the n-th (from 0)."""

    def __init__(self, script: Script, tls: Any = None) -> None:
        self.script = script
        self.tls = tls  # an ssl.SSLContext (server side) the connections are wrapped in
        self.requests: list[bytes] = []  # each request read by read_request, in order
        self.accepted = 0
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self._threads: list[threading.Thread] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            n, self.accepted = self.accepted, self.accepted + 1
            t = threading.Thread(target=self._serve, args=(conn, n), daemon=True)
            self._threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket, n: int) -> None:
        try:
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
            self.script(conn, n)
        except OSError:
            pass
        finally:
            conn.close()

    def read_request(self, conn: socket.socket) -> bytes | None:
        """One request (head and ``Content-Length`` body) or None at the connection's end."""
        data = b""
        while b"\r\n\r\n" not in data:
            part = conn.recv(65536)
            if not part:
                return None
            data += part
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(body) < length:
            body += conn.recv(65536)
        self.requests.append(head + b"\r\n\r\n" + body)
        return head

    def close(self) -> None:
        self._sock.close()
        for t in self._threads:
            t.join(5)

    def __enter__(self) -> RawServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def answer(body: bytes, *, status: bytes = b"200 OK", headers: bytes = b"", chunked: bool = False) -> bytes:
    """A response's bytes: ``Content-Length`` framed, or chunked in 7-byte chunks."""
    if not chunked:
        return b"HTTP/1.1 %b\r\nContent-Length: %d\r\n%b\r\n%b" % (status, len(body), headers, body)
    parts = [b"%x\r\n%b\r\n" % (len(body[i : i + 7]), body[i : i + 7]) for i in range(0, len(body), 7)]
    head = b"HTTP/1.1 %b\r\nTransfer-Encoding: chunked\r\n%b\r\n" % (status, headers)
    return head + b"".join(parts) + b"0\r\n\r\n"
