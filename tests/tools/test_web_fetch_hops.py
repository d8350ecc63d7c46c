"""web_fetch through the executor against loopback servers: refused unless allowlisted, every redirect hop
re-checked, the connection made to the checked IP (DNS rebinding, TLS name = the URL's host)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from geode.tools.builtin import web
from geode.tools.builtin.web_guard import BLOCKED, WebAllow
from tests.tools.web_fetch_kit import LocalServer, patch_resolver, redirect, refuse_resolving, tls_server


@pytest.fixture
def no_dns(monkeypatch: pytest.MonkeyPatch) -> None:
    refuse_resolving(monkeypatch)


ROUTES = {
    "/to-127.0.0.2": redirect("http://127.0.0.2:{port}/secret"),
    "/to-metadata": redirect("http://169.254.169.254/latest/meta-data/iam/"),
    "/to-mapped": redirect("http://[::ffff:127.0.0.2]:{port}/secret"),
    "/to-file": redirect("file:///etc/passwd"),
    "/hop": redirect("/final"),
    **{f"/loop{i}": redirect(f"/loop{i + 1}") for i in range(10)},
}


@pytest.fixture
def server() -> Iterator[LocalServer]:
    s = LocalServer(ROUTES)
    yield s
    s.close()


# [tools.web_fetch] hosts: these tests check addresses, so their hosts are fetched without asking
NO_ASK = ("127.0.0.1", "*.test")


def _rig(make_rig: Any, *allow: str, no_ask: tuple[str, ...] = NO_ASK) -> Any:
    return make_rig(services={"web_fetch": WebAllow.parse(allow, no_ask)})


def test_a_loopback_server_is_refused_unless_allowlisted(make_rig: Any, server: LocalServer) -> None:
    res = _rig(make_rig).call("web_fetch", {"url": f"{server.base}/.env"})
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
    make_rig: Any, server: LocalServer, path: str, address: str, cls: str
) -> None:
    res = _rig(make_rig, "127.0.0.1").call("web_fetch", {"url": server.base + path})
    assert (
        res.error_type == BLOCKED
        and res.content["address"] == address
        and res.content["address_class"] == cls
    )
    assert [p for p, _ in server.seen] == [path]  # the hop itself was never requested


def test_a_redirect_to_a_host_the_session_has_not_approved_is_not_followed(
    make_rig: Any, server: LocalServer
) -> None:
    """The hop's address may be reached (allow_hosts) but its host was never asked for: the model gets the
    URL to fetch (and be asked for) itself."""
    rig = _rig(make_rig, "127.0.0.0/8", no_ask=("127.0.0.1",))
    res = rig.call("web_fetch", {"url": server.base + "/to-127.0.0.2"})
    assert res.error_type == "web_fetch_new_host" and res.content["host"] == "127.0.0.2", res.content
    assert res.content["url"] == f"http://127.0.0.2:{server.port}/secret"
    assert [p for p, _ in server.seen] == ["/to-127.0.0.2"]


def test_redirects_are_followed_by_the_tool_within_limits(make_rig: Any, server: LocalServer) -> None:
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
    make_rig: Any, server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = patch_resolver(monkeypatch, {"app.test": [["127.0.0.1"]]})
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
    rig = _rig(make_rig)
    for url in ("http://rebind.test/a", "https://rebind.test:8443/b"):
        asked = patch_resolver(monkeypatch, {"rebind.test": [["93.184.216.34"], ["127.0.0.1"]]})
        res = rig.call("web_fetch", {"url": url})
        assert res.content["text"] == "public page" and res.content["url"] == url
        assert asked == ["rebind.test"]  # resolved once; the checked answer is the one connected to
    assert [r.url.host for r in sent] == ["93.184.216.34"] * 2  # never the later loopback answer
    assert [r.headers["host"] for r in sent] == ["rebind.test", "rebind.test:8443"]
    assert sent[1].extensions["sni_hostname"] == "rebind.test"  # TLS name = the original host


def test_https_to_the_checked_ip_verifies_the_original_host(
    make_rig: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """TLS goes to the pinned IP but SNI and certificate verification use the URL's host name."""
    server, trust = tls_server(tmp_path, "app.test")
    try:
        monkeypatch.setattr(web, "_client", lambda t: httpx.Client(timeout=t, verify=trust, trust_env=False))
        patch_resolver(monkeypatch, {"app.test": [["127.0.0.1"]], "wrong.test": [["127.0.0.1"]]})
        rig = _rig(make_rig, "app.test", "wrong.test")
        ok = rig.call("web_fetch", {"url": f"https://app.test:{server.port}/tls"})
        assert ok.content.get("text") == "fetched", ok.content
        bad = rig.call("web_fetch", {"url": f"https://wrong.test:{server.port}/tls"})
        assert bad.error_type == "fetch_failed" and "certificate" in bad.content["error"].lower(), bad.content
        assert server.seen == [("/tls", f"app.test:{server.port}")]
    finally:
        server.close()
