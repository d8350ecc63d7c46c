"""web_fetch's address guard: every non-public address class refused (IPv4, IPv6, embedded forms), hostnames
resolving to them refused, public addresses passed, the allowlist and its config. No connection is made."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from geode.tools.builtin.web_guard import BLOCKED, WebAllow, address_class, check_target
from geode.tools.handlers import ToolFailure
from tests.tools.web_fetch_kit import patch_resolver, refuse_resolving

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
    refuse_resolving(monkeypatch)


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
    patch_resolver(monkeypatch, {"evil.test": [["127.0.0.1"]]})
    err = _refusal("https://evil.test/.env")
    assert err.error_type == BLOCKED and err.extra == {
        "host": "evil.test",
        "address": "127.0.0.1",
        "address_class": "loopback",
    }


def test_every_resolved_address_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    patch_resolver(monkeypatch, {"mixed.test": [["93.184.216.34", "::ffff:169.254.169.254"]]})
    err = _refusal("http://mixed.test/")
    assert err.extra["address"] == "::ffff:a9fe:a9fe"
    assert err.extra["address_class"] == "metadata (IPv4 embedded in IPv6)"


def test_the_allowlist_names_hosts_and_cidrs(monkeypatch: pytest.MonkeyPatch) -> None:
    patch_resolver(monkeypatch, {"intranet.test": [["10.1.2.3"]], "other.test": [["10.1.2.3"]]})
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


def test_the_allowlist_comes_from_the_global_config(tmp_path: Any) -> None:
    from pathlib import Path
    from types import SimpleNamespace

    from actors.executor import executor_from_config
    from actors.tree.config_sections import SCHEMAS
    from actors.tree.registry import ChildContext
    from geode.config_check import ConfigReport, check_config
    from geode.home import GeodeHome

    home = GeodeHome(tmp_path / "gh").ensure()
    home.config_file.write_text('[tools.web_fetch]\nallow_hosts = ["localhost", "10.0.0.0/8"]\n')
    ctx = ChildContext("executor", 1, home)  # its source: the file, read once
    ex = executor_from_config(SimpleNamespace(transport=None), ctx)  # type: ignore[arg-type]
    try:
        assert ex.services["web_fetch"] == WebAllow.parse(["localhost", "10.0.0.0/8"])
    finally:
        ex.shutdown()
    bad = {"tools": {"web_fetch": {"allow_hosts": ["http://intranet/"]}}}
    (line,) = check_config(ConfigReport(Path("/h/config.toml"), bad), schemas=SCHEMAS).errors
    assert "[tools] web_fetch.allow_hosts" in line and "http://intranet/" in line
