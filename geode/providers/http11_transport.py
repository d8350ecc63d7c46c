"""An ``httpx2`` transport of our own for the anthropic SDK's plain HTTP/1.1 requests (issue 34).

The SDK's default transport goes through ``httpcore``'s pool and ``h11``'s event machine: ~800 Python calls
a model request, about a third of the loop worker's CPU per tool round. :class:`Http11Transport` does the
same HTTP/1.1 exchange with :mod:`geode.providers.http11_wire` (the request head written in one
``sendall`` with the body's small chunks, a large one after it, the response head parsed with bytes
operations, the body streamed by its length, its chunks or the connection's end) over a small keep-alive
pool per origin, and keeps what the pool promised:

- an idle connection is reused (newest first) until the pool's keep-alive expiry; one the server closed (or
  wrote to) while it was at rest is dropped before reuse (readable at rest = closed, as ``httpcore`` does),
  and a request on a reused connection that failed before any byte of its response was read (the server
  closed it meanwhile) is sent once more on a new connection; nothing is sent again once an answer began;
- ``Connection: close``, a body read to the connection's end, a body not read to its end, or bytes after
  it: the connection is closed, not pooled; at most ``max_connections`` open, a wait for one beyond that
  is bounded by the request's ``pool`` timeout (``PoolTimeout``);
- timeouts and failures are ``httpx2``'s exceptions, as ``httpcore``'s are mapped (``ConnectTimeout``,
  ``ReadTimeout``, ``WriteTimeout``, ``PoolTimeout``, ``ConnectError``, ``ReadError``, ``WriteError``,
  ``RemoteProtocolError``), so the SDK's error mapping and our retries see the same types;
- TLS with the process's shared context (:func:`geode.providers.sdk_tls.shared_context`) and SNI.

Anything else (another scheme, request extensions other than ``timeout``) goes to the ``fallback``
transport, the SDK's own. Proxies are not this transport's: ``httpx2.Client`` sends a proxied URL to its
proxy mount; this transport replaces only the client's default one (:func:`install`). Decoding
(``gzip``...) stays ``httpx2.Response``'s.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx2

from geode.providers import http11_wire as wire
from geode.providers.http11_wire import Connection

Opener = Callable[[str, int, "float | None"], Any]  # (host, port, connect timeout) -> a connected socket


class Http11Transport(httpx2.BaseTransport):
    """HTTP/1.1 over a keep-alive pool per origin; see the module doc."""

    def __init__(
        self,
        fallback: Any,
        ssl_context: Any,
        *,
        socket_options: list[Any] | None = None,
        max_connections: int | None = 1000,
        max_keepalive: int | None = 100,
        keepalive_expiry: float | None = 5.0,
    ) -> None:
        self.fallback = fallback
        self.ssl_context = ssl_context
        self._options = list(socket_options or ())
        self._max = max_connections
        self._max_idle = max_keepalive
        self._expiry = keepalive_expiry
        self._idle: dict[tuple[bytes, bytes, int], list[Connection]] = {}
        self._open = 0
        self._cond = threading.Condition(threading.Lock())
        self._closed = False
        self.opener: Opener | None = None  # a test's or the zygote's rehearsal's sockets (plain HTTP)
        self.connections_made = 0  # (a count for tests)

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        scheme = url.raw_scheme
        ext = request.extensions
        if scheme not in (b"http", b"https") or (len(ext) > 1 or (ext and "timeout" not in ext)):
            return self.fallback.handle_request(request)  # type: ignore[no-any-return]
        timeouts = ext.get("timeout") or {}
        port = url.port or (443 if scheme == b"https" else 80)
        host = url.raw_host
        origin = (scheme, host, port)
        authority = host if url.port is None else b"%b:%d" % (host, port)
        if b":" in host:
            authority = b"[%b]" % host if url.port is None else b"[%b]:%d" % (host, port)
        method = request.method.encode("ascii")
        headers = request.headers.raw  # (a list of (name, value) bytes, in order)
        head, chunked, closing = wire.head_bytes(method, url.raw_path, headers, authority)
        body = request.stream
        replayable = isinstance(body, httpx2.ByteStream) or getattr(body, "replayable", False)
        conn = self._acquire(origin, timeouts)
        while True:
            try:
                conn.send(head, body, chunked, timeouts.get("write"))
                status, reason, version, rheaders = conn.read_head(timeouts.get("read"))
                framing, length, keep = wire.framing_of(method, status, rheaders)
                break
            except httpx2.TransportError as err:
                conn.close()
                self._forget()
                if not conn.reused or conn.answered or not replayable:
                    raise
                if isinstance(err, httpx2.TimeoutException):
                    raise
                conn = self._acquire(origin, timeouts, fresh=True)  # the server closed it at rest: once more
            except BaseException:
                conn.close()
                self._forget()
                raise
        keep = keep and not closing and version == b"HTTP/1.1"
        stream = _Body(self, origin, conn, framing, length, keep, timeouts.get("read"))
        extensions = {"http_version": version, "reason_phrase": reason}
        return httpx2.Response(status, headers=rheaders, stream=stream, extensions=extensions)

    def _acquire(self, origin: tuple[bytes, bytes, int], timeouts: Any, fresh: bool = False) -> Connection:
        """An idle connection to ``origin`` still open, else a new one (waiting for a free slot up to the
        ``pool`` timeout when ``max_connections`` are open)."""
        with self._cond:
            if self._closed:
                raise RuntimeError("the transport is closed")
            idle = None if fresh else self._idle.get(origin)
            while idle:
                conn = idle.pop()
                if self._expiry is not None and wire.now() - conn.idle_at > self._expiry:
                    self._drop(conn)
                elif _readable(conn.sock):
                    self._drop(conn)  # the server closed it (or wrote to it) at rest
                else:
                    conn.reused, conn.answered, conn.complete = True, False, False
                    return conn
            if self._max is not None and self._open >= self._max:
                self._free_slot(timeouts.get("pool"))
            self._open += 1
        try:
            host = origin[1].decode("ascii")
            timeout = timeouts.get("connect")
            if self.opener is not None:
                sock = self.opener(host, origin[2], timeout)
            else:
                tls = self.ssl_context if origin[0] == b"https" else None
                sock = wire.connect(host, origin[2], timeout, self._options, tls, host)
        except BaseException:
            self._forget()
            raise
        self.connections_made += 1
        return Connection(sock)

    def _free_slot(self, timeout: float | None) -> None:
        """Wait (the lock held) until fewer than ``max_connections`` are open; an idle one is closed first."""
        for conns in self._idle.values():
            if conns:
                self._drop(conns.pop(0))
                return
        deadline = None if timeout is None else wire.now() + timeout
        while self._max is not None and self._open >= self._max:
            left = None if deadline is None else deadline - wire.now()
            if left is not None and left <= 0:
                raise httpx2.PoolTimeout("no connection free in the pool in time")
            self._cond.wait(left)

    def _drop(self, conn: Connection) -> None:
        conn.close()
        self._open -= 1
        self._cond.notify()

    def _forget(self) -> None:
        with self._cond:
            self._open -= 1
            self._cond.notify()

    def release(self, origin: tuple[bytes, bytes, int], conn: Connection, keep: bool) -> None:
        """A response's connection back: pooled when ``keep`` and nothing follows its body, else closed."""
        with self._cond:
            idle = self._idle.setdefault(origin, [])
            room = self._max_idle is None or len(idle) < self._max_idle
            if keep and room and not conn.buf and not self._closed:
                conn.idle_at = wire.now()
                idle.append(conn)
                return
            self._drop(conn)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            for conns in self._idle.values():
                for conn in conns:
                    self._drop(conn)
            self._idle.clear()
        self.fallback.close()


def _readable(sock: Any) -> bool:
    """Whether ``sock`` has something to read (or its end closed) while no request is on it."""
    import select

    try:
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return True


class _Body(httpx2.SyncByteStream):
    """A response's body as it arrives; its connection goes back to the pool when it was read to its end
    and the response closed, else it is closed."""

    def __init__(
        self,
        transport: Http11Transport,
        origin: tuple[bytes, bytes, int],
        conn: Connection,
        framing: int,
        length: int,
        keep: bool,
        timeout: float | None,
    ) -> None:
        self._transport, self._origin = transport, origin
        self._conn: Connection | None = conn
        self._framing, self._length, self._keep = framing, length, keep
        self._timeout = timeout
        if framing == 0:
            conn.complete = True

    def __iter__(self) -> Iterator[bytes]:
        conn = self._conn
        if conn is None:
            return iter(())
        conn.sock.settimeout(self._timeout)
        return conn.body(self._framing, self._length)  # (no generator of ours around each chunk)

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            self._transport.release(self._origin, conn, self._keep and conn.complete)


def install(client: Any, ssl_context: Any) -> bool:
    """Make :class:`Http11Transport` ``client``'s default transport when its own is the SDK's plain
    HTTP/1.1 pool (no HTTP/2, no Unix socket, no local address; proxied URLs keep their mounts); whether
    it did. The pool's limits and socket options are carried over."""
    old = getattr(client, "_transport", None)
    pool = getattr(old, "_pool", None)
    if type(old) is not httpx2.HTTPTransport or type(pool).__name__ != "ConnectionPool":
        return False
    if getattr(pool, "_http2", True) or getattr(pool, "_uds", None) or getattr(pool, "_local_address", None):
        return False
    if getattr(pool, "_retries", 0):
        return False
    client._transport = Http11Transport(
        old,
        ssl_context,
        socket_options=list(getattr(pool, "_socket_options", None) or ()),
        max_connections=getattr(pool, "_max_connections", 1000),
        max_keepalive=getattr(pool, "_max_keepalive_connections", 100),
        keepalive_expiry=getattr(pool, "_keepalive_expiry", 5.0),
    )
    return True
