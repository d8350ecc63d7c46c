"""web_fetch's address guard: every non-public address class refused (IPv4, IPv6, embedded forms), hostnames
resolving to them refused, each redirect hop re-checked, the allowlist, and DNS rebinding (the connection goes
to the checked IP). No internet: public addresses only reach the check or a mock transport."""

from __future__ import annotations

import ipaddress
import ssl
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from geode.tools.builtin import web, web_guard
from geode.tools.builtin.web_guard import BLOCKED, WebAllow, address_class, check_target
from geode.tools.handlers import ToolFailure

BLOCKED_LITERALS = [
    ("127.0.0.1", "loopback"),
    ("127.255.255.254", "loopback"),
    ("0.0.0.0", "unspecified"),
    ("0.1.2.3", "unspecified"),
    ("169.254.0.1", "link_local"),
    ("169.254.169.254", "metadata"),
    ("169.254.170.2", "metadata"),
    ("100.100.100.200", "metadata"),
    ("10.0.0.1", "private"),
    ("172.16.5.4", "private"),
    ("172.31.255.255", "private"),
    ("192.168.1.1", "private"),
    ("100.64.0.1", "private"),  # CGNAT
    ("100.127.255.254", "private"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("255.255.255.255", "reserved"),
    ("240.0.0.1", "reserved"),
    ("192.0.2.1", "reserved"),
    ("198.18.0.1", "reserved"),
    ("::1", "loopback"),
    ("::", "unspecified"),
    ("fe80::1", "link_local"),
    ("febf::1", "link_local"),
    ("fc00::1", "private"),
    ("fd12:3456::1", "private"),
    ("fec0::1", "private"),
    ("fd00:ec2::254", "metadata"),
    ("ff02::1", "multicast"),
    ("ff0e::1", "multicast"),
    ("2001:db8::1", "reserved"),
    ("100::1", "reserved"),
    ("2001::1", "reserved"),  # Teredo
    ("4000::1", "reserved"),  # outside global unicast 2000::/3
    ("::ffff:127.0.0.1", "loopback (IPv4 embedded in IPv6)"),
    ("::ffff:7f00:2", "loopback (IPv4 embedded in IPv6)"),
    ("::ffff:169.254.169.254", "metadata (IPv4 embedded in IPv6)"),
    ("::ffff:169.254.1.1", "link_local (IPv4 embedded in IPv6)"),
    ("::ffff:10.0.0.1", "private (IPv4 embedded in IPv6)"),
    ("::ffff:192.168.0.1", "private (IPv4 embedded in IPv6)"),
    ("::ffff:100.64.0.1", "private (IPv4 embedded in IPv6)"),
    ("::ffff:0.0.0.0", "unspecified (IPv4 embedded in IPv6)"),
    ("::ffff:224.0.0.1", "multicast (IPv4 embedded in IPv6)"),
    ("::127.0.0.1", "loopback (IPv4 embedded in IPv6)"),  # IPv4-compatible
    ("::ffff:0:7f00:1", "loopback (IPv4 embedded in IPv6)"),  # SIIT
    ("64:ff9b::7f00:1", "loopback (IPv4 embedded in IPv6)"),  # NAT64
    ("64:ff9b::a9fe:a9fe", "metadata (IPv4 embedded in IPv6)"),
    ("2002:7f00:1::", "loopback (IPv4 embedded in IPv6)"),  # 6to4
    ("2002:c0a8:101::1", "private (IPv4 embedded in IPv6)"),
]
PUBLIC = ["93.184.216.34", "8.8.8.8", "1.1.1.1", "2606:4700::1111", "2a00:1450:4001::200e", "::ffff:8.8.8.8"]


def _url(ip: str, rest: str = "/") -> str:
    return f"http://[{ip}]{rest}" if ":" in ip else f"http://{ip}{rest}"


def _refusal(url: str, allow: WebAllow = WebAllow()) -> ToolFailure:
    with pytest.raises(ToolFailure) as info:
        check_target(url, allow)
    return info.value


@pytest.fixture
def no_dns(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*a: Any, **k: Any) -> Any:
        raise AssertionError(f"resolved {a[0]!r}: IP literals and metadata names need no resolver")

    monkeypatch.setattr(web_guard, "getaddrinfo", fail)


def _resolver(monkeypatch: pytest.MonkeyPatch, answers: dict[str, list[list[str]]]) -> list[str]:
    """Patch the guard's getaddrinfo: each call for a host pops its next answer (the last one repeats)."""
    asked: list[str] = []

    def fake(host: str, port: Any, *a: Any, **k: Any) -> list[Any]:
        asked.append(host)
        queue = answers[host]
        ips = queue.pop(0) if len(queue) > 1 else queue[0]
        return [(10 if ":" in ip else 2, 1, 6, "", (ip, port)) for ip in ips]

    monkeypatch.setattr(web_guard, "getaddrinfo", fake)
    return asked


@pytest.mark.parametrize(("ip", "cls"), BLOCKED_LITERALS)
def test_every_non_public_address_class_is_refused(ip: str, cls: str, no_dns: None) -> None:
    assert address_class(ipaddress.ip_address(ip)) == cls
    err = _refusal(_url(ip, ":8080/.env"))
    assert err.error_type == BLOCKED and err.extra["address_class"] == cls
    assert cls in err.message and "allow_hosts" in err.message


@pytest.mark.parametrize("ip", PUBLIC)
def test_a_public_literal_passes_the_check(ip: str, no_dns: None) -> None:
    assert address_class(ipaddress.ip_address(ip)) is None
    assert check_target(_url(ip), WebAllow()).addresses == (ipaddress.ip_address(ip),)


@pytest.mark.parametrize(
    "url", ["http://2130706433/", "http://0x7f000001/", "http://127.1/", "http://0x7f.1/"]
)
def test_numeric_spellings_of_loopback_are_resolved_and_refused(url: str) -> None:
    err = _refusal(url)  # the system resolver parses these without a DNS query
    assert err.error_type == BLOCKED and err.extra["address"] == "127.0.0.1"


@pytest.mark.parametrize(
    "url",
    [
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://METADATA.google.internal./",
        "http://metadata/",
    ],
)
def test_metadata_names_are_refused_before_resolving(url: str, no_dns: None) -> None:
    err = _refusal(url)
    assert err.error_type == BLOCKED and err.extra["address_class"] == "metadata"


def test_a_hostname_resolving_to_loopback_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    _resolver(monkeypatch, {"evil.test": [["127.0.0.1"]]})
    err = _refusal("https://evil.test/.env")
    assert err.error_type == BLOCKED and err.extra == {
        "host": "evil.test",
        "address": "127.0.0.1",
        "address_class": "loopback",
    }


def test_every_resolved_address_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    _resolver(monkeypatch, {"mixed.test": [["93.184.216.34", "::ffff:169.254.169.254"]]})
    err = _refusal("http://mixed.test/")
    assert err.extra["address"] == "::ffff:a9fe:a9fe"
    assert err.extra["address_class"] == "metadata (IPv4 embedded in IPv6)"


def test_the_allowlist_names_hosts_and_cidrs(monkeypatch: pytest.MonkeyPatch) -> None:
    _resolver(monkeypatch, {"intranet.test": [["10.1.2.3"]], "other.test": [["10.1.2.3"]]})
    by_name = WebAllow.parse(["Intranet.Test."])
    assert check_target("http://intranet.test/", by_name).addresses == (ipaddress.ip_address("10.1.2.3"),)
    assert _refusal("http://other.test/", by_name).extra["address_class"] == "private"
    by_net = WebAllow.parse(["10.0.0.0/8", "::1"])
    assert check_target("http://other.test/", by_net).host == "other.test"
    assert check_target("http://[::ffff:10.9.9.9]/", by_net).host == "::ffff:10.9.9.9"
    assert check_target("http://[::1]:9/", by_net).port == 9
    assert _refusal("http://127.0.0.1/", by_net).extra["address_class"] == "loopback"
    with pytest.raises(ValueError, match="not a hostname"):
        WebAllow.parse(["http://x/"])


# --- fetching through the executor ------------------------------------------------------------------------


class _Server:
    """A loopback HTTP server recording each request's path and Host header; ``routes`` map path → handler."""

    def __init__(
        self, routes: dict[str, Callable[[BaseHTTPRequestHandler], None]], tls: ssl.SSLContext | None = None
    ) -> None:
        self.seen: list[tuple[str, str]] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.seen.append((self.path, self.headers.get("Host", "")))
                routes.get(self.path, _page(b"<html><title>ok</title><p>fetched</p></html>"))(self)

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


def _page(body: bytes) -> Callable[[BaseHTTPRequestHandler], None]:
    def send(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/html")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    return send


def _redirect(location: str) -> Callable[[BaseHTTPRequestHandler], None]:
    def send(h: BaseHTTPRequestHandler) -> None:
        h.send_response(302)
        h.send_header("Location", location.replace("{port}", str(h.server.server_address[1])))
        h.send_header("Content-Length", "0")
        h.end_headers()

    return send


ROUTES = {
    "/to-127.0.0.2": _redirect("http://127.0.0.2:{port}/secret"),
    "/to-metadata": _redirect("http://169.254.169.254/latest/meta-data/iam/"),
    "/to-mapped": _redirect("http://[::ffff:127.0.0.2]:{port}/secret"),
    "/to-file": _redirect("file:///etc/passwd"),
    "/hop": _redirect("/final"),
    **{f"/loop{i}": _redirect(f"/loop{i + 1}") for i in range(10)},
}


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server(ROUTES)
    yield s
    s.close()


def _rig(make_rig: Any, *allow: str) -> Any:
    return make_rig(services={"web_fetch": WebAllow.parse(allow)})


def test_a_loopback_server_is_refused_unless_allowlisted(make_rig: Any, server: _Server) -> None:
    res = make_rig().call("web_fetch", {"url": f"{server.base}/.env"})
    assert res.is_error and res.error_type == BLOCKED and res.content["address_class"] == "loopback"
    assert server.seen == []  # refused before connecting
    for allow in ("127.0.0.1", "127.0.0.0/8"):
        ok = _rig(make_rig, allow).call("web_fetch", {"url": f"{server.base}/.env"})
        assert not ok.is_error and ok.content["text"] == "fetched", ok.content
    assert server.seen == [("/.env", f"127.0.0.1:{server.port}")] * 2


@pytest.mark.parametrize(
    ("path", "address", "cls"),
    [
        ("/to-127.0.0.2", "127.0.0.2", "loopback"),
        ("/to-metadata", "169.254.169.254", "metadata"),
        ("/to-mapped", "::ffff:7f00:2", "loopback (IPv4 embedded in IPv6)"),
    ],
)
def test_each_redirect_hop_is_checked(
    make_rig: Any, server: _Server, path: str, address: str, cls: str
) -> None:
    res = _rig(make_rig, "127.0.0.1").call("web_fetch", {"url": server.base + path})
    assert (
        res.error_type == BLOCKED
        and res.content["address"] == address
        and res.content["address_class"] == cls
    )
    assert [p for p, _ in server.seen] == [path]  # the hop itself was never requested


def test_redirects_are_followed_by_the_tool_within_limits(make_rig: Any, server: _Server) -> None:
    rig = _rig(make_rig, "127.0.0.1")
    ok = rig.call("web_fetch", {"url": f"{server.base}/hop"})
    assert ok.content["text"] == "fetched" and ok.content["url"] == f"{server.base}/final"
    assert rig.call("web_fetch", {"url": f"{server.base}/to-file"}).error_type == "invalid_url"
    five = rig.call("web_fetch", {"url": f"{server.base}/loop5"})
    assert five.content["url"] == f"{server.base}/loop10"
    six = rig.call("web_fetch", {"url": f"{server.base}/loop4"})
    assert six.error_type == "fetch_failed" and "more than 5 redirects" in six.content["error"]


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "ftp://example.com/x",
        "gopher://127.0.0.1:6379/_INFO",
        "http://user:pw@example.com/",
        "http://example.com@127.0.0.1/",
        "http:///nohost",
        "http://0177.0.0.1/",  # octal: httpx refuses it as a URL
    ],
)
def test_other_schemes_and_userinfo_are_invalid(make_rig: Any, url: str, no_dns: None) -> None:
    res = _rig(make_rig, "127.0.0.1").call("web_fetch", {"url": url})
    assert res.error_type == "invalid_url", res.content


def test_an_allowlisted_name_is_connected_by_its_checked_ip(
    make_rig: Any, server: _Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = _resolver(monkeypatch, {"app.test": [["127.0.0.1"]]})
    res = _rig(make_rig, "app.test").call("web_fetch", {"url": f"http://app.test:{server.port}/page"})
    assert res.content["text"] == "fetched" and res.content["url"] == f"http://app.test:{server.port}/page"
    assert server.seen == [("/page", f"app.test:{server.port}")] and asked == ["app.test"]


def test_dns_rebinding_cannot_move_the_connection(make_rig: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The resolver answers public first, loopback after: the request goes to the checked public IP."""
    sent: list[httpx.Request] = []

    def transport(req: httpx.Request) -> httpx.Response:
        sent.append(req)
        return httpx.Response(200, headers={"Content-Type": "text/plain"}, text="public page")

    monkeypatch.setattr(
        web, "_client", lambda timeout: httpx.Client(transport=httpx.MockTransport(transport))
    )
    rig = make_rig()
    for url in ("http://rebind.test/a", "https://rebind.test:8443/b"):
        asked = _resolver(monkeypatch, {"rebind.test": [["93.184.216.34"], ["127.0.0.1"]]})
        res = rig.call("web_fetch", {"url": url})
        assert res.content["text"] == "public page" and res.content["url"] == url
        assert asked == ["rebind.test"]  # resolved once; the checked answer is the one connected to
    assert [r.url.host for r in sent] == ["93.184.216.34"] * 2  # never the later loopback answer
    assert [r.headers["host"] for r in sent] == ["rebind.test", "rebind.test:8443"]
    assert sent[1].extensions["sni_hostname"] == "rebind.test"  # TLS name = the original host


def _tls_server(tmp_path: Any, name: str) -> tuple[_Server, ssl.SSLContext]:
    """An HTTPS loopback server whose self-signed certificate names ``name``, and a context trusting it."""
    import datetime

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
    return _Server({}, tls=sctx), ssl.create_default_context(cafile=str(pem))


def test_https_to_the_checked_ip_verifies_the_original_host(
    make_rig: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """TLS goes to the pinned IP but SNI and certificate verification use the URL's host name."""
    server, trust = _tls_server(tmp_path, "app.test")
    try:
        monkeypatch.setattr(web, "_client", lambda t: httpx.Client(timeout=t, verify=trust, trust_env=False))
        _resolver(monkeypatch, {"app.test": [["127.0.0.1"]], "wrong.test": [["127.0.0.1"]]})
        rig = _rig(make_rig, "app.test", "wrong.test")
        ok = rig.call("web_fetch", {"url": f"https://app.test:{server.port}/tls"})
        assert ok.content.get("text") == "fetched", ok.content
        bad = rig.call("web_fetch", {"url": f"https://wrong.test:{server.port}/tls"})
        assert bad.error_type == "fetch_failed" and "certificate" in bad.content["error"].lower(), bad.content
        assert server.seen == [("/tls", f"app.test:{server.port}")]
    finally:
        server.close()


def test_the_allowlist_comes_from_the_global_config(tmp_path: Any) -> None:
    from pathlib import Path
    from types import SimpleNamespace

    from actors.config_sections import SCHEMAS
    from actors.executor import executor_from_config
    from actors.registry import ChildContext
    from geode.config_check import ConfigReport, check_config
    from geode.home import GeodeHome

    home = GeodeHome(tmp_path / "gh").ensure()
    home.config_file.write_text('[tools.web_fetch]\nallow_hosts = ["localhost", "10.0.0.0/8"]\n')
    ctx = ChildContext("executor", 1, home, home.load_config())
    ex = executor_from_config(SimpleNamespace(transport=None), ctx)  # type: ignore[arg-type]
    try:
        assert ex.services["web_fetch"] == WebAllow.parse(["localhost", "10.0.0.0/8"])
    finally:
        ex.shutdown()
    bad = {"tools": {"web_fetch": {"allow_hosts": ["http://intranet/"]}}}
    (line,) = check_config(ConfigReport(Path("/h/config.toml"), bad), schemas=SCHEMAS).errors
    assert "[tools] web_fetch.allow_hosts" in line and "http://intranet/" in line
