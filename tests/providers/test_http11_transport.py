"""geode's HTTP/1.1 transport for the anthropic SDK (geode/providers/http11_transport.py): the exchange,
keep-alive and its limits, failures as httpx's exceptions, TLS, and where it is mounted."""

from __future__ import annotations

import gzip
import socket
import ssl
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest

from geode.providers import sdk_tls
from geode.providers.http11_transport import Http11Transport, install
from tests.providers.raw_http_kit import RawServer, answer
from tests.tools.web_fetch_kit import tls_server

_OPEN: list[httpx2.Client] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Any:
    yield
    while _OPEN:
        _OPEN.pop().close()


def _client(**kw: Any) -> tuple[httpx2.Client, Http11Transport]:
    transport = Http11Transport(httpx2.HTTPTransport(), kw.pop("ctx", None), **kw)
    client = httpx2.Client(transport=transport, trust_env=False)
    _OPEN.append(client)
    return client, transport


def _serve(*replies: bytes) -> Any:
    """A script answering a connection's requests with ``replies`` in turn, then closing it."""

    def script(conn: socket.socket, n: int) -> None:
        for reply in replies:
            if server.read_request(conn) is None:
                return
            conn.sendall(reply)

    server = RawServer(script)
    return server


def test_bodies_by_length_chunks_gzip_and_end_on_one_kept_alive_connection() -> None:
    zipped = gzip.compress(b"squeezed " * 50)
    with _serve(
        answer(b"sized"),
        answer(b"in chunks of seven bytes", chunked=True, headers=b"X-Trailer-Test: 1\r\n"),
        answer(zipped, headers=b"Content-Encoding: gzip\r\n"),
        answer(b"", status=b"204 No Content"),
    ) as server:
        client, transport = _client()
        assert client.get(server.base + "/a").text == "sized"
        with client.stream("POST", server.base + "/b", content=b"x" * 100_000) as r:
            assert b"".join(r.iter_raw()) == b"in chunks of seven bytes"
            assert r.http_version == "HTTP/1.1" and r.reason_phrase == "OK"
        assert client.get(server.base + "/c").text == "squeezed " * 50
        assert client.get(server.base + "/d").status_code == 204
        assert transport.connections_made == 1 and server.accepted == 1
        posted = server.requests[1]
        assert posted.startswith(b"POST /b HTTP/1.1\r\n") and posted.endswith(b"x" * 100)
        assert b"\r\nhost: 127.0.0.1:%d\r\n" % server.port in server.requests[0].lower()
        client.close()


class _Counting:
    """A socket whose writes are counted."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.writes = sock, 0

    def sendall(self, data: bytes) -> None:
        self.writes += 1
        self.sock.sendall(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sock, name)


def test_a_small_request_is_one_write_a_large_body_is_not_copied_into_it() -> None:
    with _serve(answer(b"a"), answer(b"b"), answer(b"c")) as server:
        client, transport = _client()
        socks: list[_Counting] = []

        def opener(host: str, port: int, timeout: float | None) -> Any:
            socks.append(_Counting(socket.create_connection((host, port), timeout)))
            return socks[-1]

        transport.opener = opener
        assert client.post(server.base, content=b"small body").text == "a"
        assert socks[0].writes == 1
        assert client.post(server.base, content=b"L" * 200_000).text == "b"
        assert socks[0].writes == 3  # the head, then the large body as it is
        assert client.post(server.base, content=iter([b"x" * 10, b"y" * 10])).text == "c"  # chunked
        assert socks[0].writes == 4 and server.requests[1].endswith(b"\r\n\r\n" + b"L" * 200_000)
        assert server.requests[2].endswith(b"\r\n\r\na\r\nxxxxxxxxxx\r\na\r\nyyyyyyyyyy\r\n0\r\n\r\n")


def test_connection_close_and_a_body_read_to_the_end_are_not_pooled() -> None:
    with _serve(answer(b"one", headers=b"Connection: close\r\n"), answer(b"two")) as server:
        client, transport = _client()
        assert client.get(server.base).text == "one"
        assert client.get(server.base).text == "one"  # a new connection (its first reply again)
        assert transport.connections_made == 2
    end = b"HTTP/1.1 200 OK\r\n\r\nto the end"
    with _serve(end, answer(b"never")) as server:
        client, transport = _client()

        def to_end(conn: socket.socket, n: int) -> None:
            server.read_request(conn)
            conn.sendall(end)

        server.script = to_end
        assert client.get(server.base).text == "to the end"
        assert client.get(server.base).text == "to the end"
        assert transport.connections_made == 2


def test_an_idle_connection_the_server_closed_is_replaced_and_the_request_sent_once() -> None:
    def close_after_one(conn: socket.socket, n: int) -> None:
        server.read_request(conn)
        conn.sendall(answer(b"reply %d" % n))
        if n == 0:
            conn.shutdown(socket.SHUT_RDWR)  # closed at rest (a server's idle timeout)
            return
        server.read_request(conn)

    with RawServer(close_after_one) as server:
        client, transport = _client()
        assert client.get(server.base).text == "reply 0"
        time.sleep(0.1)
        assert client.get(server.base).text == "reply 1"
        assert len(server.requests) == 2 and transport.connections_made == 2


def test_a_reused_connection_closed_before_any_answer_sends_once_more_a_new_one_never() -> None:
    def script(conn: socket.socket, n: int) -> None:
        server.read_request(conn)
        if n == 0:
            conn.sendall(answer(b"first"))
            server.read_request(conn)  # the second request arrives, the server closes without an answer
        elif n == 1:
            conn.sendall(answer(b"resent"))
        # n == 2: a fresh connection closed without an answer: not sent again

    with RawServer(script) as server:
        client, _ = _client()
        assert client.get(server.base).text == "first"
        assert client.post(server.base, content=b"body").text == "resent"
        assert [r.split(b" ", 1)[0] for r in server.requests] == [b"GET", b"POST", b"POST"]
        with pytest.raises(httpx2.RemoteProtocolError):
            client.get(server.base)
        assert len(server.requests) == 4


def test_a_server_dying_mid_body_is_a_protocol_error_and_nothing_is_sent_again() -> None:
    def script(conn: socket.socket, n: int) -> None:
        server.read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part")

    with RawServer(script) as server:
        client, _ = _client()
        with pytest.raises(httpx2.RemoteProtocolError, match=r"incomplete|fewer"):
            client.get(server.base)
        chunked = answer(b"abcdefghijklmnop", chunked=True)[:-12]

        def cut_chunks(conn: socket.socket, n: int) -> None:
            server.read_request(conn)
            conn.sendall(chunked)

        server.script = cut_chunks
        with pytest.raises(httpx2.RemoteProtocolError):
            client.get(server.base)
        assert len(server.requests) == 2


@pytest.mark.parametrize(
    "reply",
    [
        b"HTTP/1.1 2x0 OK\r\n\r\n",
        b"SMTP 200 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
    ],
)
def test_a_malformed_answer_is_a_protocol_error_and_its_connection_closed(reply: bytes) -> None:
    with _serve(reply) as server:
        client, transport = _client()
        with pytest.raises(httpx2.RemoteProtocolError):
            client.get(server.base)
        assert transport._open == 0 and server.accepted == 1  # closed, counted out, not sent again


def test_timeouts_are_httpx_timeouts() -> None:
    def slow(conn: socket.socket, n: int) -> None:
        server.read_request(conn)
        time.sleep(1.0)

    with RawServer(slow) as server:
        client, _ = _client()
        with pytest.raises(httpx2.ReadTimeout):
            client.get(server.base, timeout=httpx2.Timeout(5.0, read=0.2))
        assert len(server.requests) == 1  # a timeout is never sent again


def test_a_full_pool_waits_up_to_the_pool_timeout() -> None:
    with _serve(answer(b"held"), answer(b"next")) as server:
        client, transport = _client(max_connections=1)
        with client.stream("GET", server.base) as held:
            with pytest.raises(httpx2.PoolTimeout):
                client.get(server.base, timeout=httpx2.Timeout(5.0, pool=0.2))
            assert held.read() == b"held"
        assert client.get(server.base).text == "next"  # the connection freed, reused
        assert transport.connections_made == 1


def test_tls_with_sni_verification_and_keep_alive(tmp_path: Path) -> None:
    tls_server(tmp_path, "localhost")[0].close()  # (its self-signed certificate and key: localhost.pem)
    pem = tmp_path / "localhost.pem"
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(pem)
    names: list[str | None] = []
    sctx.sni_callback = lambda sock, name, ctx: names.append(name)  # type: ignore[assignment,misc,return-value]
    replies = (answer(b"secure one"), answer(b"secure two", chunked=True))
    server = _serve(*replies)
    server.tls = sctx
    try:
        client, transport = _client(ctx=ssl.create_default_context(cafile=str(pem)))
        url = f"https://localhost:{server.port}/"
        assert client.get(url).text == "secure one"
        time.sleep(0.1)  # (TLS 1.3 session tickets arrived long ago: the connection at rest is not readable)
        assert client.get(url).text == "secure two"
        assert transport.connections_made == 1 and names == ["localhost"]
        strict, _ = _client(ctx=ssl.create_default_context())  # the system's CAs: not this certificate
        with pytest.raises(httpx2.ConnectError):
            strict.get(url)
    finally:
        server.close()


def test_requests_it_does_not_handle_go_to_the_fallback() -> None:
    seen: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(200, text="fallback")

    transport = Http11Transport(httpx2.MockTransport(handler), None)
    client = httpx2.Client(transport=transport, trust_env=False)
    _OPEN.append(client)
    response = client.get("http://127.0.0.1:9/", extensions={"sni_hostname": "other"})
    assert response.text == "fallback" and len(seen) == 1


def test_the_sdk_client_gets_it_only_for_urls_no_proxy_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    import anthropic

    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    monkeypatch.setenv("NO_PROXY", "api.internal")
    client = sdk_tls.http_client(anthropic, "https://api.anthropic.com", anthropic.Timeout(60.0))
    ours = client._transport_for_url(httpx2.URL("https://api.internal/v1/messages"))
    proxied = client._transport_for_url(httpx2.URL("https://api.anthropic.com/v1/messages"))
    assert isinstance(ours, Http11Transport) and ours.ssl_context is sdk_tls.shared_context()
    assert type(proxied) is httpx2.HTTPTransport and type(proxied._pool).__name__ == "HTTPProxy"
    client.close()
    h2 = httpx2.Client(http2=True) if _has_h2() else None
    if h2 is not None:
        assert install(h2, sdk_tls.shared_context()) is False


def _has_h2() -> bool:
    try:
        import h2  # noqa: F401
    except ImportError:
        return False
    return True


def test_the_request_head_and_a_line_break_refused() -> None:
    from geode.providers.http11_wire import head_bytes

    head = head_bytes(b"POST", b"/v1/messages?beta=true", [(b"host", b"api:1"), (b"X-Host", b"y")], b"other")
    assert head == (b"POST /v1/messages?beta=true HTTP/1.1\r\nhost: api:1\r\nX-Host: y\r\n\r\n", False, False)
    assert (
        head_bytes(b"GET", b"/", [(b"X", b"y")], b"h:2")[0] == b"GET / HTTP/1.1\r\nHost: h:2\r\nX: y\r\n\r\n"
    )
    assert head_bytes(b"GET", b"/", [], b"h") == (b"GET / HTTP/1.1\r\nHost: h\r\n\r\n", False, False)
    flags = [(b"Connection", b"Close"), (b"Transfer-Encoding", b"chunked"), (b"X", b"close")]
    assert head_bytes(b"GET", b"/", flags, b"h")[1:] == (True, True)
    assert head_bytes(b"GET", b"/", flags[1:], b"h")[1:] == (True, False)  # X: close is not Connection
    assert head_bytes(b"GET", b"/", [(b"Connection", b"keep-alive")], b"h")[1:] == (False, False)
    assert head_bytes(b"GET", b"/", [(b"X", b"1"), (b"connection", b"close")], b"h")[2]
    for bad in ([(b"X", b"a\r\nInjected: 1")], [(b"X\n", b"a")], [(b"X", b"a\rb")]):
        with pytest.raises(httpx2.LocalProtocolError):
            head_bytes(b"GET", b"/", bad, b"h")
