"""One HTTP/1.1 connection of :mod:`geode.providers.http11_transport`: a request written, a response's head
parsed and its body streamed, with bytes operations on the socket (no ``h11`` event machine, no
``httpcore`` layers: issue 34, about a third of the loop's CPU per model request went there).

A connection carries one request at a time. The request line and headers go out in one ``sendall`` with
the body's small chunks joined to them (under 64 KiB), a large chunk written as it is (chunked transfer
encoding only when the request says so). The response
head is read up to its blank line (informational ``1xx`` heads skipped); the body is framed by
``Transfer-Encoding: chunked``, else ``Content-Length``, else the connection's end, and yielded as it
arrives. Failures are ``httpx2``'s exceptions, as ``httpcore`` maps them: a timeout on a read
``ReadTimeout``, on a write ``WriteTimeout``, a socket error ``ReadError`` / ``WriteError``, a malformed or
cut-short answer ``RemoteProtocolError``.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx2

_MAX_HEAD = 100 * 1024  # h11's default limit on a response head
_RECV = 65536
_JOIN = 65536  # request pieces joined into one write up to this size (a TLS record is 16 KiB)
_NO_BODY_STATUS = (204, 304)


class Connection:
    """A socket to one origin and what was read from it but not yet used."""

    __slots__ = ("answered", "buf", "complete", "idle_at", "reused", "sock")

    def __init__(self, sock: Any) -> None:
        self.sock = sock
        self.buf = b""
        self.idle_at = 0.0  # when it went back to the pool
        self.reused = False  # it served a request before this one
        self.answered = False  # a byte of this request's response was read
        self.complete = False  # this request's response body was read to its end

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, head: bytes, body: Any, chunked: bool, timeout: float | None) -> None:
        """Write the request: ``head``, then the body's chunks; pieces under ``_JOIN`` bytes are joined to
        what is pending and written with it (one ``sendall`` for the head and a small body), a larger one
        is written as it is (never copied)."""
        sock = self.sock
        sock.settimeout(timeout)
        pending = head
        try:
            for chunk in body:
                if not chunk:
                    continue
                if chunked:
                    chunk = b"%x\r\n%b\r\n" % (len(chunk), chunk)
                if len(pending) + len(chunk) <= _JOIN:
                    pending += chunk
                    continue
                if pending:
                    sock.sendall(pending)
                    pending = b""
                if len(chunk) < _JOIN:
                    pending = chunk
                else:
                    sock.sendall(chunk)
            if chunked:
                pending += b"0\r\n\r\n"
            if pending:
                sock.sendall(pending)
        except TimeoutError as err:
            raise httpx2.WriteTimeout(str(err) or "timed out") from err
        except OSError as err:
            raise httpx2.WriteError(str(err)) from err

    def _recv(self) -> bytes:
        try:
            data: bytes = self.sock.recv(_RECV)
        except TimeoutError as err:
            raise httpx2.ReadTimeout(str(err) or "timed out") from err
        except OSError as err:
            raise httpx2.ReadError(str(err)) from err
        if data:
            self.answered = True
        return data

    def read_head(self, timeout: float | None) -> tuple[int, bytes, bytes, list[tuple[bytes, bytes]]]:
        """The response's status, reason, version and headers (raw names and values, in order)."""
        self.sock.settimeout(timeout)
        while True:
            buf = self.buf
            end = buf.find(b"\r\n\r\n")
            while end < 0:
                if len(buf) > _MAX_HEAD:
                    raise httpx2.RemoteProtocolError("the response head is too large")
                data = self._recv()
                if not data:
                    if buf:
                        raise httpx2.RemoteProtocolError("the server closed the connection mid-head")
                    raise httpx2.RemoteProtocolError("Server disconnected without sending a response.")
                buf += data
                end = buf.find(b"\r\n\r\n", max(0, len(buf) - len(data) - 3))
            self.buf = buf[end + 4 :]
            status, reason, version, headers = _parse_head(buf[:end])
            if status >= 200 or status == 101:
                return status, reason, version, headers
            # an informational answer (100 Continue, 103 Early Hints): the real one follows

    def body(self, framing: int, length: int) -> Iterator[bytes]:
        """The body's bytes as they arrive: ``framing`` 0 none, 1 ``Content-Length`` ``length``, 2 chunked,
        3 up to the connection's end."""
        if framing == 1:
            return self._sized(length)
        if framing == 2:
            return self._chunked()
        if framing == 3:
            return self._to_end()
        self.complete = True
        return iter(())

    def _sized(self, left: int) -> Iterator[bytes]:
        buf, self.buf = self.buf, b""
        if len(buf) > left:
            self.buf, buf = buf[left:], buf[:left]
        while True:
            if buf:
                left -= len(buf)
                yield buf
            if left <= 0:
                self.complete = True
                return
            buf = self._recv()
            if not buf:
                raise httpx2.RemoteProtocolError(
                    "peer closed connection without sending complete message body: "
                    f"received fewer bytes than specified ({left} left)"
                )
            if len(buf) > left:
                self.buf, buf = buf[left:], buf[:left]

    def _to_end(self) -> Iterator[bytes]:
        buf, self.buf = self.buf, b""
        while True:
            if buf:
                yield buf
            buf = self._recv()
            if not buf:
                self.complete = True
                return

    def _line(self) -> bytes:
        while True:
            end = self.buf.find(b"\r\n")
            if end >= 0:
                line, self.buf = self.buf[:end], self.buf[end + 2 :]
                return line
            if len(self.buf) > _MAX_HEAD:
                raise httpx2.RemoteProtocolError("a chunk's size line is too long")
            data = self._recv()
            if not data:
                raise httpx2.RemoteProtocolError(
                    "peer closed connection without sending complete message body: incomplete chunked read"
                )
            self.buf += data

    def _chunked(self) -> Iterator[bytes]:
        """The chunks' data as it arrives (one generator: a chunk found whole in what was read is yielded
        as one slice)."""
        buf, self.buf = self.buf, b""
        recv = self._recv
        while True:
            end = buf.find(b"\r\n")
            while end < 0:
                if len(buf) > _MAX_HEAD:
                    raise httpx2.RemoteProtocolError("a chunk's size line is too long")
                buf += _more(recv())
                end = buf.find(b"\r\n")
            line, buf = buf[:end], buf[end + 2 :]
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise httpx2.RemoteProtocolError(f"malformed chunk size {line[:40]!r}") from None
            if size <= 0:
                if size < 0:
                    raise httpx2.RemoteProtocolError(f"malformed chunk size {line[:40]!r}")
                self.buf = buf
                while self._line():  # trailers, up to the blank line
                    pass
                self.complete = True
                return
            while len(buf) < size:
                if buf:
                    size -= len(buf)
                    yield buf
                buf = _more(recv())
            yield buf[:size]
            buf = buf[size:]
            while len(buf) < 2:
                buf += _more(recv())
            if buf[:2] != b"\r\n":
                raise httpx2.RemoteProtocolError("a chunk is longer than its size")
            buf = buf[2:]


def _more(data: bytes) -> bytes:
    if not data:
        raise httpx2.RemoteProtocolError(
            "peer closed connection without sending complete message body: incomplete chunked read"
        )
    return data


def _parse_head(head: bytes) -> tuple[int, bytes, bytes, list[tuple[bytes, bytes]]]:
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    version = parts[0]
    if len(parts) < 2 or not version.startswith(b"HTTP/1.") or len(parts[1]) != 3 or not parts[1].isdigit():
        raise httpx2.RemoteProtocolError(f"malformed status line {lines[0][:80]!r}")
    headers = []
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip() or line[:1] in (b" ", b"\t"):
            raise httpx2.RemoteProtocolError(f"malformed header line {line[:80]!r}")
        headers.append((name, value.strip(b" \t")))
    return int(parts[1]), parts[2] if len(parts) > 2 else b"", version, headers


def framing_of(method: bytes, status: int, headers: list[tuple[bytes, bytes]]) -> tuple[int, int, bool]:
    """How the body is framed (see :meth:`Connection.body`), its length, and whether the connection may
    carry another request after it (keep-alive: no ``Connection: close``, framed by length or chunks)."""
    length = -1
    chunked = False
    close = False
    for name, value in headers:
        low = name.lower()
        if low == b"content-length":
            try:
                n = int(value)
            except ValueError:
                raise httpx2.RemoteProtocolError(f"malformed Content-Length {value[:40]!r}") from None
            if n < 0 or (length >= 0 and n != length):
                raise httpx2.RemoteProtocolError(f"malformed Content-Length {value[:40]!r}")
            length = n
        elif low == b"transfer-encoding":
            chunked = value.lower().rsplit(b",", 1)[-1].strip() == b"chunked"
            if not chunked:
                raise httpx2.RemoteProtocolError(f"unsupported Transfer-Encoding {value[:40]!r}")
        elif low == b"connection":
            close = close or b"close" in value.lower()
    if method == b"HEAD" or status in _NO_BODY_STATUS or status < 200:
        return 0, 0, not close
    if chunked:
        return 2, 0, not close
    if length >= 0:
        return (1 if length else 0), length, not close
    return 3, 0, False


def head_bytes(
    method: bytes, target: bytes, headers: list[tuple[bytes, bytes]], host: bytes
) -> tuple[bytes, bool, bool]:
    """The request line and headers as written (a ``Host`` header first when the request has none), whether
    the body is sent chunked (a ``Transfer-Encoding`` header) and whether the request asks to close the
    connection (``Connection: close``); a name or value holding a line break is refused. (Joined and
    checked by bytes operations, no loop of ours over the headers.)"""
    block = b"\r\n" + b"\r\n".join(map(b": ".join, headers)) if headers else b""
    breaks = len(headers)
    if block.count(b"\r") != breaks or block.count(b"\n") != breaks:
        raise httpx2.LocalProtocolError("a header holds a line break")
    low = block.lower()
    chunked = b"\ntransfer-encoding: " in low
    at = low.find(b"\nconnection: ")
    end = low.find(b"\r", at + 1)  # the end of that header's line (none: it is the last)
    closing = at >= 0 and b"close" in low[at : end if end > 0 else None]
    if b"\nhost: " not in low:
        block = b"\r\nHost: " + host + block
    return b"%b %b HTTP/1.1%b\r\n\r\n" % (method, target, block), chunked, closing


def connect(host: str, port: int, timeout: float | None, options: list[Any], tls: Any, sni: str) -> Any:
    """A connected socket (``TCP_NODELAY`` and ``options`` set; wrapped in ``tls`` for ``sni`` when given);
    ``ConnectTimeout`` / ``ConnectError`` as ``httpcore`` raises them."""
    try:
        sock = socket.create_connection((host, port), timeout)
    except TimeoutError as err:
        raise httpx2.ConnectTimeout(str(err) or "timed out") from err
    except OSError as err:
        raise httpx2.ConnectError(str(err)) from err
    try:
        for option in options:
            sock.setsockopt(*option)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls is not None:
            sock.settimeout(timeout)
            sock = tls.wrap_socket(sock, server_hostname=sni)
    except TimeoutError as err:
        sock.close()
        raise httpx2.ConnectTimeout(str(err) or "timed out") from err
    except OSError as err:  # ssl.SSLError included
        sock.close()
        raise httpx2.ConnectError(str(err)) from err
    return sock


def now() -> float:
    return time.monotonic()
