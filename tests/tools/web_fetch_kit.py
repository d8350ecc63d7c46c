"""For the web_fetch tests: the guard's resolver patched; loopback HTTP(S) servers recording requests."""

from __future__ import annotations

import datetime
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from geode.tools.builtin import web_guard


def refuse_resolving(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any use of the guard's resolver fails the test (IP literals and metadata names need none)."""

    def fail(*a: Any, **k: Any) -> Any:
        raise AssertionError(f"resolved {a[0]!r}: IP literals and metadata names need no resolver")

    monkeypatch.setattr(web_guard, "getaddrinfo", fail)


def patch_resolver(monkeypatch: pytest.MonkeyPatch, answers: dict[str, list[list[str]]]) -> list[str]:
    """Patch the guard's getaddrinfo: each call for a host pops its next answer (the last one repeats)."""
    asked: list[str] = []

    def fake(host: str, port: Any, *a: Any, **k: Any) -> list[Any]:
        asked.append(host)
        queue = answers[host]
        ips = queue.pop(0) if len(queue) > 1 else queue[0]
        return [(10 if ":" in ip else 2, 1, 6, "", (ip, port)) for ip in ips]

    monkeypatch.setattr(web_guard, "getaddrinfo", fake)
    return asked


class LocalServer:
    """A loopback HTTP server recording each request's path and Host header; ``routes`` map path → handler."""

    def __init__(
        self, routes: dict[str, Callable[[BaseHTTPRequestHandler], None]], tls: ssl.SSLContext | None = None
    ) -> None:
        self.seen: list[tuple[str, str]] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.seen.append((self.path, self.headers.get("Host", "")))
                routes.get(self.path, page(b"<html><title>ok</title><p>fetched</p></html>"))(self)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_port
        self.base = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def page(body: bytes) -> Callable[[BaseHTTPRequestHandler], None]:
    def send(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/html")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    return send


def redirect(location: str) -> Callable[[BaseHTTPRequestHandler], None]:
    def send(h: BaseHTTPRequestHandler) -> None:
        h.send_response(302)
        h.send_header("Location", location.replace("{port}", str(h.server.server_address[1])))
        h.send_header("Content-Length", "0")
        h.end_headers()

    return send


def tls_server(tmp_path: Path, name: str) -> tuple[LocalServer, ssl.SSLContext]:
    """An HTTPS loopback server whose self-signed certificate names ``name``, and a context trusting it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    pem = tmp_path / f"{name}.pem"
    pem.write_bytes(
        cert.public_bytes(serialization.Encoding.PEM)
        + key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(pem)
    return LocalServer({}, tls=sctx), ssl.create_default_context(cafile=str(pem))
